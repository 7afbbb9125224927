"""How the shared tests and crash trials drive the toy (tests/entrypoints.py): Claude-shaped input and record."""
from kijito_pull.harnesses.claude.testing import record_fields, record_lines, record_path, record_start  # noqa: F401

ENTRY_HOOKS, SESSION_END = ("settingstoy-session-start", "settingstoy-stop"), "settingstoy-session-end"


def hook_input(event: str, session_id: str) -> dict:
    return {"Stop": {"stop_hook_active": False}, "SessionEnd": {"reason": "other"}}.get(event, {"source": "startup"})
