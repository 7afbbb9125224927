"""Facts about local processes: does one still run, and is it the one we met (not a reused pid)?

A process is named by its pid and an opaque start-time token, so a pid the system handed to another
process later is not mistaken for it. Read from /proc where there is one, else from `ps`. Used for the
holders of pending hand-overs (core/pending.py) and the session leases of the harnesses.
Standard library only.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Proc:
    """A process as a lease or holder names it: its pid and its start time, so a reused pid is not taken
    for the process that held it."""

    pid: int
    start: str | None  # an opaque start-time token; None when the platform will not tell


def read_stat(pid: int) -> tuple[str, str, int, str] | None:
    """(comm, state, ppid, start) from /proc, or from ps where there is no /proc; None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError:
        data = b""
    if data:
        close = data.rfind(b")")
        comm = data[data.find(b"(") + 1:close].decode("utf-8", "replace")
        rest = data[close + 2:].split()
        try:
            return comm, rest[0].decode(), int(rest[1]), rest[19].decode()
        except (IndexError, ValueError):
            return None
    if os.path.isdir("/proc/self"):
        return None
    try:  # macOS and other systems without /proc
        out = subprocess.run(["ps", "-o", "stat=,ppid=,lstart=,comm=", "-p", str(pid)], capture_output=True,
                             text=True, timeout=2, env={"LC_ALL": "C", "PATH": os.environ.get("PATH", "")})
    except (OSError, subprocess.SubprocessError):
        return None
    parts = out.stdout.split(None, 7)
    if out.returncode != 0 or len(parts) < 8:
        return None
    state, ppid = parts[0], parts[1]
    start = " ".join(parts[2:7])
    comm = os.path.basename(parts[7].strip())
    try:
        return comm, state[:1], int(ppid), start
    except ValueError:
        return None


def proc(pid: int) -> Proc | None:
    info = read_stat(pid)
    return None if info is None else Proc(pid, info[3])


def alive(pid: Any, start: Any) -> bool:
    """The process `pid` exists, is not a zombie, and (when known) started when the lease says."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    info = read_stat(pid)
    if info is None:
        return not os.path.isdir("/proc/self")  # no way to look closer: trust kill(0)
    if info[1] in ("Z", "X"):
        return False
    return start is None or info[3] == start


def me() -> Proc:
    """This process, with its start-time token."""
    return proc(os.getpid()) or Proc(os.getpid(), None)
