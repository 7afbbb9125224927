"""Kilo Code CLI as the shared tests, crash trials and benches drive it: OpenCode's descriptor
(harnesses/opencode/testing.py) under Kilo's names (its hooks, a stand-in `kilo` whose `export <id>` prints
the store, KIJITO_PULL_KILO_HOST for the watcher).
"""

from __future__ import annotations

from pathlib import Path

from kijito_pull.harnesses.opencode.testing import (  # noqa: F401 - the descriptor's shared part
    HOSTED,
    NAMES_EVENT,
    STORE,
    WAY_IN,
    hook_input,
    pushed_parts,
    record_parts,
    record_path,
)
from kijito_pull.harnesses.opencode.variant import KILO

ENTRY_HOOKS = (KILO.hook("chat-message"),)
SESSION_END = None
IDLE = KILO.hook("session-idle")
PUSH_WATCHER = KILO.hook("watch")


def stand_in(record: Path) -> Path:
    """The stand-in `kilo` whose `export <id>` prints the store."""
    return record.parent / "bin" / KILO.executable


def prepare(record: Path) -> None:
    binary = stand_in(record)
    binary.parent.mkdir(exist_ok=True)
    if not binary.exists():
        binary.write_text(f'#!/bin/sh\n[ "$1" = export ] && exec cat "{record.parent}/$2.json"\n')
        binary.chmod(0o755)


def record_fields(record: Path, event: str) -> dict:
    return {"opencode": str(stand_in(record))}  # the plugin's key for its binary, whichever host


def watcher_env(host_pid: int) -> dict:
    """What the push watcher is told of its host, the session's Kilo process."""
    from kijito_pull.core import process
    from kijito_pull.harnesses.session.pushwatch import host_token

    return {KILO.host_env: host_token(process.proc(host_pid))}
