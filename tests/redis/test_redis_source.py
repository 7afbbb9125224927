"""The Redis Streams source (kijito_pull/sources/redis_streams.py) against a real redis-server, driven
through core.delivery.pull_through: the hand-over loop every entry point uses."""

from __future__ import annotations

import subprocess
import time

import pytest

from kijito_pull.core import process, render
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import ApiError, Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import HELD_KEPT, BatchSink, Sink
from kijito_pull.sources import redis_streams
from kijito_pull.sources.redis_streams import Appender, RedisSource

PERSONA = "testbot"


class Each(Sink):
    """Takes each message unless its id is in `refuse`."""

    def __init__(self, refuse=(), parks=False):
        self.taken: list[int] = []
        self.refuse = set(refuse)
        self.parks = parks

    def deliver(self, event, message):
        assert event["event_id"] == f"{PERSONA}:new:{message.id}"
        if message.id in self.refuse:
            return False
        self.taken.append(message.id)
        return True


class Text(BatchSink):
    def __init__(self, fail=False):
        super().__init__()
        self.texts: list[str] = []
        self.fail = fail

    def write(self, text, shown):
        if self.fail:
            return False
        self.texts.append(text)
        return True


@pytest.fixture
def factory():
    return EventFactory()


@pytest.fixture
def make(redis_server, factory):
    def make(consumer="agent", member=None, **options):
        client = redis_streams.connect(redis_server.url)
        return RedisSource(client, factory, persona=PERSONA, consumer=consumer, where="test",
                           member=member, **options)
    return make


def append(redis_server, ids):
    appender = Appender(redis_streams.connect(redis_server.url), "test")
    for i in ids:
        appender.append(PERSONA, Message(i, "river", f"message {i}", "2026-12-02T10:00:00Z", False, i % 2 == 0))


def test_two_groups_each_get_every_message(redis_server, make, factory):
    append(redis_server, [3, 5, 8])
    a, b = Each(), Each()
    assert pull_through(make("alpha"), factory, a).delivered == [3, 5, 8]
    assert pull_through(make("beta"), factory, b).delivered == [3, 5, 8]
    assert pull_through(make("alpha"), factory, Each()).delivered == []


def test_the_relay_append_is_idempotent_by_kijito_id_and_takes_late_ids(redis_server, make, factory):
    append(redis_server, [5, 8])
    append(redis_server, [5, 8, 3])  # 3 became visible late: below the stream's top, still taken
    assert redis_server.client().xlen(redis_streams.stream_key(PERSONA)) == 3
    sink = Each()
    pull_through(make(), factory, sink)
    assert sink.taken == [3, 5, 8]  # id order within a pull


def test_members_of_one_group_share_its_mail_each_message_once(redis_server, make, factory):
    append(redis_server, range(1, 7))
    one, two = make(member="m1"), make(member="m2")
    # m1 reads everything; its sink refuses at 4, so 4.. go back to the group at once (not after a deadline)
    first = Each(refuse={4})
    pull_through(one, factory, first)
    second = Each()
    pull_through(two, factory, second)
    assert first.taken == [1, 2, 3] and second.taken == [4, 5, 6]
    append(redis_server, [7, 8])
    third = Each()
    pull_through(one, factory, third)
    assert third.taken == [7, 8] and pull_through(two, factory, Each()).delivered == []


def test_nothing_is_acknowledged_until_the_sink_took_it(redis_server, make, factory):
    append(redis_server, [1, 2])
    r = redis_server.client()

    class Watching(Sink):
        def __init__(self):
            self.pending_seen = []

        def deliver(self, event, message):
            self.pending_seen.append(r.xpending(redis_streams.stream_key(PERSONA), "agent")["pending"])
            return message.id == 1

    sink = Watching()
    report = pull_through(make(), factory, sink)
    assert report.delivered == [1] and report.refused == 2
    assert sink.pending_seen == [2, 1]  # 1 still pending while the sink had it; acknowledged after
    assert pull_through(make(), factory, Each()).delivered == [2]  # the refused one was not acknowledged


def test_a_dead_holders_entries_are_claimed_back_after_claim_after(redis_server, make, factory):
    append(redis_server, [1, 2])
    dead = Holder("claude:dead-session", ttl=0.5)  # no process known: only the deadline tells
    sink = Text()
    assert pull_through(make(claim_after=0.5), factory, sink, holder=dead).delivered == [1, 2]
    assert make().held_by(dead.key) == [1, 2]
    live = Holder("claude:other-session", ttl=0.5)
    assert pull_through(make(claim_after=0.5), factory, Text(), holder=live).delivered == []  # still held
    time.sleep(0.6)
    again = Text()
    assert pull_through(make(claim_after=0.5), factory, again, holder=live).delivered == [1, 2]
    assert all(render.ref(PERSONA, i) in again.texts[0] for i in (1, 2))
    assert make().held_by(dead.key) == [] and make().held_by(live.key) == [1, 2]


def test_a_holder_confirms_from_its_record_and_settle_acknowledges(redis_server, make, factory):
    append(redis_server, [1, 2, 3])
    holder = Holder("pi:session")
    source = make()
    pull_through(source, factory, Text(), holder=holder)
    source.settle(holder.key, confirmed=[1], released=[2])
    assert source.held_by(holder.key) == [3]
    assert source.unseen() == [2]
    sink = Each()
    pull_through(make(member="script"), factory, sink)
    assert sink.taken == [2]  # 1 confirmed, 3 still held by the session


def test_a_failed_write_to_a_holder_gives_the_mail_back_at_once(redis_server, make, factory):
    append(redis_server, [1])
    holder = Holder("codex:s")
    assert pull_through(make(), factory, Text(fail=True), holder=holder).refused == 1
    assert make().held_by(holder.key) == [] and make().unseen() == [1]


def test_poison_mail_is_parked_at_the_limit_and_later_mail_flows(redis_server, make, factory):
    append(redis_server, [1, 2])
    for _ in range(2):
        assert pull_through(make(max_attempts=3), factory, Each(refuse={1}, parks=True)).refused == 1
    sink = Each(refuse={1}, parks=True)
    report = pull_through(make(max_attempts=3), factory, sink)
    assert report.parked == [1] and sink.taken == [2]
    parked = make().parked()
    assert [p["kid"] for p in parked] == ["1"] and parked[0]["attempts"] == "3"
    assert pull_through(make(), factory, Each()).delivered == []


def test_a_holder_that_never_confirms_is_parked_after_max_attempts_hand_overs(redis_server, make, factory):
    append(redis_server, [1])
    for n in range(2):
        pull_through(make(claim_after=0, max_attempts=2), factory, Text(), holder=Holder(f"claude:s{n}", ttl=0))
    report_sink = Text()
    report = pull_through(make(claim_after=0, max_attempts=2), factory, report_sink, holder=Holder("claude:s9", ttl=0))
    assert report.delivered == [] and [p["kid"] for p in make().parked()] == ["1"]
    assert any("parked" in note for note in report_sink.notes)


def test_an_unreachable_redis_is_one_api_error_line(factory):
    client = redis_streams.connect("redis://127.0.0.1:1/0", timeout=1)
    source = RedisSource(client, factory, persona=PERSONA, consumer="agent", where="redis://127.0.0.1:1/0")
    with pytest.raises(ApiError) as caught:
        pull_through(source, factory, Each())
    assert "redis://127.0.0.1:1/0" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("url", ["http://h:1/0", "redis:///0", "kijito://x"])
def test_a_wrong_scheme_is_refused(url):
    with pytest.raises(ValueError):
        redis_streams.check_url(url)


def test_a_holder_whose_process_died_on_this_host_is_claimed_back_at_once(redis_server, make, factory):
    append(redis_server, [1])
    child = subprocess.Popen(["sleep", "60"])
    me = process.proc(child.pid)
    gone = Holder("claude:killed", child.pid, me.start if me else None)
    assert pull_through(make(), factory, Text(), holder=gone).delivered == [1]
    other = Holder("claude:next")
    assert pull_through(make(), factory, Text(), holder=other).delivered == []  # its holder still runs
    child.kill()
    child.wait()
    assert pull_through(make(), factory, Text(), holder=other).delivered == [1]


def test_a_long_hand_over_keeps_its_holders_deadline_past_claim_after(redis_server, make, factory):
    append(redis_server, [1])
    long_run = Holder("exec:run", ttl=3600)  # an exec run: hours
    assert pull_through(make(claim_after=0.2), factory, Text(), holder=long_run).delivered == [1]
    time.sleep(0.3)
    assert pull_through(make(claim_after=0.2), factory, Text(), holder=Holder("claude:s", ttl=0.2)).delivered == []
    assert make().held_by(long_run.key) == [1]


def test_a_per_message_holder_settles_each_message_and_gives_back_the_rest_at_a_refusal(redis_server, make,
                                                                                          factory):
    append(redis_server, [1, 2, 3])
    counts = []

    class Child(Sink):
        holder = Holder("pi:child", ttl=600)

        def deliver(self, event, message):
            rows = redis_server.client().xpending_range(redis_streams.stream_key(PERSONA), "agent", "-", "+", 10)
            counts.append({r["message_id"]: r["times_delivered"] for r in rows})
            return message.id != 2

    report = pull_through(make(), factory, Child())
    assert report.delivered == [1] and report.refused == 2
    # each message counted as handed over when written: 2 was counted, 3 (never reached) was not
    assert sorted(counts[1].values()) == [0, 1]
    assert make().unseen() == [2, 3] and make().held_by("pi:child") == []
    sink = Each()
    pull_through(make(member="next"), factory, sink)
    assert sink.taken == [2, 3]


def test_a_keeping_holder_keeps_what_it_holds_across_pulls(redis_server, make, factory):
    append(redis_server, [1, 2])
    holder = Holder("claude:pusher")
    first = Text()
    first.held = HELD_KEPT
    assert pull_through(make(), factory, first, holder=holder).delivered == [1, 2]
    append(redis_server, [3])
    second = Text()
    second.held = HELD_KEPT
    report = pull_through(make(), factory, second, holder=holder)
    assert report.delivered == [3] and report.held == [1, 2, 3]
    assert make().held_by(holder.key) == [1, 2, 3] and make().unseen() == []
