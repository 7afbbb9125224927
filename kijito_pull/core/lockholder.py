"""Who holds a cursor's lock now, for people (`kijito-pull status`, `kijito-pull doctor`).

The locker writes its pid into the lock file, but an flock belongs to an open file, not a process: a
child that inherited the descriptor (a hook's `--exec` command, a daemonised grandchild) keeps the
lock after the pid in the file has exited. So the written pid is checked, and when it is gone the
processes really holding the lock are looked up (Linux: a `lock:` line in /proc/PID/fdinfo for a
descriptor of that file; elsewhere unknown). Read-only; a process we may not inspect is skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kijito_pull.core import process


@dataclass(frozen=True)
class LockHolder:
    """The pid the lock file names (0: none written) and, when that one has exited, the live holders."""

    written: int
    written_alive: bool
    live: tuple[int, ...] = ()

    def describe(self) -> str:
        """"pid 123", "pid 456 (inherited from exited pid 123)" or "an unknown process (pid 123 exited)"."""
        if self.written_alive:
            return f"pid {self.written}"
        exited = f"pid {self.written} exited" if self.written else "no pid written"
        if self.live:
            pids = ", ".join(map(str, self.live))
            return f"pid {pids} (inherited; {exited})"
        return f"an unknown process ({exited})"

    @property
    def pid(self) -> int | None:
        """The one live holder to name, if known."""
        if self.written_alive:
            return self.written
        return self.live[0] if len(self.live) == 1 else None


def holder(lock_path: Path, written: int) -> LockHolder:
    """The holder of a lock that `StateStore.lock_holder` found held, with `written` its pid (0 if none)."""
    if written and process.alive(written, None):
        return LockHolder(written, True)
    return LockHolder(written, False, tuple(holding(lock_path)))


def holding(path: Path) -> list[int]:
    """The processes holding an flock on `path` now ([] where /proc cannot say)."""
    try:
        st = os.stat(path)
        entries = os.listdir("/proc")
    except OSError:
        return []
    out = []
    for name in entries:
        if not name.isdigit():
            continue
        fd_dir = f"/proc/{name}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.stat(f"{fd_dir}/{fd}")
                if (target.st_dev, target.st_ino) != (st.st_dev, st.st_ino):
                    continue
                with open(f"/proc/{name}/fdinfo/{fd}", encoding="ascii", errors="replace") as info:
                    if any(line.startswith("lock:") for line in info):
                        out.append(int(name))
                        break
            except OSError:
                continue
    return sorted(set(out) - {os.getpid()})
