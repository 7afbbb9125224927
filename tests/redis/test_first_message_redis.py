"""A new account's first message (id 0, as Kijito numbers it) relayed into Redis and read from the group
once (the other entry points: tests/test_first_message.py)."""

from __future__ import annotations

import signal

from kijito_pull.sources import redis_streams
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


def test_a_relays_first_contact_carries_more_than_an_agents_replay_and_says_what_it_left(sb, tmp_path, redis_server):
    """The chaos trial's loss under load (scripts/fleet_chaos.py --no-warmup): a relay whose first contact came
    after more than 50 messages were waiting carried only the newest 50 into the stream (an agent's
    --max-replay), and said so only in an event no one reads. Now it carries up to --max-replay 10,000, and
    what a smaller cap leaves at Kijito is one sentence on stderr."""
    sent = [sb.send(PERSONA, "river", f"waiting {n}") for n in range(60)]
    proc = relay(sb, tmp_path, "relay", redis_server)
    try:
        assert until(lambda: kids(redis_server) == sent, timeout=30), kids(redis_server)
    finally:
        assert stop(proc, signal.SIGTERM) == 0
    other = redis_streams.stream_key("capped")
    capped = [sb.send("capped", "river", f"waiting {n}") for n in range(5)]
    cli = Cli(sb.url, sb.token, tmp_path / "small")
    small = cli.spawn("relay", "--redis", redis_server.url, "--persona", "capped", "--interval", "0.1",
                      "--max-replay", "3")
    try:
        assert until(lambda: len(redis_server.client().xrange(other)) == 3, timeout=30)
    finally:
        small.send_signal(signal.SIGTERM)
        _, err = small.communicate(timeout=20)
    assert [int(f["kid"]) for _s, f in redis_server.client().xrange(other)] == capped[2:]
    assert "kijito-pull: relay: " in err and "capped" in err and "2" in err, err
