"""Receipts a sender can wait on (`send --wait seen`), a message's journey (`track`), and receipts as a
per-persona choice (`[personas.P] mark_read`): real HTTP against the sandbox, real cursor files, real
`kijito-pull` processes. The real harness path (Claude Code confirming from its transcript) is
tests/e2e/test_receipts_e2e.py."""

from __future__ import annotations

import json
import time

import pytest

from kijito_pull.core import confirmations, journey
from kijito_pull.core.api import KijitoClient
from kijito_pull.core.engine import Engine
from kijito_pull.core.events import EventFactory
from kijito_pull.core.paths import Paths
from kijito_pull.core.pending import Holder
from kijito_pull.core.state import StateStore
from tests.clirunner import Cli

TOKEN = "receipts-wait-token"


def _configure(cli: Cli, text: str) -> None:
    cli.configure(text)


def _sent(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_recipient_that_never_runs_times_out_saying_still_unread_and_that_receipts_are_unknown(sb, cli):
    started = time.monotonic()
    result = cli("send", "--to", "river", "--from", "loom", "--wait", "seen", "--timeout", "1", "--json", "hi")
    assert result.code == 1, result.stderr
    assert 1.0 <= time.monotonic() - started < 5
    out = _sent(result)
    assert out["result"] == "timeout" and out["seen"] is False
    assert out["journey"]["state"] == "unread"
    assert out["journey"]["receipts"]["emitted"] is None  # nothing on this machine says
    assert [s["state"] for s in out["states"]][:2] == ["sent", "unread"]
    # Without --json, a person is told the same, and that receipts cannot be known here.
    text = cli("send", "--to", "river", "--from", "loom", "--wait", "seen", "--timeout", "0.3", "again")
    assert text.code == 1
    assert "sent message" in text.stdout
    assert "cannot tell whether river emits receipts" in text.stderr
    assert "not seen within 0.3 s" in text.stderr and "still unread at Kijito" in text.stderr


def test_recipient_with_receipts_configured_that_never_runs_times_out_unread(sb, cli):
    _configure(cli, "[personas.river]\nmark_read = true\n")
    result = cli("send", "--to", "river", "--wait", "seen", "--timeout", "0.5", "--json", "hi")
    assert result.code == 1
    out = _sent(result)
    assert out["result"] == "timeout" and out["journey"]["state"] == "unread"
    assert out["journey"]["receipts"]["emitted"] is True
    assert "[personas.river] mark_read" in out["journey"]["receipts"]["why"]


def test_recipient_read_here_without_receipts_is_said_at_once_not_waited_for(sb, cli):
    sb.send("river", "loom", "first")
    assert cli("--once", "--persona", "river").code == 0  # river is read on this machine, receipts off
    started = time.monotonic()
    result = cli("send", "--to", "river", "--wait", "seen", "--timeout", "60", "--json", "hi")
    assert result.code == 1
    assert time.monotonic() - started < 5  # not the 60 s
    out = _sent(result)
    assert out["result"] == "no_receipts" and out["journey"]["receipts"]["emitted"] is False
    assert out["journey"]["state"] == "waiting"  # its cursor has not reached it
    text = cli("send", "--to", "river", "--wait", "seen", "--timeout", "60", "hi")
    assert text.code == 1 and "without receipts" in text.stderr and "mark_read = true" in text.stderr


def test_on_a_relay_host_the_sender_is_told_to_wait_on_the_redis_group(sb, cli):
    sb.send("river", "loom", "first")
    # The relay's own Kijito cursor (consumer "relay"), as `kijito-pull relay` keeps it on this machine.
    assert cli("--once", "--persona", "river", "--consumer", "relay").code == 0
    result = cli("send", "--to", "river", "--wait", "seen", "--timeout", "0.3", "hi")
    assert result.code == 1
    assert "river is relayed from this machine into Redis" in result.stderr
    assert "wait with --source redis://" in result.stderr and "without receipts" not in result.stderr


def test_seen_once_a_receipts_emitting_consumer_takes_it_and_other_personas_are_left_unread(sb, cli):
    _configure(cli, "[personas.river]\nmark_read = true\n")
    sb.send("river", "loom", "establish the cursor")
    assert cli("--once", "--persona", "river").code == 0
    other = sb.send("loom", "river", "not river's")
    assert cli("--once", "--persona", "loom").code == 0  # loom has no receipts: left unread
    sender = cli.spawn("send", "--to", "river", "--from", "loom", "--wait", "seen", "--timeout", "30", "--json",
                       "wait for me")
    time.sleep(1.0)
    assert sender.poll() is None  # still waiting: not taken yet
    taken = cli.run("--once", "--persona", "river")  # the per-persona choice, honoured with no flag
    assert taken.code == 0 and "wait for me" in taken.stdout
    done_at = time.monotonic()
    out, err = sender.communicate(timeout=30)
    assert sender.returncode == 0, err
    assert time.monotonic() - done_at < 2.0
    sent = json.loads(out)
    assert sent["result"] == "seen" and sent["journey"]["state"] == "seen"
    assert [s["state"] for s in sent["states"]][0] == "sent" and "seen" in [s["state"] for s in sent["states"]]
    assert next(m for m in sb.messages("loom") if m["id"] == other)["read"] is False


def test_send_wait_usage_errors_exit_2_before_sending(sb, cli):
    for argv in (["--wait", "soon"], ["--wait", "seen", "--timeout", "0"], ["--source", "redis://127.0.0.1/0"],
                 ["--wait", "seen", "--source", "http://x"]):
        result = cli("send", "--to", "river", *argv, "hi")
        assert result.code == 2, (argv, result.stderr)
    assert sb.messages("river") == []
    assert "--wait" in cli("send", "--help").stdout and "Read receipts" in cli("send", "--help").stdout


def test_config_file_persona_table_is_checked(sb, cli):
    _configure(cli, "[personas.river]\nmark_read = \"yes\"\n")
    bad = cli("--once", "--persona", "river")
    assert bad.code == 2 and "mark_read must be true or false" in bad.stderr
    _configure(cli, "[personas.river]\ncolour = 1\n")
    assert "not a per-persona setting" in cli("--once", "--persona", "river").stderr


def _engine(sb, state_dir, persona="river") -> Engine:
    paths = Paths({"KIJITO_PULL_STATE_DIR": str(state_dir)})
    store = StateStore(*paths.cursor_files(sb.url, persona, "agent"), root=paths.state_dir,
                       identity={"api_base": sb.url, "persona": persona, "consumer": "agent"})
    return Engine(KijitoClient(sb.url, sb.token), store, EventFactory(), persona=persona)


def test_track_follows_a_hand_over_from_pending_to_confirmed_with_times(sb, cli):
    first = sb.send("river", "loom", "one")
    second = sb.send("river", "loom", "two")
    engine = _engine(sb, cli.state_dir)
    holder = Holder("claude:sess-1", ttl=600)
    with engine.open(holder=holder) as pull:
        pull.hand_over(list(pull.pending))
    result = cli("track", str(first), "--persona", "river", "--json")
    assert result.code == 0, result.stderr
    out = json.loads(result.stdout)
    local = next(s for s in out["steps"] if s["where"] == "this machine")
    assert out["state"] == "handed_over" and out["seen"] is False
    assert local["holder"] == "claude:sess-1" and local["harness"] == "claude" and local["at"]
    assert local["handovers"] == 1
    before = time.time()
    engine.settle("claude:sess-1", confirmed=[first])  # the harness's record showed it
    out = json.loads(cli("track", str(first), "--persona", "river", "--json").stdout)
    local = next(s for s in out["steps"] if s["where"] == "this machine")
    assert out["state"] == "confirmed" and local["holder"] == "claude:sess-1" and local["at"]
    assert next(s for s in out["steps"] if s["where"] == "kijito")["state"] == "unread"  # no receipts here
    assert "not yet" not in local["detail"]
    # The second stays handed over; the text form names the session and the harness's key.
    text = cli("track", str(second), "--persona", "river")
    assert "handed over to claude:sess-1" in text.stdout and "not confirmed" in text.stdout
    # The dashboard's reader: confirmations in the last hour, from the log beside the cursor.
    rows = journey.confirmed_since(Paths({"KIJITO_PULL_STATE_DIR": str(cli.state_dir)}).cursors_dir,
                                   time.time() - 3600)
    assert [(r["persona"], r["id"], r["holder"]) for r in rows] == [("river", first, "claude:sess-1")]
    assert rows[0]["consumer"] == "agent"
    logged = confirmations.read(engine.store.path)
    assert [c.id for c in logged] == [first] and logged[0].at >= before - 1
    assert (engine.store.path.stat().st_mode & 0o777) == 0o600
    assert (confirmations.log_path(engine.store.path).stat().st_mode & 0o777) == 0o600
    assert journey.confirmed_since(engine.store.path.parent, time.time() + 5) == []


def test_track_of_a_message_not_in_the_inbox_and_of_parked_mail(sb, cli):
    out = json.loads(cli("track", "999", "--persona", "river", "--json").stdout)
    assert out["state"] == "unknown" and "not in river's inbox" in out["steps"][0]["detail"]
    poison = sb.send("river", "loom", "poison")
    # A consumer that refused it up to the limit: parked through the engine's own refuse, as a sink's would be.
    engine = _engine(sb, cli.state_dir)
    engine.max_attempts = 1
    with engine.open() as pull:
        [message] = pull.pending
        pull.refuse(message, "the test refused it")
    out = json.loads(cli("track", str(poison), "--persona", "river", "--json").stdout)
    assert out["state"] == "parked"
    assert "parked --retry" in next(s for s in out["steps"] if s["state"] == "parked")["detail"]


def test_every_entry_point_builds_its_source_from_the_per_persona_choice(sb, cli):
    """Context.engine is where every entry point (hooks, watch, --once, exec) gets its source: receipts for
    river only, the environment and --mark-read still winning, and a marker taken back when they are off."""
    from kijito_pull.context import Context, Flags, Settings
    from kijito_pull.core.receipts import ReadReceipts, marker_path

    _configure(cli, "mark_read = false\n[personas.river]\nmark_read = true\n")
    with Context(Settings(cli.environ)) as ctx:
        assert isinstance(ctx.engine("river"), ReadReceipts)
        assert not isinstance(ctx.engine("loom"), ReadReceipts)
    with Context(Settings({**cli.environ, "KIJITO_PULL_MARK_READ": "0"})) as ctx:
        assert not isinstance(ctx.engine("river"), ReadReceipts)
    with Context(Settings(cli.environ, Flags(mark_read=True))) as ctx:
        assert isinstance(ctx.engine("loom"), ReadReceipts)
    sb.send("river", "loom", "hello")
    assert cli("--once", "--persona", "river").code == 0
    with Context(Settings(cli.environ)) as ctx:
        path = ctx.engine("river").store.path
    assert marker_path(path).exists() and (marker_path(path).stat().st_mode & 0o777) == 0o600
    assert cli("--once", "--persona", "river", env={"KIJITO_PULL_MARK_READ": "0"}).code == 0
    assert not marker_path(path).exists()  # pulled without receipts: the marker is taken back


def test_the_confirmation_log_is_bounded_and_survives_damage(tmp_path):
    cursor = tmp_path / "river.agent.json"
    for i in range(3000):  # well past one generation: rotated, one older generation kept
        confirmations.note(cursor, {i: "claude:s"}, at=1000.0 + i)
    kept = confirmations.read(cursor)
    assert kept[-1].id == 2999 and 500 < len(kept) < 3000
    assert [c.id for c in kept] == sorted(c.id for c in kept)
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) < 3 * confirmations.MAX_BYTES
    with open(confirmations.log_path(cursor), "a") as log:
        log.write("{not json\n")
    confirmations.note(cursor, {3000: "pi:s"}, at=5000.0)
    assert confirmations.read(cursor, ids=[3000]) == [confirmations.Confirmation(3000, "pi:s", 5000.0)]
    assert [c.id for c in confirmations.read(cursor, since=4000.0)] == [3000]


def test_confirmed_since_says_a_cursor_folder_it_cannot_read_is_unreadable_not_empty(tmp_path):
    from kijito_pull.core.state import StateError

    assert journey.confirmed_since(tmp_path / "none yet", 0.0) == []
    loop = tmp_path / "cursors"
    loop.symlink_to(loop)  # exists, can never be listed (a mode would not stop root)
    with pytest.raises(StateError, match="cannot be read"):  # not "no confirmation": it cannot see
        journey.confirmed_since(loop, 0.0)
