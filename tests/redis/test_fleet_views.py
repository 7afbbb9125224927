"""`status` and `parked` with a Redis source: what Redis says of each group (real redis-server)."""

from __future__ import annotations

import json
import signal
import time

from kijito_pull.core.delivery import pull_through
from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import BatchSink, Sink
from kijito_pull.sources import redis_streams
from tests.clirunner import Cli
from tests.waiting import until

PERSONA = "testbot"


class Refuses(Sink):
    parks = True

    def deliver(self, event, message):
        return False


class Each(Sink):
    """Takes every message but those in `refuse`."""

    parks = True

    def __init__(self, refuse=()):
        self.refuse = set(refuse)

    def deliver(self, event, message):
        return message.id not in self.refuse


class Text(BatchSink):
    def write(self, text, shown):
        return True


def source(redis_server, consumer, **options):
    return redis_streams.RedisSource(redis_streams.connect(redis_server.url), EventFactory(), persona=PERSONA,
                                     consumer=consumer, **options)


def test_status_shows_each_groups_lag_pending_entries_and_holders(redis_server, tmp_path):
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "t")
    for i in (1, 2, 3):
        appender.append(PERSONA, Message(i, "river", f"m{i}", "2026-12-02T10:00:00Z", False))
    pull_through(source(redis_server, "agent"), EventFactory(), Text(), holder=Holder("claude:s1"))
    source(redis_server, "audit").ensure_group()
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")
    result = cli("status", "--json", "--persona", PERSONA, "--source", redis_server.url)
    assert result.code == 0, result.stderr
    rows = {r["group"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["agent"]["lag"] == 0 and rows["agent"]["pending"] == 3
    assert rows["agent"]["holders"] == {"claude:s1": 3}
    assert rows["audit"]["lag"] == 3 and rows["audit"]["pending"] == 0
    text = cli("status", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "agent")
    assert "group agent" in text.stdout and "3 pending (claude:s1: 3)" in text.stdout and "audit" not in text.stdout


def test_parked_lists_the_groups_dead_letter_stream(redis_server, tmp_path):
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "t")
    appender.append(PERSONA, Message(7, "river", "poison", "2026-12-02T10:00:00Z", False))
    for _ in range(2):
        pull_through(source(redis_server, "ci", max_attempts=2), EventFactory(), Refuses())
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")
    result = cli("parked", "--json", "--persona", PERSONA, "--source", redis_server.url)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["id"], r["consumer"], r["attempts"]) for r in rows] == [(7, "ci", 2)]


def test_parked_retry_hands_the_message_to_its_group_once_and_to_no_other(redis_server, tmp_path):
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "t")
    for i in (7, 8):
        appender.append(PERSONA, Message(i, "river", f"m{i}", "2026-12-02T10:00:00Z", False))
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")  # no Kijito at all: nothing to ask it
    once = ("--once", "--json", "--persona", PERSONA, "--source", redis_server.url, "--consumer")
    assert cli(*once, "audit").new_ids == [7, 8]  # another group has both, acknowledged
    for _ in range(3):  # refused three times: parked at --max-attempts 3, 8 flows
        pull_through(source(redis_server, "ci", max_attempts=3), EventFactory(), Each(refuse={7}))
    listed = [json.loads(line) for line in cli("parked", "--json", "--persona", PERSONA, "--source",
                                               redis_server.url).stdout.splitlines()]
    assert [(r["id"], r["consumer"]) for r in listed] == [(7, "ci")]
    assert cli(*once, "ci").new_ids == []  # parked: no pull hands it over

    retry = ("parked", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci", "--retry", "7")
    result = cli(*retry)
    assert result.code == 0, result.stderr
    assert "handed over again on the next pull of group ci" in result.stdout
    assert cli("parked", "--persona", PERSONA, "--source", redis_server.url).stdout == "no parked mail\n"
    got = cli(*once, "ci")
    assert got.code == 0 and got.new_ids == [7]  # once, to its group
    assert cli(*once, "ci").new_ids == []  # acknowledged: not again
    assert cli(*once, "audit").new_ids == []  # no other group gets it again
    redis = redis_server.client()
    assert redis.xpending("kijito:{testbot}:mail", "ci")["pending"] == 0
    assert redis.xlen("kijito:{testbot}:mail") == 2  # nothing was appended for the retry
    again = cli(*retry)
    assert again.code == 1 and "is not parked for testbot (group ci)" in again.stderr


def test_parked_retry_of_a_trimmed_entry_keeps_it_parked(redis_server, tmp_path):
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "t")
    appender.append(PERSONA, Message(7, "river", "poison", "2026-12-02T10:00:00Z", False))
    for _ in range(2):
        pull_through(source(redis_server, "ci", max_attempts=2), EventFactory(), Refuses())
    redis = redis_server.client()
    redis.xtrim("kijito:{testbot}:mail", maxlen=0)
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")
    result = cli("parked", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci", "--retry", "7")
    assert result.code == 1 and "trimmed" in result.stderr and "stays parked" in result.stderr
    assert [f["kid"] for f in source(redis_server, "ci").parked()] == ["7"]
    assert redis.xpending("kijito:{testbot}:mail", "ci")["pending"] == 0


def test_parked_retry_needs_one_persona(redis_server, tmp_path):
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")
    assert cli("parked", "--source", redis_server.url, "--retry", "7").code == 2


def test_exec_from_redis_hands_the_mail_to_the_command_and_acks_only_on_exit_0(redis_server, tmp_path):
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "t")
    appender.append(PERSONA, Message(5, "river", "hello from the fleet", "2026-12-02T10:00:00Z", False))
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")
    cli.environ.pop("KIJITOMON_TOKEN")
    cli.state_dir.mkdir()  # the command runs there
    out = tmp_path / "given.txt"
    failed = cli("exec", "--persona", PERSONA, "--source", redis_server.url, "--", "sh", "-c",
                 "cat > /dev/null; exit 3")
    assert failed.code == 3
    assert source(redis_server, "agent").unseen() == [5]  # not acknowledged: unseen again
    ran = cli("exec", "--persona", PERSONA, "--source", redis_server.url, "--", "sh", "-c", f"cat > {out}")
    assert ran.code == 0, ran.stderr
    assert "hello from the fleet" in out.read_text()
    assert source(redis_server, "agent").unseen() == [] and source(redis_server, "agent").held_by("x") == []
    assert redis_server.client().xpending(redis_streams.stream_key(PERSONA), "agent")["pending"] == 0


def test_watch_from_redis_is_woken_by_an_append_and_exits_0_on_sigterm(redis_server, tmp_path):
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "t")
    appender.append(PERSONA, Message(1, "river", "before", "2026-12-02T10:00:00Z", False))
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")
    cli.environ.pop("KIJITOMON_TOKEN")
    out = tmp_path / "events.ndjson"
    with out.open("w") as stdout:
        proc = cli.spawn("watch", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "w",
                         "--poll-seconds", "600", stdout=stdout)
        try:
            def ids():
                return [e["id"] for e in map(json.loads, out.read_text().splitlines()) if e["event"] == "new"]

            assert until(lambda: ids() == [1], timeout=20), (ids(), proc.poll())
            appender.append(PERSONA, Message(2, "river", "after", "2026-12-02T10:00:01Z", False))
            started = time.monotonic()
            assert until(lambda: ids() == [1, 2], timeout=20), ids()
            assert time.monotonic() - started < 5  # woken by the append, not by the 600 s sweep
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(20)
    assert code == 0, proc.stderr.read()
    assert redis_server.client().xpending(redis_streams.stream_key(PERSONA), "w")["pending"] == 0
