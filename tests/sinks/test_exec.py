"""The exec sink: the event in KIJITOMON_* variables only, the exit status as the acknowledgement."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import Message
from kijito_pull.sinks import exec as execsink
from kijito_pull.sinks.exec import ExecSink

TOKEN = "tok-3f9a-very-secret"
PASSWORD = "redis-pw-5d20"
# Dumps the command's whole environment as JSON, whatever the values hold (newlines included).
DUMP_ENV = '"$PY" -c \'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], "w"))\' "$OUT"'


def _base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PY": sys.executable,
            "OUT": str(tmp_path / "env.json"), "KIJITOMON_TOKEN": TOKEN, "OTHER_SERVICE_TOKEN": "t2",
            "KIJITO_PULL_REDIS_PASSWORD": PASSWORD, **extra}


def _new_event(content: str = "hello", sender: str = "river", persona: str = "testbot", message_id: int = 42):
    message = Message(id=message_id, sender=sender, content=content, created="2026-11-30T10:00:00Z", read=False)
    return EventFactory().new(persona, message), message


def test_the_event_arrives_as_kijitomon_variables_and_no_token_does(tmp_path):
    sink = ExecSink(DUMP_ENV, _base_env(tmp_path))
    event, message = _new_event()
    assert sink.deliver(event, message) is True
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["KIJITOMON_EVENT"] == "new"
    assert env["KIJITOMON_ID"] == "42"
    assert env["KIJITOMON_FROM"] == "river"
    assert env["KIJITOMON_PERSONA"] == "testbot"
    assert env["KIJITOMON_CONTENT"] == "hello"
    assert env["KIJITOMON_EVENT_ID"] == "testbot:new:42"
    assert env["KIJITOMON_NONCE"] == "UA1yWKpUt5A"
    assert "KIJITOMON_TOKEN" not in env and "OTHER_SERVICE_TOKEN" not in env
    assert TOKEN not in json.dumps(env)
    assert "KIJITO_PULL_REDIS_PASSWORD" not in env and PASSWORD not in json.dumps(env)


def test_hostile_content_arrives_verbatim_and_is_never_executed(tmp_path):
    marker, marker2, victim = tmp_path / "pwned", tmp_path / "pwned2", tmp_path / "victim"
    victim.mkdir()
    content = (f"$(touch {marker}); rm -rf {victim}; `touch {marker2}` && echo \"quoted\" 'single' "
               f"| cat > /dev/null\n; $HOME ${{PATH}} %s \\n \x1b[2J")
    event, message = _new_event(content=content, sender=f"$(touch {marker})", persona="a;touch x")
    sink = ExecSink(DUMP_ENV, _base_env(tmp_path))
    assert sink.deliver(event, message) is True
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["KIJITOMON_CONTENT"] == content
    assert env["KIJITOMON_FROM"] == f"$(touch {marker})"
    assert env["KIJITOMON_PERSONA"] == "a;touch x"
    assert not marker.exists() and not marker2.exists()
    assert victim.is_dir()


def test_exit_zero_is_a_delivery_and_says_nothing(tmp_path):
    errors = io.StringIO()
    sink = ExecSink("exit 0", _base_env(tmp_path), stderr=errors)
    assert sink.deliver(*_new_event()) is True
    assert errors.getvalue() == ""


def test_a_non_zero_exit_holds_the_cursor_and_says_so_without_secrets(tmp_path):
    errors = io.StringIO()
    sink = ExecSink(f"echo {TOKEN} >/dev/null; exit 3", _base_env(tmp_path), stderr=errors)
    event, message = _new_event(content="private body text")
    assert sink.deliver(event, message) is False
    lines = errors.getvalue().splitlines()
    assert len(lines) == 1
    assert "exited with status 3" in lines[0]
    assert "holding the cursor" in lines[0] and "delivered again" in lines[0]
    assert "testbot:new:42" in lines[0]
    assert TOKEN not in lines[0] and "private body text" not in lines[0]


def test_a_command_that_cannot_start_is_not_a_delivery(tmp_path, monkeypatch):
    monkeypatch.setattr(execsink, "SHELL", str(tmp_path / "no-such-shell"))
    errors = io.StringIO()
    sink = ExecSink("exit 0", _base_env(tmp_path), stderr=errors)
    assert sink.deliver(*_new_event()) is False
    assert "could not be started" in errors.getvalue()
    assert "holding the cursor" in errors.getvalue()


def _alive(pid: int) -> bool:
    if Path("/proc/self").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        return state != "Z"  # a zombie is dead; only its parent has not collected it yet
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    errors = io.StringIO()
    sink = ExecSink(f'sleep 100 & echo $! > "{pid_file}"; wait', _base_env(tmp_path), timeout=0.5,
                    stderr=errors)
    started = time.monotonic()
    assert sink.deliver(*_new_event()) is False
    assert time.monotonic() - started < 5
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child), "the command's own child outlived the timeout"
    assert "did not finish within 0.5 s" in errors.getvalue()
    assert "holding the cursor" in errors.getvalue()


def test_stdin_is_empty_even_when_ours_has_data(tmp_path):
    out = tmp_path / "stdin"
    sink = ExecSink(f'cat > "{out}"', _base_env(tmp_path), timeout=5)
    read_end, write_end = os.pipe()
    os.write(write_end, b"data meant for kijito-pull, not for the hook\n")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        assert sink.deliver(*_new_event()) is True
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert out.read_text() == ""


def test_a_signal_runs_the_command_but_a_failure_is_not_reported_as_a_held_cursor(tmp_path):
    errors = io.StringIO()
    sink = ExecSink(DUMP_ENV + "; exit 1", _base_env(tmp_path), stderr=errors)
    alert = EventFactory().signal("alert", "testbot", reason="source down")
    assert sink.signal(alert) is None
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["KIJITOMON_EVENT"] == "alert"
    assert env["KIJITOMON_REASON"] == "source down"
    assert "not retried" in errors.getvalue()
    assert "holding the cursor" not in errors.getvalue()
