"""`track` and `send --wait seen` with a Redis source: the group's acknowledgement is the receipt, and
Redis says where a message is (real redis-server, the sandbox for the send)."""

from __future__ import annotations

import json
import time

from kijito_pull.core.delivery import pull_through
from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import Message
from kijito_pull.core.pending import Holder
from kijito_pull.sandbox import Sandbox
from kijito_pull.sources import redis_streams
from tests.clirunner import Cli
from tests.redis.test_fleet_views import Each, Refuses, Text, source

PERSONA = "testbot"


def _append(redis_server, *ids: int) -> None:
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "t")
    for i in ids:
        appender.append(PERSONA, Message(i, "river", f"m{i}", "2026-12-02T10:00:00Z", False))


def _track(cli: Cli, redis_server, ident: int, *extra: str) -> dict:
    result = cli("track", str(ident), "--persona", PERSONA, "--source", redis_server.url, "--json", *extra)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def test_track_follows_a_message_through_a_group_from_pending_to_acknowledged(redis_server, tmp_path):
    _append(redis_server, 1, 2)
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "state")  # no token: Kijito is not asked
    assert _track(cli, redis_server, 1)["steps"][0]["state"] == "waiting"  # no group reads it yet
    pull_through(source(redis_server, "agent"), EventFactory(), Text(), holder=Holder("claude:s1"))
    source(redis_server, "audit").ensure_group()
    out = _track(cli, redis_server, 1)
    steps = {s["consumer"]: s for s in out["steps"]}
    assert steps["agent"]["state"] == "handed_over" and steps["agent"]["holder"] == "claude:s1"
    assert steps["agent"]["harness"] == "claude" and steps["agent"]["at"] and steps["agent"]["handovers"] == 1
    assert steps["audit"]["state"] == "waiting"
    assert out["state"] == "handed_over" and out["seen"] is False
    before = time.time()
    source(redis_server, "agent").settle("claude:s1", confirmed=[1])
    out = _track(cli, redis_server, 1, "--consumer", "agent")
    [step] = out["steps"]
    assert step["state"] == "acknowledged" and step["holder"] == "claude:s1" and out["seen"] is True
    at = time.mktime(time.strptime(step["at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before - 2 <= at <= time.time() + 1
    assert out["receipts"]["emitted"] is True
    assert _track(cli, redis_server, 2, "--consumer", "agent")["steps"][0]["state"] == "handed_over"
    assert _track(cli, redis_server, 99)["steps"][0]["state"] == "not_relayed"


def test_track_shows_mail_a_group_parked(redis_server, tmp_path):
    _append(redis_server, 5)
    pull_through(source(redis_server, "picky", max_attempts=1), EventFactory(), Refuses())
    out = _track(Cli("https://kijito.invalid/api", "", tmp_path / "state"), redis_server, 5)
    assert out["state"] == "parked" and "parked --retry 5" in out["steps"][0]["detail"]


def test_send_wait_seen_with_a_redis_source_returns_once_the_group_acknowledges(redis_server, tmp_path):
    with Sandbox(token="redis-journey-token").start() as sb:
        cli = Cli(sb.url, sb.token, tmp_path / "state")
        nobody = cli("send", "--to", PERSONA, "--wait", "seen", "--timeout", "0.5", "--source", redis_server.url,
                     "no one reads")
        assert nobody.code == 1 and "no group agent reads" in nobody.stderr and "not relayed" in nobody.stderr
        source(redis_server, "agent").ensure_group()
        sender = cli.spawn("send", "--to", PERSONA, "--wait", "seen", "--timeout", "30", "--json",
                           "--source", redis_server.url, "hello fleet")
        deadline = time.monotonic() + 15
        while not [m for m in sb.messages(PERSONA) if m["content"] == "hello fleet"] and time.monotonic() < deadline:
            time.sleep(0.05)
        [row] = [m for m in sb.messages(PERSONA) if m["content"] == "hello fleet"]
        _append(redis_server, row["id"])  # what the relay does
        time.sleep(1.0)
        assert sender.poll() is None  # relayed, not yet taken
        pull_through(source(redis_server, "agent"), EventFactory(), Each())  # a member takes it: XACK
        acked = time.monotonic()
        out, err = sender.communicate(timeout=30)
        assert sender.returncode == 0, err
        assert time.monotonic() - acked < 2.0
        sent = json.loads(out)
        assert sent["result"] == "seen" and sent["journey"]["steps"][0]["state"] == "acknowledged"


def test_a_relay_never_marks_mail_read_even_for_a_persona_with_receipts(redis_server, tmp_path):
    """The relay's taking is no model's: with [personas.P] mark_read = true in its config, the mail it
    appends stays unread at Kijito (the fleet's receipt is the group's acknowledgement)."""
    from tests.waiting import until

    with Sandbox(token="redis-journey-token").start() as sb:
        cli = Cli(sb.url, sb.token, tmp_path / "relay")
        (tmp_path / "relay").mkdir()
        cli.configure(f"[personas.{PERSONA}]\nmark_read = true\n")
        sent = [sb.send(PERSONA, "river", f"m{n}") for n in range(3)]
        proc = cli.spawn("relay", "--redis", redis_server.url, "--persona", PERSONA, "--interval", "0.1")
        try:
            stream = redis_streams.stream_key(PERSONA)
            assert until(lambda: len(redis_server.client().xrange(stream)) == 3, timeout=30)
            time.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(20)
        assert [m["read"] for m in sb.messages(PERSONA) if m["id"] in sent] == [False, False, False]
