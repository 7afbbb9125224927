"""Copilot CLI as the shared tests, crash trials and benches drive it (the contract: harnesses/claude/testing.py)."""

from __future__ import annotations

from pathlib import Path

ENTRY_HOOKS = ("copilot-session-start", "copilot-stop")
SESSION_END = "copilot-session-end"
RESUMED = ("resume",)
PUSH_WATCHER = "copilot-watch"
WAY_IN = "tests.copilotext:for_session"  # a stand-in extension and Copilot recording in events.jsonl


def hook_input(event: str, session_id: str) -> dict:
    data: dict = {"timestamp": "2026-12-03T06:00:00.000Z"}
    if event == "Stop":
        data.update({"stop_hook_active": False, "stop_reason": "end_turn"})
    elif event == "SessionEnd":
        data["reason"] = "complete"
    else:
        data["source"] = "new"
    return data


def record_path(directory: Path, home: Path, project: Path, session_id: str) -> Path:
    return home / ".copilot" / "session-state" / session_id / "events.jsonl"


def record_start(session_id: str, interactive: bool) -> list[dict]:
    return [{"type": "session.start", "data": {"sessionId": session_id}}]


def record_lines(text: str, event: str, n: int) -> list[dict]:
    """SessionStart's answer as a hook.end entry, a Stop reason as a user.message."""
    if event == "SessionStart":
        return [{"type": "hook.end", "data": {"output": {"additionalContext": text}}}]
    return [{"type": "user.message", "data": {"content": text}}]


def record_fields(record: Path, event: str) -> dict:
    """Copilot names its record only in the Stop input."""
    return {"transcript_path": str(record)} if event == "Stop" else {}
