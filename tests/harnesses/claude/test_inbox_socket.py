"""Claude Code's session inbox socket (kijito_pull.harnesses.claude.inbox_socket), against a fake of the
session's end of it: a real Unix socket server speaking the protocol Claude Code documents (NDJSON: an
`auth` line with the session's token, then `user` lines; nothing is written back). The fake records every
connection byte for byte, so the tests assert on what actually went over the socket.

`FakeInbox` is also the socket of the pusher's tests (test_push_unit.py): like Claude Code, it can write
what it was sent into the session's transcript (`on_message`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable

import pytest

from kijito_pull.harnesses.claude import inbox_socket
from kijito_pull.harnesses.claude.inbox_socket import InboxSocket

SOCKET_TOKEN = "sock-token-77c1"


class FakeInbox:
    """A session inbox socket: accepts connections, reads each to its end, and keeps what it was sent.

    `connections`: the raw bytes of every connection, in order (b"" for a connection that sent nothing).
    `messages`: the content of every `user` line sent after a valid `auth` line, in order.
    `rejected`: the `user` contents sent without a valid `auth` first (Claude Code ignores those).
    """

    def __init__(self, token: str = SOCKET_TOKEN, on_message: Callable[[str], None] | None = None):
        self.token = token
        self.on_message = on_message
        self.dir = tempfile.mkdtemp(prefix="kps-", dir="/tmp")  # AF_UNIX paths are limited to ~107 bytes
        self.path = os.path.join(self.dir, "inbox.sock")
        self.connections: list[bytes] = []
        self.messages: list[str] = []
        self.rejected: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(8)
        self._thread = threading.Thread(target=self._serve, name="fake-inbox", daemon=True)
        self._thread.start()

    def environ(self) -> dict[str, str]:
        return {inbox_socket.SOCKET_ENV: self.path, inbox_socket.TOKEN_ENV: self.token}

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._server], [], [], 0.05)
            if not ready:
                continue
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(3.0)
                data = b""
                try:
                    while True:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                except OSError:
                    pass  # a client that never ends its side: keep what came
            self._take(data)

    def _take(self, data: bytes) -> None:
        authed = False
        taken: list[str] = []
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            line = json.loads(raw)
            if line.get("type") == "auth":
                authed = line.get("token") == self.token
            elif line.get("type") == "user":
                content = line["message"]["content"]
                assert line["message"]["role"] == "user"
                (taken if authed else self.rejected).append(content)
        with self._lock:
            self.connections.append(data)
            self.messages.extend(taken)
        for text in taken:
            if self.on_message is not None:
                self.on_message(text)

    def wait_connections(self, count: int, timeout: float = 5.0) -> list[bytes]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.connections) >= count:
                    return list(self.connections)
            time.sleep(0.01)
        with self._lock:
            return list(self.connections)

    def close(self) -> None:
        """Stop listening and remove the socket file (a session that is gone)."""
        self._stop.set()
        self._thread.join(5)
        self._server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def test_send_writes_the_auth_line_then_one_user_message_and_ends_its_side(fake):
    text = 'Kijito inbox for river: 1 unread message.\n> a "quoted" line, ünïcode and \\ backslash'
    InboxSocket(fake.path, SOCKET_TOKEN).send(text)
    [raw] = fake.wait_connections(1)
    lines = raw.decode("utf-8").split("\n")
    assert lines[-1] == ""  # every line ends with \n, and the sender closed its side (the fake read to EOF)
    assert [json.loads(line) for line in lines[:-1]] == [
        {"type": "auth", "token": SOCKET_TOKEN},
        {"type": "user", "message": {"role": "user", "content": text}},
    ]
    assert fake.messages == [text] and fake.rejected == []


def test_each_send_is_its_own_connection_with_its_own_auth(fake):
    sock = InboxSocket(fake.path, SOCKET_TOKEN)
    sock.send("first")
    sock.send("second")
    raws = fake.wait_connections(2)
    assert len(raws) == 2 and all(raw.startswith(b'{"type": "auth"') for raw in raws)
    assert fake.messages == ["first", "second"]


def test_a_wrong_token_is_sent_as_given_and_the_session_takes_nothing(fake):
    InboxSocket(fake.path, "not-the-token").send("hello")
    fake.wait_connections(1)
    assert fake.messages == [] and fake.rejected == ["hello"]


def test_reachable_connects_and_sends_nothing(fake):
    sock = InboxSocket(fake.path, SOCKET_TOKEN)
    assert sock.reachable() is True
    assert fake.wait_connections(1) == [b""]
    assert fake.messages == []


def test_a_socket_nobody_listens_on_is_unreachable_and_send_raises_oserror(fake):
    sock = InboxSocket(fake.path, SOCKET_TOKEN)
    fake.close()
    assert sock.reachable() is False
    with pytest.raises(OSError):
        sock.send("lost")


def test_text_over_the_limit_is_refused_before_anything_is_sent(fake):
    sock = InboxSocket(fake.path, SOCKET_TOKEN)
    with pytest.raises(ValueError):
        sock.send("x" * (inbox_socket.MAX_TEXT + 1))
    sock.send("y" * inbox_socket.MAX_TEXT)  # exactly at the limit goes
    assert fake.wait_connections(1) and fake.messages == ["y" * inbox_socket.MAX_TEXT]
    time.sleep(0.1)
    assert len(fake.connections) == 1  # the refused text never opened a connection


def test_the_token_is_never_in_repr(fake):
    sock = InboxSocket(fake.path, SOCKET_TOKEN)
    assert SOCKET_TOKEN not in repr(sock) and fake.path in repr(sock)


# -- from_environ: the feature is detected at run time -----------------------------------------------------


def test_from_environ_finds_a_socket_that_accepts_connections(fake):
    sock, why = inbox_socket.from_environ(fake.environ())
    assert isinstance(sock, InboxSocket) and sock.path == fake.path
    assert "accepts connections" in why and SOCKET_TOKEN not in why
    assert fake.wait_connections(1) == [b""]  # probed once, nothing sent
    sock.send("via environ")
    fake.wait_connections(2)
    assert fake.messages == ["via environ"]  # it carries the token it was given


@pytest.mark.parametrize("change, expected", [
    ({inbox_socket.PUSH_ENV: " OFF "}, "KIJITO_PULL_CLAUDE_PUSH=off"),
    ({inbox_socket.SOCKET_ENV: ""}, "is not set"),
    ({inbox_socket.TOKEN_ENV: ""}, "is not set"),
    ({inbox_socket.SOCKET_ENV: "relative/inbox.sock"}, "not an absolute path"),
    ({inbox_socket.SOCKET_ENV: "/tmp/in\0box.sock"}, "not an absolute path"),
])
def test_from_environ_says_why_there_is_no_socket_without_connecting(fake, change, expected):
    sock, why = inbox_socket.from_environ({**fake.environ(), **change})
    assert sock is None and expected in why
    time.sleep(0.1)
    assert fake.connections == []  # decided without touching the socket


def test_from_environ_with_a_socket_that_refuses_connections(fake):
    environ = fake.environ()
    fake.close()
    sock, why = inbox_socket.from_environ(environ)
    assert sock is None and "does not accept connections" in why


def test_from_environ_without_probe_names_the_socket_without_connecting(fake):
    sock, why = inbox_socket.from_environ(fake.environ(), probe=False)
    assert isinstance(sock, InboxSocket) and sock.path == fake.path and "not yet tried" in why
    time.sleep(0.1)
    assert fake.connections == []
    environ = fake.environ()
    fake.close()
    assert inbox_socket.from_environ(environ, probe=False)[0] is not None  # it does not know it is gone
    assert inbox_socket.from_environ({**environ, inbox_socket.PUSH_ENV: "off"}, probe=False)[0] is None
