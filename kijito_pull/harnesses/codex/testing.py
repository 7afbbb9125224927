"""Codex as the shared tests, crash trials and benches drive it (the contract: harnesses/claude/testing.py)."""

from __future__ import annotations

from pathlib import Path

ENTRY_HOOKS = ("codex-session-start", "codex-stop")
MATRIX = True
SESSION_END = "codex-session-end"
#: Codex's push watcher and the stand-in of its way in (`codex queue`): "module:function(runtime, session, seed)".
PUSH_WATCHER = "codex-watch"
WAY_IN = "tests.codexqueue:for_session"


def hook_input(event: str, session_id: str) -> dict:
    data = {"transcript_path": None, "model": "gpt-5-codex", "permission_mode": "default"}
    if event == "Stop":
        data.update({"stop_hook_active": False, "turn_id": "turn-1", "last_assistant_message": "done"})
    elif event == "SessionEnd":
        data["reason"] = "other"
    else:
        data["source"] = "startup"
    return data


def record_path(directory: Path, home: Path, project: Path, session_id: str) -> Path:
    return directory / f"{session_id}.jsonl"


def record_start(session_id: str, interactive: bool) -> list[dict]:
    """The rollout's session_meta (a TUI session's originator is codex-tui)."""
    return [{"type": "session_meta", "payload": {"id": session_id,
                                                 "originator": "codex-tui" if interactive else "codex_exec"}}]


def record_lines(text: str, event: str, n: int) -> list[dict]:
    return [{"type": "response_item", "payload": {
        "type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}}]


def pushed_lines(text: str) -> list[dict]:
    """The queued text as a user message, once the turn it started is under way (measured on 0.171.0)."""
    return [{"type": "response_item", "payload": {"type": "message", "role": "user",
                                                  "content": [{"type": "input_text", "text": text}]}}]


def record_fields(record: Path, event: str) -> dict:
    return {"transcript_path": str(record)}
