"""Claude Code as the shared tests, crash trials and benches drive it (tests/entrypoints.py reads this).

The descriptor contract (every harness's `testing.py`, standard library only, read by nothing in the
product): which hooks are crash-trial entry points, the hook input beyond session_id/cwd/hook_event_name,
the session's record and what the harness writes there once a hook completed. docs/architecture.md.
"""

from __future__ import annotations

from pathlib import Path

#: Hooks that hand mail over: the crash trials kill each. `MATRIX`: also in the fault matrix and the
#: concurrency test (tests/test_fault_matrix.py, scripts/concurrency_all.py).
ENTRY_HOOKS = ("claude-session-start", "claude-stop")
MATRIX = True
#: The entry names these hooks had before the others (kept: trial and test ids).
ENTRY_NAMES = {"claude-session-start": "hook-session-start", "claude-stop": "hook-stop",
               "claude-session-end": "hook-session-end"}
SESSION_END = "claude-session-end"
#: A SessionStart after the session's first hook says one of these.
RESUMED = ("resume", "compact")


def hook_input(event: str, session_id: str) -> dict:
    return {"Stop": {"stop_hook_active": False}, "SessionEnd": {"reason": "other"}}.get(event, {"source": "startup"})


def record_path(directory: Path, home: Path, project: Path, session_id: str) -> Path:
    return directory / f"{session_id}.jsonl"


def record_start(session_id: str, interactive: bool) -> list[dict]:
    return [{"type": "summary", "sessionId": session_id}]


def record_lines(text: str, event: str, n: int) -> list[dict]:
    """What the transcript gains once a hook's answer was given to the model."""
    return [{"type": "attachment", "attachment": {"type": "hook_additional_context", "content": [text]}}]


def record_fields(record: Path, event: str) -> dict:
    return {"transcript_path": str(record)}
