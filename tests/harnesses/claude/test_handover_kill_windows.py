"""A Claude hook killed at the worst moments of its hand-over (found by modelling scripts/crash_entries.py's
kill points one by one): the mail still reaches the model, in this session or the next.

A kill is simulated in-process by raising, right after the step it follows, an exception no handler
catches (nothing of the hook runs after a SIGKILL; the state already saved is what a kill leaves).
"""

from __future__ import annotations

import pytest

from kijito_pull.core.pull import Pull
from tests.harnesses.claude.conftest import TOKEN  # noqa: F401 - the sandbox (tests/conftest.py) serves it
from tests.harnesses.claude.test_confirmed_handover import Session, establish_cursor, state
from tests.harnesses.claude.test_hooks import PERSONA, Hooks


class Killed(BaseException):
    """SIGKILL: nothing after it runs."""


@pytest.fixture
def hooks(sb, project, tmp_path) -> Hooks:
    return Hooks(sb, project, tmp_path / "state", KIJITO_PULL_MAX_STOP_BLOCKS="100")


def test_a_hook_killed_right_after_its_durable_hand_over_leaves_the_mail_to_the_next_session(
        hooks, sb, tmp_path, monkeypatch):
    """The hand-over is saved as pending for the session before the answer is written. A kill right after
    that save (before anything else the hook does) must not leave the mail held by a session that ends:
    its SessionEnd releases it, and the next session gets it at once (not after the 30 min deadline)."""
    establish_cursor(hooks, sb)
    mids = [sb.send(to=PERSONA, sender="loom", content=f"m{i}") for i in range(2)]
    one = Session(hooks, "sess-1", tmp_path)
    real = Pull.hand_over

    def hand_over_then_killed(self, messages):
        real(self, messages)
        raise Killed

    monkeypatch.setattr(Pull, "hand_over", hand_over_then_killed)
    with pytest.raises(Killed):
        one.run("claude-stop")
    monkeypatch.setattr(Pull, "hand_over", real)
    [held] = state(hooks)["pending"]
    assert held["holder"] == "claude:sess-1" and held["ids"] == mids
    code, _, err = hooks("claude-session-end", session_id="sess-1", transcript_path=str(one.transcript),
                         reason="clear")
    assert code == 0, err
    two = Session(hooks, "sess-2", tmp_path)
    two.run("claude-session-start", source="clear")
    assert two.shown == mids


def test_a_hook_killed_after_reading_the_transcript_does_not_make_the_model_see_its_mail_twice(
        hooks, sb, tmp_path, monkeypatch):
    """The next hook of the session reads the transcript (and saves how far it read) before it saves the
    confirmation. Killed between the two, the confirmation is lost but the offset is kept, so the next look
    starts past the markers: the whole hand-over the model already had goes out again (seen in
    scripts/crash_entries.py: 2 kills of claude-session-start each repeated a hand-over of 50 messages)."""
    establish_cursor(hooks, sb)
    mids = [sb.send(to=PERSONA, sender="loom", content=f"m{i}") for i in range(3)]
    s = Session(hooks, "sess-1", tmp_path)
    s.run("claude-stop")  # completed: the transcript shows all three
    assert s.shown == mids

    def killed(self, ids):
        raise Killed

    monkeypatch.setattr(Pull, "confirm", killed)
    with pytest.raises(Killed):
        s.run("claude-stop", stop_hook_active=True)
    monkeypatch.undo()
    s.run("claude-stop", stop_hook_active=True)
    assert s.shown == mids  # the model got each message once
    assert state(hooks)["cursor"] == mids[-1]
