"""A new account's first message (id 0, as Kijito numbers it) relayed into Redis and read from the group
once (the other entry points: tests/test_first_message.py)."""

from __future__ import annotations

import signal

from tests.clirunner import Cli
from tests.redis.test_relay import kids, relay, stop
from tests.waiting import until

PERSONA = "testbot"
TOKEN = "first-message-redis-token"


def test_relay_appends_message_0_and_the_group_hands_it_over_once(sb, tmp_path, redis_server):
    proc = relay(sb, tmp_path, "relay", redis_server)
    try:
        sent = [sb.send(PERSONA, "river", "first ever"), sb.send(PERSONA, "river", "second")]
        assert sent == [0, 1]
        assert until(lambda: kids(redis_server) == [0, 1], timeout=30), kids(redis_server)
    finally:
        assert stop(proc, signal.SIGTERM) == 0
    consumer = Cli(sb.url, sb.token, tmp_path / "consumer")
    got = consumer("--once", "--json", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
    assert got.code == 0, got.stderr
    assert got.new_ids == [0, 1]
    assert got.of_kind("alert") == []
    again = consumer("--once", "--json", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
    assert again.code == 0 and again.new_ids == []
