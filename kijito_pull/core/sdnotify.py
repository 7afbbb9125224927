"""systemd's notify protocol without a dependency: one datagram per message to $NOTIFY_SOCKET.

Under a unit with Type=notify, systemd sets NOTIFY_SOCKET (a path, or '@name' for the abstract
namespace); `send(READY=1, STATUS=...)` writes "READY=1\\nSTATUS=...\\n" there. With WatchdogSec=,
systemd also sets WATCHDOG_USEC (and WATCHDOG_PID: the process it is meant for); `watchdog_period()`
is half of it, the interval sd_watchdog_enabled(3) advises. Without NOTIFY_SOCKET every call does
nothing. A failed send is ignored and a send never blocks: telling systemd is best effort and never
stops or stalls the command.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

SOCKET_ENV = "NOTIFY_SOCKET"
WATCHDOG_ENV = "WATCHDOG_USEC"
WATCHDOG_PID_ENV = "WATCHDOG_PID"


class Notifier:
    """Talks to systemd's notify socket named in `environ` (nothing when it names none)."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        raw = environ.get(SOCKET_ENV, "")
        self.address: str | bytes | None = None
        if raw.startswith("@"):
            self.address = b"\0" + raw[1:].encode()  # the abstract namespace
        elif raw.startswith("/"):
            self.address = raw

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, **fields: object) -> bool:
        """One datagram of KEY=value lines (a value's newlines become spaces); True when sent."""
        if self.address is None:
            return False
        text = "".join(f"{key}={' '.join(str(value).splitlines())}\n" for key, value in fields.items())
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.setblocking(False)  # a reader that stopped reading must never stall the command
                sock.sendto(text.encode(), self.address)
        except OSError:
            return False
        return True

    def watchdog_period(self) -> float | None:
        """Seconds between two WATCHDOG=1 (half of WATCHDOG_USEC), or None when systemd asked none of
        this process."""
        if self.address is None:
            return None
        pid = self.environ.get(WATCHDOG_PID_ENV, "")
        if pid and pid != str(os.getpid()):
            return None
        try:
            usec = int(self.environ.get(WATCHDOG_ENV, ""))
        except ValueError:
            return None
        return usec / 2_000_000 if usec > 0 else None
