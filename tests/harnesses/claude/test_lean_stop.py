"""Lean Stop hooks: with the session's waker alive and vouching that nothing is new, the Stop hook answers
without asking the server; any doubt (no waker, news, a changed cursor file, a dead waker) and it pulls.

A real waker process (`kijito-pull hook claude-waker`, interactive) long-polls the sandbox over real HTTP;
the Stop hooks run in-process; the sandbox's request log shows which of them read the inbox.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from kijito_pull.harnesses.session import lifecycle
from tests.harnesses.claude.conftest import TOKEN  # noqa: F401 - the sandbox (tests/conftest.py) serves it
from tests.harnesses.claude.test_hooks import PERSONA, Hooks

SID = "lean-1"


def _inbox_reads(sb) -> int:
    return sum(1 for r in sb.requests if r.get("path", "").startswith("/api/inbox"))


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def hooks(sb, project, tmp_path) -> Hooks:
    return Hooks(sb, project, tmp_path / "state", KIJITO_PULL_MODE="interactive")


@pytest.fixture
def waker(hooks, sb, tmp_path):
    sb.send(to=PERSONA, sender="loom", content="before")
    assert hooks.cli("--once", "--persona", PERSONA)[0] == 0  # a cursor, nothing unseen
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    proc = hooks.spawn("claude-waker", session_id=SID, hook_event_name="SessionStart", source="startup",
                       transcript_path=str(transcript))
    current = hooks.state / "sessions" / f"{SID}.current"
    assert _wait(current.exists, 10), proc.stderr.read() if proc.poll() is not None else "no vouch"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(5)


def test_a_stop_hook_with_nothing_new_reads_nothing_from_the_server_while_the_waker_vouches(hooks, sb, waker):
    environ = hooks.environ
    assert lifecycle.nothing_new(environ, SID, PERSONA)
    sb.clear_requests()
    code, out, err = hooks("claude-stop", session_id=SID, hook_event_name="Stop", stop_hook_active=False)
    assert (code, out, err) == (0, "", "")
    assert _inbox_reads(sb) == 0

    # The same hook for a session whose waker vouches for nothing pulls as before.
    code, out, err = hooks("claude-stop", session_id="no-waker", hook_event_name="Stop", stop_hook_active=False)
    assert (code, out) == (0, "") and _inbox_reads(sb) == 1

    # A changed cursor file (any write: here only its time) is a doubt: the hook pulls.
    [state_file] = (hooks.state / "cursors").glob("*.json")
    os.utime(state_file, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert not lifecycle.nothing_new(environ, SID, PERSONA)
    sb.clear_requests()
    hooks("claude-stop", session_id=SID, hook_event_name="Stop", stop_hook_active=False)
    assert _inbox_reads(sb) == 1


def test_new_mail_ends_the_vouch_and_the_stop_hook_hands_it_over(hooks, sb, waker):
    sb.send(to=PERSONA, sender="loom", content="NEW-MAIL: look")
    assert waker.wait(10) == 2  # the doorbell rang (this waker has no socket to push through)
    # The ring took the waker's word back: its note is gone (a dead waker would not vouch anyway, so
    # nothing_new alone could not tell).
    assert not (lifecycle.sessions_dir(hooks.environ) / f"{SID}.current").exists()
    assert not lifecycle.nothing_new(hooks.environ, SID, PERSONA)
    code, out, _ = hooks("claude-stop", session_id=SID, hook_event_name="Stop", stop_hook_active=False)
    assert code == 0 and "NEW-MAIL" in json.loads(out)["reason"]


def test_a_dead_waker_vouches_for_nothing(hooks, sb, waker):
    waker.kill()
    waker.wait(5)
    assert not lifecycle.nothing_new(hooks.environ, SID, PERSONA)
    sb.send(to=PERSONA, sender="loom", content="AFTER-DEATH")
    code, out, _ = hooks("claude-stop", session_id=SID, hook_event_name="Stop", stop_hook_active=False)
    assert "AFTER-DEATH" in json.loads(out)["reason"]


def test_the_vouch_expires(hooks, waker):
    path = hooks.state / "sessions" / f"{SID}.current"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "until": time.time() - 1}))
    assert not lifecycle.nothing_new(hooks.environ, SID, PERSONA)
    assert not lifecycle.nothing_new(hooks.environ, SID, "someone-else")
    path.write_text(json.dumps({**data}))
    assert lifecycle.nothing_new(hooks.environ, SID, PERSONA)
    assert not lifecycle.nothing_new(hooks.environ, SID, "someone-else")
