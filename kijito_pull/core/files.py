"""Private state files and directories, opened so that the environment cannot hang or redirect a pull.

Contract: a state directory is made (with its missing parents) as 0700 and a looser one of ours is
tightened; a state file is opened without following a symbolic link and without blocking (a FIFO or a
device where a state file belongs would hang `open()` while the cursor's lock is held), and only a
regular file is used; a folder is listed (`listed`) only if it can be read. Every failure is one
`StateError` line, never a traceback. Standard library only.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from pathlib import Path

from kijito_pull.core.errors import SourceFailed


class StateError(SourceFailed):
    """The state could not be written or locked (exit 1); the message is one line."""


def ensure_private_dir(path: Path, root: Path | None = None) -> None:
    """Create `path` (and parents) as 0700 directories; tighten a directory of ours that is looser, and
    `root` too (the state directory `path` lies in). StateError, one line, when it cannot be done: a
    read-only file system, a parent without write permission, a path through a file or a link to one."""
    missing = []
    p = path
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StateError(f"state directory {path} cannot be created ({d}: {exc.strerror})") from None
    for d in (path,) if root is None or root == path else (root, path):
        _make_private(d)


def _make_private(path: Path) -> None:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise StateError(f"state directory {path}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StateError(f"state directory {path} is not a directory")
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:  # a read-only file system or an immutable directory
            raise StateError(f"state directory {path} cannot be made private: {exc.strerror}") from None


def open_regular(path: Path, flags: int, what: str, mode: int = 0o600) -> int:
    """A descriptor on `path`, opened without following a link and without blocking (a FIFO or device
    where a state file belongs would hang the open, and the cursor's lock with it), and only if it is a
    regular file. FileNotFoundError passes through; anything else is a one-line StateError."""
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0), mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateError(f"{what} {path} is a symbolic link; refusing to follow it") from None
        raise StateError(f"{what} {path} cannot be opened ({exc.strerror})") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        raise StateError(f"{what} {path} is not a regular file; refusing it (remove it to go on)")
    return fd


def listed(folder: Path, pattern: str) -> list[Path]:
    """The entries of `folder` matching `pattern`, sorted; [] when it does not exist. StateError (one line)
    when it exists and cannot be read, so a command never reports "nothing there" of what it cannot see."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StateError(f"{folder} cannot be read ({exc.strerror})") from None
    return sorted(folder / name for name in fnmatch.filter(names, pattern))
