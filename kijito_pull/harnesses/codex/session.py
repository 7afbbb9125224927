"""Facts about the Codex session a hook serves: is it interactive and which `codex` to call.

Codex puts no session or mode variable in a hook's environment, and under its shared app-server daemon
a hook is a child of the daemon with the environment of whichever session started it (measured on
0.171.0: docs/codex.md). So only the hook's stdin names the session, and the mode is read from the
session's own rollout (`transcript_path`): its first line, `session_meta`, names the `originator`
(`codex-tui` for the terminal UI, `codex_exec` for `codex exec`). `$KIJITO_PULL_CODEX_MODE`
(interactive | headless) overrides it. What cannot be told is headless: no watcher, the Stop hook
still delivers.

Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from kijito_pull.core import process
from kijito_pull.harnesses.base import HEADLESS, INTERACTIVE

MODE_ENV = "KIJITO_PULL_CODEX_MODE"
CODEX_ENV = "KIJITO_PULL_CODEX"  # the `codex` to call (default: the one on PATH, else the host's binary)
HOST_ENV = "KIJITO_PULL_CODEX_HOST"  # "<pid>:<start>" of the session's host, handed to the watcher
_FIRST_LINE_LIMIT = 1 << 20
INTERACTIVE_ORIGINATORS = ("codex-tui", "codex_tui")
HEADLESS_ORIGINATORS = ("codex_exec", "codex-exec")


def session_meta(transcript_path: object) -> dict | None:
    """The rollout's `session_meta` payload (its first line), or None when it cannot be read yet."""
    if not isinstance(transcript_path, str) or not transcript_path or "\0" in transcript_path:
        return None
    try:
        with open(transcript_path, "rb") as handle:
            line = handle.readline(_FIRST_LINE_LIMIT)
        record = json.loads(line)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("type") != "session_meta":
        return None
    payload = record.get("payload")
    return payload if isinstance(payload, dict) else None


def detect_mode(data: Mapping[str, object], environ: Mapping[str, str]) -> tuple[str, str]:
    """(interactive | headless, why) for the session a hook's input describes."""
    forced = environ.get(MODE_ENV, "").strip().lower()
    if forced in (INTERACTIVE, HEADLESS):
        return forced, f"${MODE_ENV}={forced}"
    meta = session_meta(data.get("transcript_path"))
    originator = str(meta.get("originator") or "") if meta else ""
    if originator in INTERACTIVE_ORIGINATORS:
        return INTERACTIVE, f"the session's rollout says originator {originator}"
    if originator in HEADLESS_ORIGINATORS:
        return HEADLESS, f"the session's rollout says originator {originator}"
    if originator:
        return HEADLESS, f"unknown originator {originator[:40]!r} (treated as headless)"
    return HEADLESS, "the session's rollout does not say how it was started (treated as headless)"


def codex_command(environ: Mapping[str, str], host: process.Proc | None) -> str | None:
    """The `codex` that reaches this session's queue: $KIJITO_PULL_CODEX, else `codex` on PATH, else the
    host process's own binary (under the shared daemon, the daemon's codex)."""
    forced = environ.get(CODEX_ENV, "").strip()
    if forced:
        return forced
    found = shutil.which("codex", path=environ.get("PATH"))
    if found:
        return found
    if host is not None:
        try:
            exe = os.readlink(f"/proc/{host.pid}/exe")
        except OSError:
            return None
        if Path(exe).name == "codex":
            return exe
    return None
