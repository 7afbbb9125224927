"""Codex hand-overs are pending until the session's rollout shows them (Harness.confirmation = transcript).

Codex records in its rollout (`transcript_path`, JSONL) the SessionStart context as a developer message,
a Stop-block reason inside `<hook_prompt>`, and a queued message as a user message (measured on 0.171.0;
the real Codex proves it in tests/e2e/test_codex_e2e.py). Here the rollout is written the way Codex
writes it, and the hooks run against the sandbox over real HTTP.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses.codex import session as codex_session
from tests.harnesses.codex.test_hooks import OPT_IN, PERSONA, TOKEN, _folder

SID = "019a7c3e-5b1f-7d20-9a41-3f0c2d9e8b11"
REF = re.compile(r"kijito-ref:[0-9A-Za-z_-]+")


class Rollout:
    """A Codex rollout file: session_meta first, then what the session records."""

    def __init__(self, path: Path, originator: str = "codex_exec"):
        self.path = path
        self._write({"timestamp": "2026-12-02T00:00:00Z", "type": "session_meta",
                     "payload": {"id": SID, "session_id": SID, "originator": originator, "cli_version": "0.171.0"}})

    def _write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")

    def developer(self, text: str) -> None:
        self._write({"type": "response_item", "payload": {"type": "message", "role": "developer",
                                                          "content": [{"type": "input_text", "text": text}]}})

    def hook_prompt(self, text: str) -> None:
        self._write({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f'<hook_prompt hook_run_id="stop:1:hooks.json">{text}</hook_prompt>'}]}})


class Session:
    def __init__(self, sb, project: Path, state: Path, rollout: Rollout):
        self.rollout = rollout
        self.project = project
        self.environ = {"KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sb.url, "KIJITO_PULL_STATE_DIR": str(state),
                        "KIJITO_PULL_CONFIG": os.devnull, "PATH": "/usr/bin:/bin"}

    def hook(self, name: str, event: str, **fields) -> tuple[int, str, str]:
        data = {"session_id": SID, "cwd": str(self.project), "transcript_path": str(self.rollout.path),
                "model": "m", "permission_mode": "default", "hook_event_name": event, **fields}
        out, err = io.StringIO(), io.StringIO()
        code = main(["hook", name], Environment(stdin=io.StringIO(json.dumps(data)), stdout=out, stderr=err,
                                                environ=self.environ, cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def start(self) -> dict:
        return json.loads(self.hook("codex-session-start", "SessionStart", source="startup")[1])

    def stop(self, active: bool = False) -> dict:
        return json.loads(self.hook("codex-stop", "Stop", turn_id="t1", stop_hook_active=active,
                                    last_assistant_message="ok")[1])

    def end(self) -> tuple[int, str, str]:
        return self.hook("codex-session-end", "SessionEnd", reason="other")

    def status(self) -> list[dict]:
        out = io.StringIO()
        main(["status", "--json", "--persona", PERSONA], Environment(stdout=out, stderr=io.StringIO(),
                                                                     environ=self.environ, cwd=str(self.project)))
        rows = [json.loads(line) for line in out.getvalue().splitlines()]
        return [p for row in rows for p in row.get("pending") or []]


@pytest.fixture
def session(sb, tmp_path) -> Session:
    project = _folder(tmp_path, "proj", OPT_IN)
    return Session(sb, project, tmp_path / "state", Rollout(tmp_path / "rollout.jsonl"))


def _context(answer: dict) -> str:
    return answer["hookSpecificOutput"]["additionalContext"]


def test_session_start_hand_over_is_pending_until_the_rollout_shows_it(sb, session):
    sb.send(PERSONA, "loom", "MAIL-ONE: rotate the key")
    text = _context(session.start())
    assert "MAIL-ONE" in text and REF.search(text)
    assert [p["holder"] for p in session.status()] == [f"codex:{SID}"]
    session.rollout.developer(text)  # Codex records the context before the first model request
    assert session.stop() == {}  # the Stop hook finds it in the rollout: confirmed, nothing new
    assert session.status() == []


def test_a_hand_over_the_rollout_never_shows_is_handed_over_again(sb, session):
    """A killed hook's answer is dropped by Codex: the rollout never shows it, so the next hook hands the
    same mail over again instead of losing it."""
    sb.send(PERSONA, "loom", "MAIL-DROPPED")
    assert "MAIL-DROPPED" in _context(session.start())  # ... and Codex dropped it
    again = session.stop()
    assert again["decision"] == "block" and "MAIL-DROPPED" in again["reason"]
    session.rollout.hook_prompt(again["reason"])
    assert session.stop(active=True) == {}
    assert session.status() == []


def test_stop_block_confirmed_by_the_hook_prompt_and_never_repeated(sb, session):
    session.rollout.developer("nothing")
    assert session.start() == {}
    sb.send(PERSONA, "loom", "MAIL-STOP")
    first = session.stop()
    assert first["decision"] == "block" and "MAIL-STOP" in first["reason"]
    session.rollout.hook_prompt(first["reason"])
    assert session.stop(active=True) == {}
    assert session.status() == []


def test_session_end_confirms_what_was_shown_and_frees_the_rest_at_once(sb, session):
    sb.send(PERSONA, "loom", "MAIL-SHOWN")
    shown = _context(session.start())
    session.rollout.developer(shown)
    dropped = sb.send(PERSONA, "loom", "MAIL-DROPPED-AT-END")
    block = session.stop()
    assert "MAIL-DROPPED-AT-END" in block["reason"]  # the session ends before Codex records it
    code, out, err = session.end()
    assert (code, out) == (0, "{}\n"), err
    # Nothing waits for a deadline: the dropped one is released (its hand-over count kept), held by no one.
    assert [(p["holder"], p["ids"]) for p in session.status()] == [(None, [dropped])]
    unseen = io.StringIO()
    main(["--once", "--peek", "--persona", PERSONA], Environment(stdout=unseen, stderr=io.StringIO(),
                                                                 environ=session.environ, cwd=str(session.project)))
    assert "MAIL-DROPPED-AT-END" in unseen.getvalue() and "MAIL-SHOWN" not in unseen.getvalue()


@pytest.mark.parametrize("originator, environ, mode", [
    ("codex-tui", {}, "interactive"),
    ("codex_exec", {}, "headless"),
    ("something-new", {}, "headless"),
    ("codex_exec", {"KIJITO_PULL_CODEX_MODE": "interactive"}, "interactive"),
])
def test_mode_comes_from_the_rollout(tmp_path, originator, environ, mode):
    rollout = Rollout(tmp_path / "r.jsonl", originator)
    assert codex_session.detect_mode({"transcript_path": str(rollout.path)}, environ)[0] == mode


def test_mode_of_a_missing_or_unreadable_rollout_is_headless(tmp_path):
    (tmp_path / "bad.jsonl").write_text("not json\n")
    for path in (str(tmp_path / "missing.jsonl"), str(tmp_path / "bad.jsonl"), None, 7):
        mode, why = codex_session.detect_mode({"transcript_path": path}, {})
        assert mode == "headless" and "headless" in why


def test_exec_session_start_promises_no_wake_and_arms_nothing(sb, session):
    sb.send(PERSONA, "loom", "MAIL-EXEC")
    text = _context(session.start())
    assert "queues it" not in text
    assert not list((Path(session.environ["KIJITO_PULL_STATE_DIR"]) / "sessions").glob("*.watch.log"))
