"""OpenCode as the shared tests, crash trials and benches drive it (the contract: harnesses/claude/testing.py).

Its record is a store, not a JSONL file: `opencode export <id>` prints the session (a stand-in `opencode`
beside the store prints <directory>/<id>.json, rewritten whole). Its hooks are its plugin's calls and
children of the session's OpenCode process; a session has no end hook (it ends with that process).
"""

from __future__ import annotations

from pathlib import Path

ENTRY_HOOKS = ("opencode-chat-message",)
SESSION_END = None
#: Run after some turns, and at a session's end before its process exits.
IDLE = "opencode-session-idle"
HOSTED = True  # hooks are children of the session's process (tests/sessionhost.py)
NAMES_EVENT = False  # the plugin passes no hook_event_name
STORE = True
PUSH_WATCHER = "opencode-watch"
WAY_IN = "tests.opencodeserver:for_session"  # a stand-in of the session's server (prompt_async, the messages)


def hook_input(event: str, session_id: str) -> dict:
    return {"opencode": "", "server_url": ""}  # extensions/opencode/kijito-pull.js `facts`


def record_path(directory: Path, home: Path, project: Path, session_id: str) -> Path:
    return directory / f"{session_id}.json"


def stand_in(record: Path) -> Path:
    """The stand-in `opencode` whose `export <id>` prints the store."""
    return record.parent / "bin" / "opencode"


def prepare(record: Path) -> None:
    binary = stand_in(record)
    binary.parent.mkdir(exist_ok=True)
    if not binary.exists():
        binary.write_text(f'#!/bin/sh\n[ "$1" = export ] && exec cat "{record.parent}/$2.json"\n')
        binary.chmod(0o755)


def record_parts(text: str, event: str, n: int) -> list[dict]:
    """The chat.message text as one more part of the user message."""
    return [{"type": "text", "text": "go on"}, {"type": "text", "text": text, "synthetic": True}]


def pushed_parts(text: str) -> list[dict]:
    return [{"type": "text", "text": text}]


def record_fields(record: Path, event: str) -> dict:
    return {"opencode": str(stand_in(record))}


def watcher_env(host_pid: int) -> dict:
    """What the push watcher is told of its host, the session's OpenCode process."""
    from kijito_pull.core import process
    from kijito_pull.harnesses.opencode.watcher import HOST_ENV
    from kijito_pull.harnesses.session.pushwatch import host_token

    return {HOST_ENV: host_token(process.proc(host_pid))}
