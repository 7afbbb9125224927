"""requests' transport for the Kijito client: one kept-alive `http.client` connection per server.

`KijitoClient` speaks through a requests `Session`, and requests hands each request to a transport
adapter. Its stock adapter drives urllib3's connection pool, which costs about twice the client CPU
of `http.client` per request (docs/benchmarks.md, "watch wake latency"): on a watch's wake that was
most of what kept it behind the watcher it replaces. This adapter keeps requests (sessions, prepared
requests, responses, its exceptions) and sends through `http.client` instead.

The contract is what `KijitoClient` asks of a transport, no more:
- http and https; for https, certificates are verified against certifi's bundle, as requests does
  (`verify` may be False or a CA file or directory, `cert` a client certificate); no proxies (the
  session never reads the environment) and no redirects followed (the client refuses them);
- a `(connect, read)` timeout, a float, or None; or `(connect, read, total)`, where `total` seconds
  bound the whole exchange from `begin`: connecting, writing the request, reading the head and the
  body. Each socket wait is cut to what is left, so a server trickling its header or body bytes
  slower than the read timeout cannot hold the call (and the cursor's lock) past it; passing it
  raises `DeadlineExceeded`;
- the body streamed through `raw.read1`, and the connection kept for the next request only once its
  body was read to the end (a response closed early closes its connection);
- a kept connection the server closed while it was idle is noticed before it is used (its socket is
  readable: end of file or stray bytes) and replaced, so no request is ever sent on it;
- only uncompressed bodies: it asks for `identity`, and a compressed answer is an error;
- failures are requests' own exceptions: ConnectTimeout, ReadTimeout (and its `DeadlineExceeded`),
  SSLError, ConnectionError, ChunkedEncodingError, ContentDecodingError, InvalidSchema, InvalidURL.
"""

from __future__ import annotations

import functools
import http.client
import io
import os
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import certifi
import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

Key = tuple[str, str, int, Any, Any]


class DeadlineExceeded(requests.exceptions.ReadTimeout):
    """The exchange's whole deadline (`total`) passed before its answer was read to the end."""


class _DeadlinePassed(socket.timeout):
    """A socket wait cut short by the exchange's deadline (inside http.client's reads)."""


def _timeouts(timeout: Any) -> tuple[float | None, float | None, float | None]:
    if isinstance(timeout, tuple):
        if len(timeout) == 3:
            return timeout
        connect, read = timeout
        return connect, read, None
    return timeout, timeout, None


def _within(seconds: float | None, deadline: float | None) -> float | None:
    """A socket wait of `seconds` cut to what is left before `deadline` (DeadlineExceeded if nothing is)."""
    if deadline is None:
        return seconds
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the exchange did not finish within its deadline")
    return left if seconds is None else min(seconds, left)


class _DeadlineReader(io.RawIOBase):
    """What http.client reads an answer through (head and body): each receive waits at most the read
    timeout and never past the deadline. It reads through the socket's own file (`makefile`), which
    keeps the socket open until the answer is closed, as http.client's own reader does: a connection
    closed as soon as its answer's head is read (`Connection: close`) still has its body read."""

    def __init__(self, sock: socket.socket, deadline: float, read_timeout: float | None):
        super().__init__()
        self._sock, self._deadline, self._read = sock, deadline, read_timeout
        self._file = sock.makefile("rb", buffering=0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise _DeadlinePassed("the exchange's deadline passed")
        cut = self._read is None or left < self._read
        self._sock.settimeout(left if cut else self._read)
        try:
            return self._file.readinto(buffer)
        except socket.timeout:
            if cut:
                raise _DeadlinePassed("the exchange's deadline passed") from None
            raise

    def close(self) -> None:
        self._file.close()
        super().close()


class _DeadlineSocket:
    """Hands `http.client.HTTPResponse` a `_DeadlineReader` where it asks the socket for a file."""

    def __init__(self, sock: socket.socket, deadline: float, read_timeout: float | None):
        self._sock, self._deadline, self._read = sock, deadline, read_timeout

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline, self._read))


def _bounded_response(sock: socket.socket, deadline: float, read_timeout: float | None,
                      **options: Any) -> http.client.HTTPResponse:
    return http.client.HTTPResponse(_DeadlineSocket(sock, deadline, read_timeout), **options)  # type: ignore[arg-type]


def _is_idle_and_open(conn: http.client.HTTPConnection) -> bool:
    """A kept connection is usable when its socket has nothing to read: a readable idle socket means the
    server closed it (end of file) or sent bytes no request asked for."""
    sock = conn.sock
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return not poller.poll(0)


class KeepAliveAdapter(HTTPAdapter):
    """A requests transport adapter over one kept-alive `http.client` connection per (server, TLS setting).

    A subclass of requests' HTTPAdapter only so that tools built for requests (the `responses` mocks)
    recognise it; its `send` never touches the urllib3 pool the base class makes."""

    def __init__(self) -> None:
        super().__init__(pool_connections=1, pool_maxsize=1)
        self._idle: dict[Key, http.client.HTTPConnection] = {}
        self._contexts: dict[tuple[Any, Any], ssl.SSLContext] = {}
        self._lock = threading.Lock()

    # -- requests' adapter interface --------------------------------------------------------------

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        return self.begin(request, timeout=timeout, verify=verify, cert=cert, proxies=proxies).response(stream)

    def begin(self, request: requests.PreparedRequest, timeout: Any = None, verify: Any = True,
              cert: Any = None, proxies: Any = None) -> Exchange:
        """Write the request; its answer is read by `Exchange.response`."""
        if proxies:
            raise requests.exceptions.InvalidSchema("this transport does not use proxies")
        parts = urllib.parse.urlsplit(request.url or "")
        if parts.scheme not in ("http", "https"):
            raise requests.exceptions.InvalidSchema(f"no transport for {parts.scheme!r} URLs")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise requests.exceptions.InvalidURL("the URL's port is not a number") from None
        if not parts.hostname:
            raise requests.exceptions.InvalidURL("the URL names no host")
        key: Key = (parts.scheme, parts.hostname, port, verify if parts.scheme == "https" else None,
                    cert if parts.scheme == "https" else None)
        connect_timeout, read_timeout, total = _timeouts(timeout)
        deadline = None if total is None else time.monotonic() + total
        conn = self._take(key)
        if conn is None:
            conn = self._connect(key, _within(connect_timeout, deadline))
        headers = dict(request.headers)
        headers["Accept-Encoding"] = "identity"  # bodies are read as they come, never decompressed
        try:
            conn.sock.settimeout(_within(read_timeout, deadline))  # sendall: the whole request in that time
            conn.response_class = (http.client.HTTPResponse if deadline is None else  # type: ignore[assignment]
                                   functools.partial(_bounded_response, deadline=deadline, read_timeout=read_timeout))
            conn.request(request.method or "GET", request.path_url, body=request.body, headers=headers)
        except DeadlineExceeded:
            conn.close()
            raise
        except socket.timeout:
            conn.close()
            raise requests.exceptions.ReadTimeout("the request could not be written in time",
                                                  request=request) from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise requests.exceptions.ConnectionError(_reason(exc), request=request) from None
        return Exchange(self, key, conn, request)

    def close(self) -> None:
        super().close()
        with self._lock:
            idle, self._idle = self._idle, {}
        for conn in idle.values():
            conn.close()

    # -- connections ------------------------------------------------------------------------------

    def _take(self, key: Key) -> http.client.HTTPConnection | None:
        with self._lock:
            conn = self._idle.pop(key, None)
        if conn is not None and not _is_idle_and_open(conn):
            conn.close()
            return None
        return conn

    def _give_back(self, key: Key, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if key not in self._idle:
                self._idle[key] = conn
                return
        conn.close()  # another request's connection is kept already

    def _connect(self, key: Key, timeout: float | None) -> http.client.HTTPConnection:
        scheme, host, port, verify, cert = key
        conn: http.client.HTTPConnection
        if scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._context(verify, cert))
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            conn.connect()
        except socket.timeout:
            conn.close()
            raise requests.exceptions.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except ssl.SSLError as exc:
            conn.close()
            raise requests.exceptions.SSLError(f"TLS with {host}:{port} failed ({exc.reason or exc})") from None
        except OSError as exc:
            conn.close()
            raise requests.exceptions.ConnectionError(f"connecting to {host}:{port} failed ({_reason(exc)})") from None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _context(self, verify: Any, cert: Any) -> ssl.SSLContext:
        key = (verify, cert)
        context = self._contexts.get(key)
        if context is None:
            if verify is False:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif isinstance(verify, str):
                context = (ssl.create_default_context(capath=verify) if os.path.isdir(verify)
                           else ssl.create_default_context(cafile=verify))
            else:
                context = ssl.create_default_context(cafile=certifi.where())
            if cert:
                certfile, keyfile = cert if isinstance(cert, tuple) else (cert, None)
                context.load_cert_chain(certfile, keyfile)
            self._contexts[key] = context
        return context


class Exchange:
    """One request written on a connection, its answer not read yet."""

    def __init__(self, adapter: KeepAliveAdapter, key: Key, conn: http.client.HTTPConnection,
                 request: requests.PreparedRequest):
        self._adapter = adapter
        self._key = key
        self._conn: http.client.HTTPConnection | None = conn
        self.request = request

    def response(self, stream: bool = True) -> requests.Response:
        """Read the answer's head (the body streams from `raw` unless `stream` is False)."""
        conn, self._conn = self._conn, None
        if conn is None:
            raise requests.exceptions.ConnectionError("this answer was abandoned or read already")
        request = self.request
        try:
            answer = conn.getresponse()
        except _DeadlinePassed:
            conn.close()
            raise DeadlineExceeded("the answer's head did not arrive within the deadline", request=request) from None
        except socket.timeout:
            conn.close()
            raise requests.exceptions.ReadTimeout("the server did not answer in time", request=request) from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise requests.exceptions.ConnectionError(_reason(exc), request=request) from None
        encoding = answer.getheader("Content-Encoding")
        if encoding and encoding.strip().lower() != "identity":
            conn.close()
            named = encoding.strip()[:24]  # a header: shown only when it is a plain token
            named = named if named.replace("-", "").isalnum() and named.isascii() else "compressed"
            raise requests.exceptions.ContentDecodingError(
                f"the server sent a {named} body, which was not asked for", request=request)
        response = requests.Response()
        response.status_code = answer.status
        response.reason = answer.reason
        response.headers = CaseInsensitiveDict(_joined(answer.getheaders()))
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = _Body(self._adapter, self._key, conn, answer)
        response.url = request.url or ""
        response.request = request
        response.connection = self._adapter
        if not stream:
            response.content  # noqa: B018 - read now, as requests' own adapter does without stream
        return response

    def abandon(self) -> None:
        """Never read: the connection is closed (its answer would otherwise precede the next one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class _Body:
    """The raw body of one response, as requests and `KijitoClient` read it. The connection goes back to
    the adapter once the body was read to its end (and the server did not ask to close it); a body closed
    before its end closes the connection, since the next answer would start in the middle of it."""

    def __init__(self, adapter: KeepAliveAdapter, key: Key, conn: http.client.HTTPConnection,
                 answer: http.client.HTTPResponse):
        self._adapter = adapter
        self._key = key
        self._conn: http.client.HTTPConnection | None = conn
        self._answer = answer

    def read1(self, size: int = -1, decode_content: bool = True) -> bytes:
        try:
            chunk = self._answer.read1(size)
        except _DeadlinePassed:
            self.close()
            raise DeadlineExceeded("the body did not arrive within the deadline") from None
        except socket.timeout:
            self.close()
            raise requests.exceptions.ConnectionError("the body stopped arriving (timed out)") from None
        except http.client.IncompleteRead:
            self.close()
            raise requests.exceptions.ChunkedEncodingError("the body was cut off (IncompleteRead)") from None
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise requests.exceptions.ConnectionError(f"the body was cut off ({_reason(exc)})") from None
        if not chunk:
            if self._answer.length:  # http.client reports an early end of a sized body as an empty read
                self.close()
                raise requests.exceptions.ChunkedEncodingError("the body was cut off (IncompleteRead)")
            self._finished()
        return chunk

    def read(self, size: int | None = None, decode_content: bool = True, **_: Any) -> bytes:
        if size is None:
            out = bytearray()
            while chunk := self.read1(65536):
                out += chunk
            return bytes(out)
        return self.read1(size)

    def stream(self, size: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        while chunk := self.read1(size):
            yield chunk

    def _finished(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        self._answer.close()
        if self._answer.will_close:
            conn.close()
        else:
            self._adapter._give_back(self._key, conn)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        self._answer.close()
        if conn is not None:
            conn.close()

    def release_conn(self) -> None:
        """requests calls this after `close`: the connection was given back or closed already."""


def _joined(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Header fields by name; a repeated field's values joined with ", " (as urllib3 does)."""
    out: dict[str, str] = {}
    lower: dict[str, str] = {}
    for name, value in pairs:
        known = lower.get(name.lower())
        if known is None:
            lower[name.lower()] = name
            out[name] = value
        else:
            out[known] = f"{out[known]}, {value}"
    return out


def _reason(exc: BaseException) -> str:
    """A short reason naming the failure's kind, never a URL or a header (so never the token)."""
    if isinstance(exc, http.client.RemoteDisconnected):
        return "RemoteDisconnected"
    if isinstance(exc, ConnectionRefusedError):
        return "Connection refused"
    if isinstance(exc, ConnectionResetError):
        return "ConnectionResetError"
    if isinstance(exc, socket.gaierror):
        return "Name or service not known"
    if isinstance(exc, http.client.IncompleteRead):
        return "IncompleteRead"
    return type(exc).__name__
