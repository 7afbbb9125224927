"""Gemini CLI as the shared tests, crash trials and benches drive it (the contract: harnesses/claude/testing.py)."""

from __future__ import annotations

from pathlib import Path

ENTRY_HOOKS = ("gemini-session-start", "gemini-after-agent")
SESSION_END = "gemini-session-end"
RESUMED = ("resume",)
#: How mail reaches an idle session (None: no way, turn hooks only; bench/bench_harness_wake.py gives it a row).
PUSH_ROUTE = None


def hook_input(event: str, session_id: str) -> dict:
    data: dict = {"timestamp": "2026-12-03T06:00:00.000Z"}
    if event == "AfterAgent":
        data.update({"stop_hook_active": False, "prompt": "go on", "prompt_response": "done"})
    elif event == "SessionEnd":
        data["reason"] = "exit"
    else:
        data["source"] = "startup"
    return data


def record_path(directory: Path, home: Path, project: Path, session_id: str) -> Path:
    return directory / "chats" / f"session-{session_id}.jsonl"


def record_start(session_id: str, interactive: bool) -> list[dict]:
    return [{"sessionId": session_id, "startTime": "2026-12-03T06:00:00.000Z", "kind": "main"}]


def record_lines(text: str, event: str, n: int) -> list[dict]:
    """A user record: SessionStart context inside <hook_context>, an AfterAgent reason as the next prompt."""
    shown = f"<hook_context>{text}</hook_context>\n\ngo on" if event == "SessionStart" else text
    return [{"id": f"u{n}", "type": "user", "content": [{"text": shown}]}]


def record_fields(record: Path, event: str) -> dict:
    return {"transcript_path": str(record)}
