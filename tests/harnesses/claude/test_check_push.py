"""`kijito-pull doctor`'s `push` check (kijito_pull.harnesses.claude.checks.check_push): how new mail reaches
the current Claude Code session, read from what the session's waker or pusher recorded when it armed, or
when it gave up pushing later in the session (lifecycle.write_push_mode). The record is written here by the
real writer, and in the last tests by the real `claude-pusher` and `claude-waker` hooks as processes against
a fake inbox socket (tests/harnesses/claude/test_inbox_socket.FakeInbox).
"""

from __future__ import annotations

import json

import pytest

from kijito_pull.doctor import OK, Context
from kijito_pull.harnesses.claude import inbox_socket
from kijito_pull.harnesses.claude.checks import check_push
from kijito_pull.harnesses.claude.gate import SESSION_ENV
from kijito_pull.harnesses.session import lifecycle
from tests.harnesses.claude.conftest import TOKEN  # noqa: F401 - the sandbox (tests/conftest.py) serves it
from tests.harnesses.claude.test_confirmed_handover import establish_cursor
from tests.harnesses.claude.test_hooks import PERSONA, Hooks
from tests.harnesses.claude.test_inbox_socket import FakeInbox
from tests.harnesses.claude.test_push_unit import Session
from tests.waiting import until

SID = "check-sess-1"
BARE = "claude -p --bare"


@pytest.fixture
def environ(tmp_path) -> dict[str, str]:
    return {"KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), SESSION_ENV: SID}


def check(environ: dict[str, str], tmp_path) -> tuple[str, str]:
    finding = check_push(Context(environ=environ, cwd=str(tmp_path)))
    assert finding.check == "push"
    return finding.verdict, finding.detail


def test_outside_a_session_it_only_notes_bare_runs(environ, tmp_path):
    del environ[SESSION_ENV]
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK and detail.startswith("not inside a Claude Code session") and BARE in detail


def test_an_unusable_session_id_is_named_as_such(environ, tmp_path):
    environ[SESSION_ENV] = "../../etc/passwd"
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK and "unusable" in detail and "invalid session id" in detail
    assert "not inside" not in detail


def test_a_session_whose_waker_has_not_reported_yet(environ, tmp_path):
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK and f"session {SID}: no waker has reported yet" in detail and BARE in detail


def test_a_session_that_pushes_says_so_and_why(environ, tmp_path):
    lifecycle.write_push_mode(environ, SID, True, "the session inbox socket /run/x.sock accepts connections")
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK
    assert detail == (f"session {SID}: new mail is pushed into the session as it arrives (the session inbox "
                      f"socket /run/x.sock accepts connections)")


def test_a_session_that_does_not_push_says_why_and_how_mail_arrives_instead(environ, tmp_path):
    lifecycle.write_push_mode(environ, SID, False, "KIJITO_PULL_CLAUDE_PUSH=off")
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK
    assert detail.startswith(f"session {SID}: not pushing (KIJITO_PULL_CLAUDE_PUSH=off)")
    assert "doorbell" in detail and "turn ends" in detail


def test_another_sessions_record_is_not_this_ones(environ, tmp_path):
    lifecycle.write_push_mode(environ, "other-session", True, "elsewhere")
    verdict, detail = check(environ, tmp_path)
    assert "no waker has reported yet" in detail and "elsewhere" not in detail


@pytest.mark.parametrize("content", ["not json", "[1, 2]", ""])
def test_a_damaged_record_counts_as_none(environ, tmp_path, content):
    lifecycle.write_push_mode(environ, SID, True, "written, then damaged")
    [record] = (tmp_path / "state").rglob(f"{SID}.push")
    record.write_text(content)
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK and "no waker has reported yet" in detail


# -- what the real claude-pusher hook records ------------------------------------------------------------


def test_a_named_socket_that_refuses_connections_is_recorded_for_the_doctor(sb, project, tmp_path):
    """The pusher hook looks at the socket once, while arming; when it does not accept connections the
    session's record says so (the hook leaves, its lease given back) and the Stop hook does the work."""
    hooks = Hooks(sb, project, tmp_path / "state")
    fake = FakeInbox()
    socket_env = fake.environ()
    fake.close()  # named in the environment, nobody listening
    code, out, err = hooks("claude-pusher", env=socket_env, session_id=SID, hook_event_name="SessionStart",
                           source="startup", transcript_path=str(tmp_path / "t.jsonl"))
    assert (code, out, err) == (0, "", "")
    environ = {**hooks.environ, SESSION_ENV: SID}
    assert lifecycle.live_lease(environ, SID) is None
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK and "not pushing" in detail and "does not accept connections" in detail


def test_push_off_records_nothing_and_the_pusher_leaves_at_once(sb, project, tmp_path):
    hooks = Hooks(sb, project, tmp_path / "state")
    fake = FakeInbox()
    try:
        code, out, err = hooks("claude-pusher", env={**fake.environ(), inbox_socket.PUSH_ENV: "off"},
                               session_id=SID, hook_event_name="SessionStart", source="startup",
                               transcript_path=str(tmp_path / "t.jsonl"))
        assert (code, out, err) == (0, "", "")
        assert fake.wait_connections(1, timeout=0.2) == []  # never connected
    finally:
        fake.close()
    assert sb.requests == []  # nor asked the server anything
    verdict, detail = check({**hooks.environ, SESSION_ENV: SID}, tmp_path)
    assert "no waker has reported yet" in detail


def test_the_record_is_plain_json_with_a_bounded_reason(environ, tmp_path):
    lifecycle.write_push_mode(environ, SID, False, "x" * 1000)
    [record] = (tmp_path / "state").rglob(f"{SID}.push")
    data = json.loads(record.read_text())
    assert data["pushing"] is False and len(data["why"]) == 300
    assert check(environ, tmp_path)[1].count("x") == 300


# -- a pusher that gives up mid-session ------------------------------------------------------------------




@pytest.mark.parametrize(("hook", "entrypoint", "exit_code"), [
    ("claude-pusher", "sdk-cli", 0),  # claude -p: it leaves; the Stop hook hands the mail over
    ("claude-waker", "cli", 2),  # interactive: it rings the doorbell instead
])
def test_a_pusher_that_gives_up_mid_session_is_recorded_as_not_pushing_with_the_reason(
        sb, project, tmp_path, hook, entrypoint, exit_code):
    """The session armed pushing (the record says so); then its inbox socket goes away, the push of new mail
    cannot be written, and the waker or pusher stops pushing for the session. The doctor must say so, with
    the reason, not go on reporting a session that pushes."""
    hooks = Hooks(sb, project, tmp_path / "state")
    environ = {**hooks.environ, SESSION_ENV: SID}
    establish_cursor(hooks, sb)
    fields = {"session_id": SID, "transcript_path": str(tmp_path / "t.jsonl"), "hook_event_name": "SessionStart",
              "source": "startup"}
    env = {"CLAUDE_CODE_ENTRYPOINT": entrypoint}
    assert hooks("claude-session-start", env=env, **fields)[0] == 0  # the sibling the waker waits for
    fake = FakeInbox()
    proc = hooks.spawn(hook, env={**fake.environ(), **env}, **fields)
    try:
        try:
            mode = until(lambda: lifecycle.read_push_mode(environ, SID))
            assert mode and mode["pushing"] is True, proc.stderr.read() if proc.poll() is not None else mode
            assert check(environ, tmp_path)[1].startswith(f"session {SID}: new mail is pushed")
        finally:
            fake.close()  # the socket is gone: the next push cannot be written
        mid = sb.send(PERSONA, "loom", "arrives after the socket went away")
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == exit_code, err
    assert f"session {SID}: not pushing any more: the session inbox socket cannot be written" in err

    mode = lifecycle.read_push_mode(environ, SID)
    assert mode is not None and mode["pushing"] is False
    assert "cannot be written" in mode["why"]
    verdict, detail = check(environ, tmp_path)
    assert verdict == OK and detail.startswith(f"session {SID}: not pushing (")
    assert "the session inbox socket cannot be written" in detail and "is pushed" not in detail
    assert lifecycle.live_lease(environ, SID) is None
    assert hooks.cli("--once", "--peek", "--json", "--persona", PERSONA)[1].count(f'"id": {mid}') == 1  # unseen


def test_the_record_says_not_pushing_while_an_earlier_push_still_waits_for_its_confirmation(
        sb, project, tmp_path):
    """Interactive: a first push is queued by Claude Code (not yet shown to the model); then the socket goes
    away and the next push fails. The waker stays until the queued push is confirmed, pushing nothing more
    meanwhile, and the record already says it is not pushing; once the model is given the first message
    the waker rings the doorbell for the second."""
    hooks = Hooks(sb, project, tmp_path / "state")
    environ = {**hooks.environ, SESSION_ENV: SID}
    establish_cursor(hooks, sb)
    session = Session(tmp_path / "t.jsonl")
    fields = {"session_id": SID, "transcript_path": str(session.path), "hook_event_name": "SessionStart",
              "source": "startup"}
    env = {"CLAUDE_CODE_ENTRYPOINT": "cli"}
    assert hooks("claude-session-start", env=env, **fields)[0] == 0
    fake = FakeInbox(on_message=session.queue)  # a busy session: queued, not yet given to the model
    proc = hooks.spawn("claude-waker", env={**fake.environ(), **env}, **fields)
    try:
        try:
            mode = until(lambda: lifecycle.read_push_mode(environ, SID))
            assert mode and mode["pushing"] is True, proc.stderr.read() if proc.poll() is not None else mode
            first = sb.send(PERSONA, "loom", "pushed, then queued")
            assert until(lambda: fake.messages), "nothing was pushed"
            [text] = fake.messages
        finally:
            fake.close()
        second = sb.send(PERSONA, "loom", "after the socket went away")
        assert until(lambda: not (lifecycle.read_push_mode(environ, SID) or {}).get("pushing", True))
        assert proc.poll() is None  # still there: the queued push is not confirmed yet
        detail = check(environ, tmp_path)[1]
        assert detail.startswith(f"session {SID}: not pushing (pushing stopped for this session: the session "
                                 f"inbox socket cannot be written")
        session.give(text)  # the model is given the first message
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 2 and f"(id {second})" in err, err
    assert "pushing stopped" in lifecycle.read_push_mode(environ, SID)["why"]
    once = hooks.cli("--once", "--peek", "--json", "--persona", PERSONA)[1]
    assert f'"id": {second}' in once and f'"id": {first}' not in once  # the first confirmed, the second unseen
