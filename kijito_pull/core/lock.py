"""Waiting for an flock with a deadline: the one place the polling loop lives.

flock has no timeout of its own, and every lock here must be bounded (a hook must never wedge a
session), so acquisition polls a non-blocking attempt until the deadline.
"""

from __future__ import annotations

import errno
import fcntl
import time

POLL_SECONDS = 0.02


def acquire(fd: int, timeout: float) -> bool:
    """Take an exclusive flock on `fd` within `timeout` seconds: True if taken, False if still busy.

    Raises OSError for anything but "held by someone else".
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
