"""When each hand-over was confirmed: a small log beside each cursor file, for `track` and the dashboard.

The cursor state says *that* a message was taken (the cursor moved past it, or it is in
`delivered_above`), not *when*, nor which session's record confirmed it. So each confirmation of a
hand-over to an agent session (a pending entry acknowledged: core/pull.py's `ack_all`, core/engine.py's
`settle`) appends one line to `<cursor>.confirmed` after the state that acknowledges it is durable:

    {"id": 42, "holder": "claude:6f1c...", "at": 1764861234.5}

The log is a record, not state: it is written without fsync and never read by a pull, so losing a line
(a crash right after the save) costs only the time in `track`, never a delivery, and a line is never
written for a confirmation that was not saved. It is bounded: past MAX_BYTES the file is rotated to
`<cursor>.confirmed.1` (one older generation kept), under the cursor lock that every writer holds.
Files 0600, opened without following links. Standard library only (the hooks import it).

Readers: core/journey.py (`track`, `send --wait`) and `journey.confirmed_since` (the dashboard's
"confirmations in the last hour").
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".confirmed"
MAX_BYTES = 64 * 1024  # one generation; with the rotated one, about 1,500 confirmations per cursor
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class Confirmation:
    """One hand-over confirmed: message `id`, the holder whose record showed it, epoch seconds `at`."""

    id: int
    holder: str
    at: float

    def as_json(self) -> dict:
        return {"id": self.id, "holder": self.holder,
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at))}


def log_path(cursor_file: Path) -> Path:
    return Path(str(cursor_file) + SUFFIX)


def note(cursor_file: Path, holders: Mapping[int, str], at: float | None = None) -> None:
    """Append one line per confirmed id (`holders`: id -> the holder key). Best effort: a failure is
    silent, since the confirmation itself is already saved."""
    if not holders:
        return
    at = time.time() if at is None else at
    lines = "".join(json.dumps({"id": i, "holder": holders[i][:200], "at": round(at, 3)}) + "\n"
                    for i in sorted(holders))
    path = log_path(cursor_file)
    with contextlib.suppress(OSError):
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(path).st_size > MAX_BYTES:
                os.replace(path, Path(str(path) + ".1"))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o600)
        try:
            os.write(fd, lines.encode("utf-8"))
        finally:
            os.close(fd)


def read(cursor_file: Path, ids: Iterable[int] | None = None, since: float | None = None) -> list[Confirmation]:
    """The confirmations logged for this cursor, oldest first (only `ids`, only at or after `since`, when
    given). Unreadable files and damaged lines are skipped: this is a record, never a reason to fail."""
    wanted = None if ids is None else set(ids)
    path = log_path(cursor_file)
    out: list[Confirmation] = []
    for part in (Path(str(path) + ".1"), path):
        for line in _lines(part):
            try:
                row = json.loads(line)
                found = Confirmation(int(row["id"]), str(row["holder"]), float(row["at"]))
            except (ValueError, KeyError, TypeError):
                continue
            if (wanted is None or found.id in wanted) and (since is None or found.at >= since):
                out.append(found)
    return out


def _lines(path: Path) -> list[str]:
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        data = os.read(fd, 2 * MAX_BYTES + 4096)
    except OSError:
        return []
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").splitlines()
