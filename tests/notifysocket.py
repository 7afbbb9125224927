"""A real unix datagram socket standing in for systemd's notify socket (NOTIFY_SOCKET), for the tests of
core/sdnotify.py and of the commands that speak it."""

from __future__ import annotations

import socket


class NotifySocket:
    """Bound at `address` (a path, or '@name' for the abstract namespace); `read()` returns every
    datagram received so far."""

    def __init__(self, address: str):
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(b"\0" + address[1:].encode() if address.startswith("@") else address)
        self.sock.settimeout(0.05)
        self.got: list[str] = []

    def read(self) -> list[str]:
        while True:
            try:
                self.got.append(self.sock.recv(65536).decode())
            except OSError:
                return self.got

    def close(self) -> None:
        self.sock.close()
