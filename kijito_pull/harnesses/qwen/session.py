"""Facts about a Qwen Code session, cheap enough for the hook gate: Qwen's folder, its registry of live
sessions, and so the session's mode.

Every interactive Qwen process registers itself in `<registry>/<pid>.json` (0600, removed on exit; `kind:
"tui"`), naming its session id and its inbox socket (`ipcPath`); `qwen -p` registers nothing (measured on
0.24.4; the TUI writes its record before it runs SessionStart). The registry is `$QWEN_RUNTIME_DIR/sessions`
when that is set (Qwen's runtime output), else `<Qwen's folder>/sessions`, Qwen's folder being `$QWEN_HOME`
(an empty value is unset) or `~/.qwen` (Qwen's settings reference, bundled with 0.24.4).

    detect_mode(environ)      interactive when the hook's Qwen process registered itself as a TUI
                              ($KIJITO_PULL_QWEN_MODE=interactive|headless overrides)
    find(environ, sid, pid)   the session's inbox (`Inbox`), from its registry record, or None
"""

from __future__ import annotations

import json
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

HOME_ENV = "QWEN_HOME"
RUNTIME_ENV = "QWEN_RUNTIME_DIR"
MODE_ENV = "KIJITO_PULL_QWEN_MODE"
MAX_RECORD = 64 * 1024


def qwen_dir(environ: Mapping[str, str]) -> Path:
    """Qwen Code's own folder: `$QWEN_HOME`, else `~/.qwen`."""
    from kijito_pull.core.paths import Paths

    paths = Paths(environ)
    raw = environ.get(HOME_ENV, "").strip()
    return paths.expand(raw) if raw else paths.home / ".qwen"


def registry_dir(environ: Mapping[str, str]) -> Path:
    from kijito_pull.core.paths import Paths

    raw = environ.get(RUNTIME_ENV, "").strip()
    return (Paths(environ).expand(raw) if raw else qwen_dir(environ)) / "sessions"


def read_json(path: Path) -> object:
    """A small private JSON file, read without following a link (None: absent, not a regular file, too large
    or not JSON)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        raw = handle.read(MAX_RECORD + 1)
    try:
        return json.loads(raw) if len(raw) <= MAX_RECORD else None
    except ValueError:
        return None


class Inbox:
    """One live Qwen session's inbox: its socket and the session it belongs to."""

    __slots__ = ("path", "session_id", "pid")

    def __init__(self, path: str, session_id: str, pid: int):
        self.path = path
        self.session_id = session_id
        self.pid = pid


def tui_record(environ: Mapping[str, str], pid: int) -> dict | None:
    """The registry record of Qwen process `pid` when it is a TUI's with an inbox, else None."""
    record = read_json(registry_dir(environ) / f"{pid}.json")
    if not isinstance(record, dict) or record.get("kind") != "tui" or record.get("pid") != pid:
        return None
    path = record.get("ipcPath")
    return record if isinstance(path, str) and os.path.isabs(path) else None


def find(environ: Mapping[str, str], session_id: str, pid: int) -> Inbox | None:
    """The inbox of session `session_id` in Qwen process `pid`, when its record names one (a TUI's; after
    `/clear` the record names the new session)."""
    record = tui_record(environ, pid)
    if record is None or record.get("sessionId") != session_id:
        return None
    return Inbox(record["ipcPath"], session_id, pid)


def detect_mode(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """(interactive | headless, a note about an ignored setting or None): interactive when the Qwen process
    running this hook registered itself as a TUI (whichever session its record names yet: at `/clear` the
    new session's SessionStart may come before the record names it; the watcher waits for that)."""
    raw = environ.get(MODE_ENV, "").strip().lower()
    if raw in ("interactive", "headless"):
        return raw, None
    note = f"ignoring {MODE_ENV}={raw[:20]!r} (expected interactive or headless)" if raw else None
    from kijito_pull.harnesses.session import lifecycle

    host = lifecycle.host_process()
    tui = host is not None and tui_record(environ, host.pid) is not None
    return ("interactive" if tui else "headless"), note
