"""sources/redis_tail.py against a real redis-server: a lost tail is found at the next check, however it was
lost, and a check in an idle fleet is one round trip (GET and SET of the canary), not one per persona."""

from __future__ import annotations

import pytest

from kijito_pull.core.models import ApiError, Message
from kijito_pull.sources import redis_streams, redis_tail
from kijito_pull.sources.redis_tail import TailCheck


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def message(kid: int) -> Message:
    return Message(id=kid, sender="river", content=f"m{kid}", created="2026-12-03T10:00:00Z", read=False)


def setup(redis_server, personas=("p1", "p2")):
    client = redis_streams.connect(redis_server.url)
    clock = Clock()
    tail = TailCheck(client, redis_server.url, interval=2.0, clock=clock)
    appender = redis_streams.Appender(client, redis_server.url)
    return client, clock, tail, appender


def append(appender, tail, persona, kids):
    for kid in kids:
        appender.append(persona, message(kid))
        tail.held(persona, kid)


def commands(observer) -> dict[str, int]:
    stats = observer.info("commandstats")
    return {name.removeprefix("cmdstat_"): row["calls"] for name, row in stats.items()}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0) and k != "info"}


def restart_with_aof_cut_at(redis_server, size: int) -> None:
    """A crash whose AOF kept only its first `size` bytes since the cut (fsync not reached): a lost tail."""
    aof = redis_server.aof_tail()
    redis_server.kill()
    with open(aof, "r+b") as f:
        f.truncate(size)
    redis_server.start()


def test_an_idle_check_is_the_canary_alone_whatever_the_number_of_personas(redis_server):
    client, clock, tail, appender = setup(redis_server)
    for n in range(50):
        append(appender, tail, f"p{n}", [10 * n + 1, 10 * n + 2])
    assert tail.lost() == {}  # the first check looks at everything remembered
    assert tail.full_checks == 1
    observer = redis_server.client()
    before = commands(observer)
    for _ in range(5):
        clock.now += 2
        assert tail.lost() == {}
    assert delta(before, commands(observer)) == {"get": 5, "set": 5}
    append(appender, tail, "p7", [99])
    before = commands(observer)
    assert tail.lost() == {}
    assert delta(before, commands(observer)) == {"get": 1, "set": 1, "hmget": 1}  # only what is new


def test_a_lost_tail_after_the_last_check_is_found_by_the_ids_appended_since(redis_server):
    client, clock, tail, appender = setup(redis_server)
    append(appender, tail, "p1", [1, 2, 3])
    assert tail.lost() == {}
    kept = redis_server.aof_tail().stat().st_size  # the canary of that check is in the AOF, and 1..3
    append(appender, tail, "p1", [4, 5])
    append(appender, tail, "p2", [6])
    restart_with_aof_cut_at(redis_server, kept)
    assert tail.lost() == {"p1": [4, 5], "p2": [6]}
    assert tail.full_checks == 1  # the canary was intact: the ids since it told it all


def test_a_tail_lost_from_before_the_last_check_is_found_through_the_canary(redis_server):
    client, clock, tail, appender = setup(redis_server)
    append(appender, tail, "p1", [1])
    assert tail.lost() == {}
    kept = redis_server.aof_tail().stat().st_size
    append(appender, tail, "p1", [2, 3])
    clock.now += 2
    assert tail.lost() == {}  # 2 and 3 checked, then the canary rewritten: all after the cut
    restart_with_aof_cut_at(redis_server, kept)
    assert tail.lost() == {"p1": [2, 3]}  # nothing new since: only the canary says anything was lost
    assert tail.full_checks == 2


def test_a_flush_and_a_key_deleted_on_its_own_are_found(redis_server):
    client, clock, tail, appender = setup(redis_server)
    append(appender, tail, "p1", [1, 2])
    append(appender, tail, "p2", [3])
    assert tail.lost() == {}
    redis_server.client().flushall()
    assert tail.lost() == {"p1": [1, 2], "p2": [3]}
    append(appender, tail, "p1", [1, 2])
    append(appender, tail, "p2", [3])
    assert tail.lost() == {}
    redis_server.client().delete(redis_streams.ids_key("p2"))  # evicted alone: not a suffix loss
    clock.now += 2
    assert tail.lost() == {}  # the canary cannot see it ...
    clock.now += redis_tail.FULL_EVERY
    assert tail.lost() == {"p2": [3]}  # ... the check of everything, every FULL_EVERY seconds, does


def test_a_failed_check_loses_nothing_it_was_to_look_at(redis_server):
    client, clock, tail, appender = setup(redis_server)
    append(appender, tail, "p1", [1])
    assert tail.lost() == {}
    append(appender, tail, "p1", [2])
    redis_server.stop()
    with pytest.raises(ApiError, match="Redis at .* failed"):
        tail.lost()
    redis_server.wipe()  # it comes back empty
    assert tail.lost() == {"p1": [1, 2]}


def test_forgotten_ids_are_not_checked_and_a_failed_refill_is_looked_at_again(redis_server):
    client, clock, tail, appender = setup(redis_server)
    append(appender, tail, "p1", [1, 2, 3])
    assert tail.lost() == {}
    redis_server.client().flushall()
    assert tail.lost() == {"p1": [1, 2, 3]}
    tail.forget("p1", 2)  # gone from Kijito too
    tail.recheck("p1", [1, 2, 3])  # the refill failed before it appended anything
    assert tail.lost() == {"p1": [1, 3]}


def test_the_newest_known_ids_are_remembered(redis_server, monkeypatch):
    monkeypatch.setattr(redis_tail, "KNOWN", 3)
    client, clock, tail, appender = setup(redis_server)
    append(appender, tail, "p1", [1, 2, 3, 4, 5])
    assert list(tail.known["p1"]) == [3, 4, 5]
