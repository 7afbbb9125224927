"""A server that never finishes its answer, for the tests and trials of the whole-exchange deadline
(issue 23, item 4): the status line and then a header byte every 0.2 s, or a huge body a byte at a time."""

from __future__ import annotations

import socket
import threading


class TricklingServer:
    """Answers 200 with a huge Content-Length, then one byte every 0.2 s: a body that never finishes.
    With `head=True` it sends the status line, then one header byte every 0.2 s: a head that never ends."""

    def __init__(self, head: bool = False) -> None:
        self.head = head
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n" if self.head else
                             b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 1000000000\r\n\r\n{")
                while not self.stop.wait(0.2):
                    conn.sendall(b" ")
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
