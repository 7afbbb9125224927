"""The dashboard's web server: a read-only page, its live updates, and nothing else.

    GET /?key=KEY               the page (static/page.html with its CSS and JS inlined, and the current
                                snapshot embedded, so the first paint needs no second request)
    GET /events?key=KEY         server-sent events: the snapshot at once, then each new one as the board
                                changes (a comment every KEEPALIVE seconds meanwhile); no polling
    GET /snapshot.json?key=KEY  the snapshot as JSON

Any request without the access key (compared in constant time) gets 403 and nothing else; no method but
GET is answered. The key is made by `make_key` and is the only secret the page knows: the Kijito token
never reaches the board, so it can reach neither the page nor its answers. Every answer forbids caching,
sending the key on as a referrer, and framing; the page's scripts run under a per-answer CSP nonce.
Standard library only (http.server's ThreadingHTTPServer: one thread per open page).
"""

from __future__ import annotations

import hmac
import http.server
import importlib.resources
import secrets
import socket
import threading
import urllib.parse
from typing import Any

from kijito_pull.dashboard.board import Board

KEEPALIVE = 15.0
#: Seconds a connection may send nothing of its request (or a browser take nothing of an event) before it
#: is closed: a client that opens a connection and stays silent never holds a thread for good.
IDLE_TIMEOUT = 60.0
FORBIDDEN = b"forbidden: open the address `kijito-pull dashboard` printed; it carries the access key (?key=...)\n"


def make_key() -> str:
    return secrets.token_urlsafe(24)


def _asset(name: str) -> str:
    return importlib.resources.files("kijito_pull.dashboard").joinpath("static").joinpath(name).read_text("utf-8")


def page_template() -> str:
    """static/page.html with static/page.css and static/page.js inlined (nonce and snapshot left to fill)."""
    return (_asset("page.html").replace("/*STYLE*/", _asset("page.css"))
            .replace("/*SCRIPT*/", _asset("page.js")))


def embed(text: str) -> str:
    """JSON made safe inside a <script> element: no `<`, `>` or `&` for the HTML parser to see."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class DashboardServer(http.server.ThreadingHTTPServer):
    """Serves `board` on (host, port) to whoever presents `key` (module docstring)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], board: Board, key: str, idle_timeout: float = IDLE_TIMEOUT):
        self.board = board
        self.idle_timeout = idle_timeout
        self.key = key.encode()
        self.template = page_template()
        self.closing = threading.Event()
        super().__init__(address, Handler)

    def authorised(self, query: str) -> bool:
        given = urllib.parse.parse_qs(query).get("key", [""])[0]
        return hmac.compare_digest(given.encode(), self.key)

    def close(self) -> None:
        """Stop serving; open event streams end at once."""
        self.closing.set()
        self.board.wake()
        self.shutdown()
        self.server_close()


class Handler(http.server.BaseHTTPRequestHandler):
    """One request to the dashboard."""

    server: DashboardServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.timeout = self.server.idle_timeout  # the socket's: every read of a request and every write is bounded
        super().setup()
        # headers and body are two writes: without this, a kept-alive connection waits out delayed ACKs
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path, _, query = self.path.partition("?")
        if not self.server.authorised(query):
            self._send(403, FORBIDDEN, "text/plain; charset=utf-8")
            return
        if path == "/":
            self._page()
        elif path == "/events":
            self._events()
        elif path == "/snapshot.json":
            self._send(200, self.server.board.current()[1].encode(), "application/json")
        else:
            self._send(404, b"not found: /, /events or /snapshot.json\n", "text/plain; charset=utf-8")

    def _refuse(self) -> None:
        if not self.server.authorised(self.path.partition("?")[2]):
            self._send(403, FORBIDDEN, "text/plain; charset=utf-8")
        else:
            self._send(405, b"read-only: GET only\n", "text/plain; charset=utf-8")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_TRACE = _refuse  # noqa: N815

    def _headers(self, code: int, kind: str, nonce: str | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        script = f"'nonce-{nonce}'" if nonce else "'none'"
        self.send_header("Content-Security-Policy", f"default-src 'none'; script-src {script}; style-src {script}; "
                                                    "connect-src 'self'; img-src data:; frame-ancestors 'none'")

    def _send(self, code: int, body: bytes, kind: str, nonce: str | None = None) -> None:
        self._headers(code, kind, nonce)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _page(self) -> None:
        nonce = secrets.token_urlsafe(12)
        body = (self.server.template.replace("__NONCE__", nonce)
                .replace("/*SNAPSHOT*/", embed(self.server.board.current()[1])))
        self._send(200, body.encode(), "text/html; charset=utf-8", nonce)

    def _events(self) -> None:
        board = self.server.board
        self._headers(200, "text/event-stream; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        version = -1
        try:
            while not self.server.closing.is_set():
                newest, text = board.current()
                if newest != version:
                    version = newest
                    self.wfile.write(f"id: {version}\ndata: {text}\n\n".encode())
                    self.wfile.flush()
                elif not board.wait_newer(version, KEEPALIVE):
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
        except OSError:  # the browser went away
            return

    def log_message(self, *args: Any) -> None:  # no access log: the key is in every request line
        pass
