"""The Redis source's wake (sources/redis_wake.py) against a real redis-server: one XREAD BLOCK over several
personas' streams (the watch loop's), woken by an append to any of them, once per burst, and never by an
entry that was there when the wake was made."""

from __future__ import annotations

import time

from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import Message
from kijito_pull.sources import redis_streams, redis_wake
from kijito_pull.sources.redis_streams import Appender, RedisSource


def _message(kid: int) -> Message:
    return Message(kid, "river", f"m{kid}", "2026-12-02T10:00:00Z", False)


def test_one_wake_over_several_streams_wakes_on_each_and_once_per_burst(redis_server):
    client = redis_streams.connect(redis_server.url)
    appender = Appender(client, "t")
    appender.append("one", _message(1))  # there before the wake is made: not news
    sources = [RedisSource(client, EventFactory(), persona=p, consumer="g", where="test") for p in ("one", "two")]
    wake = redis_wake.several(sources, hold=5)

    started = time.monotonic()
    assert not wake.wait(brief=True).news  # a quiet stream blocks for the hold, then says nothing new
    assert time.monotonic() - started >= 0.9

    for kid in (2, 3, 4):  # a burst on the second persona's stream
        appender.append("two", _message(kid))
    woke = wake.wait()
    assert woke.news and woke.failed is None
    assert not wake.wait(brief=True).news  # the burst woke it once: the wait moved on to the newest entry

    appender.append("one", _message(5))
    assert wake.wait().news  # the first persona's stream wakes the same wait


def test_a_wake_whose_redis_went_away_says_so_and_looks_again_once_it_is_back(redis_server):
    client = redis_streams.connect(redis_server.url, timeout=2)
    source = RedisSource(client, EventFactory(), persona="one", consumer="g", where="test")
    wake = source.wake(hold=5, poll=60)
    redis_server.stop()
    failed = wake.wait(brief=True)
    assert failed.news and failed.failed is not None and failed.pause > 0
    redis_server.start()
    assert wake.wait(brief=True).news  # back: news, so the caller looks again (Redis may have lost entries)
