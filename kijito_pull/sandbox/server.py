"""HTTP plumbing: a threaded HTTP/1.1 server on loopback and the request handler.

Per request: parse, then (for non-admin paths) log -> WAF (403 for Python-urllib) -> auth (401) ->
fault rule -> endpoint -> optional mutation -> JSON answer. Admin paths (/_sandbox/...) only check
the token. Connection-level faults (reset, close, hang, huge) live here because they need the socket.
"""

from __future__ import annotations

import hmac
import json
import socket
import socketserver
import struct
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kijito_pull import __version__
from kijito_pull.sandbox import admin, api
from kijito_pull.sandbox.faults import apply_mutation

#: Bodies bigger than this are refused (the sandbox only ever needs small JSON bodies).
MAX_BODY = 8 * 1024 * 1024
_HUGE_CHUNK = 64 * 1024
_HUGE_PREFIX = b'{"result": [{"id": 1, "from": "huge", "content": "'
_NO_BODY_STATUSES = (204, 304)
_CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, socket.timeout)


class SandboxHTTPServer(ThreadingHTTPServer):
    """The sandbox's threaded HTTP server; it keeps track of open connections so stop() can close them."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, sandbox: Any) -> None:
        self.sandbox = sandbox
        self._conns_lock = threading.Lock()
        self._conns: set = set()
        self._reset: set = set()
        super().__init__(address, SandboxHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would do a reverse DNS lookup (getfqdn); loopback needs none.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port

    # -- connection bookkeeping, so stop() can end keep-alive connections and held requests ---------

    def track(self, conn: socket.socket) -> None:
        with self._conns_lock:
            self._conns.add(conn)

    def untrack(self, conn: socket.socket) -> None:
        with self._conns_lock:
            self._conns.discard(conn)

    def mark_reset(self, conn: socket.socket) -> None:
        with self._conns_lock:
            self._reset.add(conn)

    def close_all_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def shutdown_request(self, request) -> None:
        with self._conns_lock:
            reset = request in self._reset
            self._reset.discard(request)
        if reset:
            # No shutdown(SHUT_WR): that would send a FIN first. close() with SO_LINGER 0 sends RST.
            self.close_request(request)
        else:
            super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        # A client that went away is routine for a test server; anything else is worth a traceback.
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class SandboxHandler(BaseHTTPRequestHandler):
    """One connection's requests to the sandbox (HTTP/1.1 keep-alive), routed to its API."""

    protocol_version = "HTTP/1.1"
    server_version = f"KijitoSandbox/{__version__}"
    sys_version = ""
    timeout = 120  # idle keep-alive connections are closed after this long
    # Headers and body go out in separate writes; with Nagle on, the body waits for the client's
    # delayed ACK of the headers (~40 ms per request on a keep-alive connection).
    disable_nagle_algorithm = True
    server: SandboxHTTPServer

    # -- socketserver hooks ------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    # -- dispatch ----------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        try:
            self._handle()
        except _CLIENT_GONE:
            self.close_connection = True

    def _handle(self) -> None:
        sandbox = self.server.sandbox
        if sandbox.stopping():
            self.close_connection = True
            return
        split = urlsplit(self.path)
        path = split.path
        query: dict[str, str] = {}
        for key, value in parse_qsl(split.query, keep_blank_values=True):
            query.setdefault(key, value)
        body = self._read_body()
        if body is None:
            return
        auth_ok = self._auth_ok()

        if path == "/_sandbox" or path.startswith("/_sandbox/"):
            if not auth_ok:
                self._send_json(401, api.error_body("missing or invalid token"), None, _WWW_AUTH)
                return
            status, payload = admin.route(sandbox, self.command, path, body)
            self._send_json(status, payload, None)
            return

        entry = sandbox.log.open(self.command, path, query, self.headers.get("User-Agent"), auth_ok)
        if (self.headers.get("User-Agent") or "").startswith("Python-urllib"):
            self._send_json(403, api.error_body("forbidden"), entry)
            return
        if not auth_ok:
            self._send_json(401, api.error_body("missing or invalid token"), entry, _WWW_AUTH)
            return

        rule = sandbox.faults.take(path, query)
        if rule is not None:
            sandbox.log.update(entry, fault=rule["kind"])
            if not self._apply_fault(rule, entry):
                return
        try:
            status, payload = api.route(sandbox, self.command, path, query, body)
        except Exception:  # a bug or a store closed under us by stop(): answer, don't hang up
            if sandbox.stopping():
                self.close_connection = True
                return
            status, payload = 500, api.error_body("internal sandbox error")
        if rule is not None and rule["kind"] == "mutate" and status == 200:
            payload = apply_mutation(rule, payload)
        self._send_json(status, payload, entry)

    # -- faults ------------------------------------------------------------------------------------

    def _apply_fault(self, rule: Mapping[str, Any], entry: dict | None) -> bool:
        """Carry out a fault; True means "now answer normally" (hang, mutate)."""
        kind = rule["kind"]
        if kind == "status":
            status = rule["status"]
            if "body" in rule:
                payload = rule["body"].encode("utf-8")
                ctype = "text/plain; charset=utf-8"
            else:
                payload = _json_bytes(api.error_body(f"injected fault: HTTP {status}"))
                ctype = "application/json"
            self._send_raw(status, payload, ctype, entry, rule.get("headers"))
            return False
        if kind == "body":
            self._send_raw(rule["status"], rule["body"].encode("utf-8"), "application/json", entry,
                           rule.get("headers"))
            return False
        if kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.server.mark_reset(self.connection)
            self.close_connection = True
            return False
        if kind == "close":
            self.close_connection = True
            return False
        if kind == "hang":
            if self.server.sandbox.stop_event.wait(rule["seconds"]):
                self.close_connection = True
                return False
            return True
        if kind == "huge":
            self._stream_huge(rule.get("bytes"), entry)
            return False
        return True  # mutate: applied to the real answer

    def _stream_huge(self, total: int | None, entry: dict | None) -> None:
        sandbox = self.server.sandbox
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if total is None:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(total))
        self.end_headers()
        sandbox.log.update(entry, status=200)
        if self.command == "HEAD":
            return
        filler = (_HUGE_PREFIX + b"x" * _HUGE_CHUNK)[:_HUGE_CHUNK]
        plain = b"x" * _HUGE_CHUNK
        sent = 0
        self.connection.settimeout(0.25)  # wake up regularly to notice stop()
        try:
            while total is None or sent < total:
                if sandbox.stopping():
                    self.close_connection = True
                    return
                piece = filler if sent == 0 else plain
                if total is not None:
                    piece = piece[: total - sent]
                try:
                    sent += self.connection.send(piece)
                except socket.timeout:
                    continue
        finally:
            try:
                self.connection.settimeout(self.timeout)
            except OSError:
                pass

    # -- plumbing ----------------------------------------------------------------------------------

    def _read_body(self) -> bytes | None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            self._send_json(411, api.error_body("chunked request bodies are not supported"), None)
            return None
        raw_length = self.headers.get("Content-Length")
        if not raw_length:
            return b""
        try:
            length = int(raw_length)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self._send_json(400 if length < 0 else 413, api.error_body("bad request body length"), None)
            return None
        return self.rfile.read(length)

    def _auth_ok(self) -> bool:
        sandbox = self.server.sandbox
        expected = sandbox.token.encode("utf-8", "surrogateescape")
        if sandbox.auth_header:
            value = self.headers.get(sandbox.auth_header)
            if value is None:
                return False
            offered = value.strip()
        else:
            value = self.headers.get("Authorization") or ""
            scheme, _, offered = value.strip().partition(" ")
            if scheme.lower() != "bearer":
                return False
            offered = offered.strip()
        return hmac.compare_digest(offered.encode("utf-8", "surrogateescape"), expected)

    def _send_json(self, status: int, payload: Any, entry: dict | None,
                   headers: Mapping[str, str] | None = None) -> None:
        self._send_raw(status, _json_bytes(payload), "application/json", entry, headers)

    def _send_raw(self, status: int, body: bytes, content_type: str, entry: dict | None,
                  headers: Mapping[str, str] | None = None) -> None:
        self.server.sandbox.log.update(entry, status=status)
        final: dict[str, str] = {"Content-Type": content_type}
        if status not in _NO_BODY_STATUSES:
            final["Content-Length"] = str(len(body))
        if self.close_connection:
            final["Connection"] = "close"
        lowered = {k.lower(): k for k in final}
        for key, value in (headers or {}).items():
            final.pop(lowered.get(key.lower(), key), None)
            final[key] = value
        self.send_response(status)
        for key, value in final.items():
            self.send_header(key, value)
        self.end_headers()
        if status not in _NO_BODY_STATUSES and self.command != "HEAD" and body:
            self.wfile.write(body)


_WWW_AUTH = {"WWW-Authenticate": 'Bearer realm="kijito-sandbox"'}


def _json_bytes(payload: Any) -> bytes:
    return json.dumps(payload).encode("utf-8")


def serve_in_thread(server: SandboxHTTPServer) -> threading.Thread:
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="kijito-sandbox", daemon=True
    )
    thread.start()
    return thread
