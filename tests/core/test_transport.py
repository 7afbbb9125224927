"""The client's transport adapter (kijito_pull/core/transport.py) over real sockets.

A scripted HTTP/1.1 server on loopback counts connections and requests, so reuse, replacement of a
connection the server closed, and every failure mode are observed on the wire, not assumed.
"""

from __future__ import annotations

import itertools
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from kijito_pull.core.api import KijitoClient
from kijito_pull.core.models import ApiError
from kijito_pull.core.transport import KeepAliveAdapter

TOKEN = "tok-transport-secret-123"
PAGE = {"result": [{"id": 1, "from": "a", "content": "hi", "created": "2026-12-02T00:00:00Z"}],
        "next_before_id": None}

Answer = Callable[[bytes], "list[bytes | float | None]"]  # request head -> pieces to send (float: sleep, None: close)


def ok(body: object = PAGE, *, extra: str = "") -> list[bytes | float | None]:
    raw = json.dumps(body).encode()
    return [f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(raw)}\r\n{extra}\r\n".encode()
            + raw]


class Scripted:
    """A loopback server: each request's head goes to `answer`, whose pieces are written in order."""

    def __init__(self, answer: Answer, wrap: Callable[[socket.socket], socket.socket] | None = None):
        self.answer = answer
        self.wrap = wrap
        self.connections = 0
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.wrap is not None:
                conn = self.wrap(conn)
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                self.requests.append(head)
                for piece in self.answer(head):
                    if piece is None:
                        conn.close()
                        return
                    if isinstance(piece, float):
                        time.sleep(piece)
                    else:
                        conn.sendall(piece)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stopped = True
        self.listener.close()


@pytest.fixture
def serve():
    servers = []

    def start(answer: Answer, **kw) -> Scripted:
        server = Scripted(answer, **kw)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def client_for(url: str, **kw) -> KijitoClient:
    return KijitoClient(url, TOKEN, attempts=1, sleep=lambda s: None, **kw)


def test_one_connection_serves_every_request_in_turn(serve):
    server = serve(lambda head: ok())
    client = client_for(server.url)
    for _ in range(5):
        assert [m.id for m in client.inbox("p").messages] == [1]
    assert server.connections == 1
    assert len(server.requests) == 5
    head = server.requests[0].decode()
    assert head.startswith("GET /api/inbox?persona=p&mark_read=false HTTP/1.1")
    assert f"Authorization: Bearer {TOKEN}" in head and f"Host: 127.0.0.1:{server.port}" in head
    assert "Accept-Encoding: identity" in head


def test_a_connection_the_server_closed_while_idle_is_replaced_before_use(serve):
    # The server answers, then closes without saying so: the kept socket is at end of file.
    server = serve(lambda head: [*ok(), None])
    client = client_for(server.url)
    for _ in range(3):
        assert [m.id for m in client.inbox("p").messages] == [1]
        time.sleep(0.05)  # the close has arrived before the next request
    assert server.connections == 3
    assert len(server.requests) == 3  # nothing was sent on a dead connection


def test_connection_close_from_the_server_is_honoured(serve):
    server = serve(lambda head: ok(extra="Connection: close\r\n"))
    client = client_for(server.url)
    client.inbox("p")
    client.inbox("p")
    assert server.connections == 2


def test_a_body_closed_before_its_end_does_not_poison_the_next_answer(serve):
    big = {"result": [], "next_before_id": None, "pad": "x" * 200_000}
    server = serve(lambda head: ok(big) if b"persona=big" in head else ok())
    adapter = KeepAliveAdapter()
    session = requests.Session()
    session.mount("http://", adapter)
    response = session.get(server.url + "/api/inbox?persona=big", stream=True)
    assert response.raw.read1(100)  # a part only
    response.close()
    assert session.get(server.url + "/api/inbox?persona=p").json() == PAGE
    assert server.connections == 2


def test_chunked_bodies_are_read_whole(serve):
    raw = json.dumps(PAGE).encode()
    half = len(raw) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (raw[:half], raw[half:])) + b"0\r\n\r\n"
    server = serve(lambda head: [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunks])
    client = client_for(server.url)
    assert [m.id for m in client.inbox("p").messages] == [1]
    assert [m.id for m in client.inbox("p").messages] == [1]
    assert server.connections == 1


def test_a_body_cut_off_is_a_transient_failure_not_mail(serve):
    server = serve(lambda head: [b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"result\": [", None])
    with pytest.raises(ApiError) as caught:
        client_for(server.url).inbox("p")
    assert caught.value.transient and "cut off" in str(caught.value)


def test_a_server_that_never_answers_times_out(serve):
    server = serve(lambda head: [3.0])
    client = client_for(server.url, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ApiError) as caught:
        client.inbox("p")
    assert time.monotonic() - started < 2.5
    assert caught.value.transient and "timed out" in str(caught.value)


def trickled_head(step: float = 0.1, count: int = 200) -> list:
    """A status line, then one header byte every `step` seconds (each well inside the read timeout)."""
    return [b"HTTP/1.1 200 OK\r\n", *itertools.chain.from_iterable((step, b"X") for _ in range(count))]


def test_one_deadline_bounds_a_head_that_trickles_in(serve):
    """Issue 23, item 4: a header byte every 0.1 s never trips the per-read timeout (1 s); the call's
    deadline (2 s here) bounds the whole exchange, the head included."""
    server = serve(lambda head: trickled_head())
    client = client_for(server.url, timeout=1.0, deadline=2.0)
    started = time.monotonic()
    with pytest.raises(ApiError) as caught:
        client.inbox("p")
    elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 3.0, elapsed
    assert str(caught.value) == "/api/inbox: timed out: no whole answer within 2 s (the server sends too slowly)"
    assert caught.value.transient


def test_the_deadline_spans_every_attempt_of_a_call(serve):
    """Retries share the one deadline: three attempts against a trickling head still end by it."""
    server = serve(lambda head: trickled_head())
    client = KijitoClient(server.url, TOKEN, attempts=3, timeout=1.0, deadline=2.0, sleep=lambda s: None)
    started = time.monotonic()
    with pytest.raises(ApiError, match="timed out"):
        client.inbox("p")
    assert time.monotonic() - started < 3.0
    assert len(server.requests) == 1  # the first attempt used it all; none was sent past the deadline


def test_one_deadline_bounds_a_body_that_trickles_in(serve):
    server = serve(lambda head: [b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",
                                 *itertools.chain.from_iterable((0.1, b" ") for _ in range(200))])
    client = client_for(server.url, timeout=1.0, deadline=2.0)
    started = time.monotonic()
    with pytest.raises(ApiError, match="took too long to arrive"):
        client.inbox("p")
    assert time.monotonic() - started < 3.0


def test_an_answer_within_the_deadline_keeps_its_connection(serve):
    """The deadline changes nothing for a server that answers: the connection is kept and reused."""
    server = serve(lambda head: [0.05, *ok()])
    client = client_for(server.url, timeout=1.0, deadline=2.0)
    for _ in range(3):
        assert [m.id for m in client.inbox("p").messages] == [1]
    assert server.connections == 1


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "until-close"])
def test_an_answer_that_closes_its_connection_is_read_whole(serve, sized):
    """`Connection: close` (or no length at all): http.client closes the connection once the head is read,
    and the body must still be read from it to the end (it was cut off, EBADF, under the deadline reader)."""
    raw = json.dumps(PAGE).encode()
    length = f"Content-Length: {len(raw)}\r\n" if sized else ""
    server = serve(lambda head: [f"HTTP/1.1 200 OK\r\nConnection: close\r\n{length}\r\n".encode(), 0.05,
                                 raw, None])
    client = client_for(server.url, timeout=1.0, deadline=2.0)
    for _ in range(2):
        assert [m.id for m in client.inbox("p").messages] == [1]
    assert server.connections == 2


def test_a_refused_connection_is_a_transient_failure():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    with pytest.raises(ApiError) as caught:
        client_for(f"http://127.0.0.1:{port}").inbox("p")
    assert caught.value.transient and "Connection refused" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_a_compressed_body_that_was_not_asked_for_is_refused(serve):
    server = serve(lambda head: [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}"])
    with pytest.raises(ApiError) as caught:
        client_for(server.url).inbox("p")
    # Issue 23, item 7: said in words (it was "request failed (ContentDecodingError)").
    assert str(caught.value) == ("/api/inbox: the server sent a gzip body, which was not asked for and is not "
                                 "read (an uncompressed one was asked for: the server or a proxy ignores "
                                 "Accept-Encoding: identity)")
    assert not caught.value.transient  # the same server would answer the same way


def test_a_post_carries_its_body(serve):
    server = serve(lambda head: ok({"result": {"id": 7, "to": "p"}}))
    assert client_for(server.url).send("p", "hello").id == 7
    head = server.requests[0].decode()
    assert head.startswith("POST /api/send HTTP/1.1") and "Content-Length:" in head


def test_proxies_and_other_schemes_are_refused():
    adapter = KeepAliveAdapter()
    prepared = requests.Request("GET", "http://127.0.0.1:9/x").prepare()
    with pytest.raises(requests.exceptions.InvalidSchema):
        adapter.send(prepared, proxies={"http": "http://proxy:3128"})
    with pytest.raises(requests.exceptions.InvalidSchema):
        adapter.send(requests.Request("GET", "ftp://127.0.0.1/x").prepare())


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def tls_server(serve, certificate) -> Scripted:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    server = serve(lambda head: ok(), wrap=lambda conn: context.wrap_socket(conn, server_side=True))
    server.url = f"https://127.0.0.1:{server.port}"
    return server


def test_https_verifies_the_certificate_by_default(serve, certificate):
    server = tls_server(serve, certificate)
    with pytest.raises(ApiError) as caught:
        client_for(server.url).inbox("p")
    # "SSL" is what doctor's reachability check recognises as a TLS failure.
    assert "connection failed (SSLError)" in str(caught.value) and TOKEN not in str(caught.value)


def test_https_with_a_trusted_certificate_keeps_its_connection(serve, certificate):
    server = tls_server(serve, certificate)
    session = requests.Session()
    session.verify = str(certificate[0])
    session.mount("https://", KeepAliveAdapter())
    client = client_for(server.url, session=session)
    for _ in range(3):
        assert [m.id for m in client.inbox("p").messages] == [1]
    assert server.connections == 1
