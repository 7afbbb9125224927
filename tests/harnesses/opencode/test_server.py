"""OpenCode's server as kijito-pull uses it (kijito_pull.harnesses.opencode.server), against a real HTTP server
on loopback that answers as OpenCode 1.18.33 does: a server counts as the session's only when it knows that
session; the password from OpenCode's environment goes as basic auth; `prompt_async` sends one text part;
nothing but an http URL on loopback is ever asked.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kijito_pull.harnesses.opencode.server import Server, loopback

SID = "ses_abc"
PASSWORD = "pw-9f1"


class _OpenCode(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None, bytes]] = []

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass

    def _answer(self, status: int, body: object | None = None) -> None:
        raw = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
        expected = "Basic " + base64.b64encode(f"opencode:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            return self._answer(401)
        if self.path == f"/session/{SID}":
            return self._answer(200, {"id": SID})
        if self.path == f"/session/{SID}/message":
            return self._answer(200, [{"parts": [{"type": "text", "text": "kijito-ref:x"}]}])
        if self.path == f"/session/{SID}/prompt_async" and self.command == "POST":
            return self._answer(204)
        return self._answer(404, {"name": "NotFoundError"})

    do_GET = do_POST = _handle


@pytest.fixture
def opencode():
    _OpenCode.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenCode)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def test_only_a_server_that_knows_the_session_is_used(opencode) -> None:
    environ = {"OPENCODE_SERVER_PASSWORD": PASSWORD}
    server = Server.for_session(opencode, SID, environ)
    assert server is not None
    assert Server.for_session(opencode, "ses_other", environ) is None  # another OpenCode's server
    assert Server.for_session(opencode, SID, {}) is None  # no password: 401
    assert Server.for_session("http://127.0.0.1:1/", SID, environ) is None  # nothing listens


def test_prompt_sends_one_text_part_with_basic_auth(opencode) -> None:
    server = Server.for_session(opencode, SID, {"OPENCODE_SERVER_PASSWORD": PASSWORD})
    assert server is not None
    assert server.prompt(SID, "MAIL kijito-ref:y") is None
    method, path, auth, body = _OpenCode.seen[-1]
    assert (method, path) == ("POST", f"/session/{SID}/prompt_async")
    assert json.loads(body) == {"parts": [{"type": "text", "text": "MAIL kijito-ref:y"}]}
    assert "kijito-ref:x" in server.messages(SID)
    assert server.prompt("ses_gone", "x") is not None  # a refusal says why


@pytest.mark.parametrize("url", ["https://127.0.0.1:4096/", "http://example.com:4096/", "http://10.0.0.1:4096/",
                                 "file:///etc/passwd", "http://127.0.0.1/", "not a url"])
def test_anything_but_loopback_http_is_never_asked(url) -> None:
    assert loopback(url) is None
    assert Server.for_session(url, SID, {}) is None


def test_loopback_urls_are_kept_as_given() -> None:
    assert loopback("http://127.0.0.1:4098/") == "http://127.0.0.1:4098"
    assert loopback("http://localhost:4096/") == "http://localhost:4096"


def test_a_patient_look_asks_a_slow_server_again_and_a_hooks_look_does_not(opencode) -> None:
    """On a loaded machine OpenCode's server was slower than the request timeout at the watcher's first look
    (issue 27, trip 12): the watcher asks again within its patience; a hook asks once; a server that answers
    that it does not know the session is not asked again; nothing is waited for once it is no longer wanted."""
    import time

    environ = {"OPENCODE_SERVER_PASSWORD": PASSWORD}
    slow = {"left": 2}
    original = _OpenCode._handle

    def sometimes_slow(self) -> None:
        if self.path == f"/session/{SID}" and slow["left"] > 0:
            slow["left"] -= 1
            time.sleep(0.6)  # past the 0.2 s timeout below: no answer in time
        original(self)

    _OpenCode.do_GET = sometimes_slow
    try:
        assert Server.for_session(opencode, SID, environ, timeout=0.2) is None  # a hook: one look
        slow["left"] = 2
        started = time.monotonic()
        server = Server.for_session(opencode, SID, environ, timeout=0.2, patience=10)
        assert server is not None and slow["left"] == 0
        assert time.monotonic() - started < 5
        looks = len(_OpenCode.seen)
        assert Server.for_session(opencode, "ses_other", environ, timeout=0.2, patience=10) is None
        assert len(_OpenCode.seen) == looks + 1  # a definite answer: asked once
        slow["left"] = 5
        started = time.monotonic()
        assert Server.for_session(opencode, SID, environ, timeout=0.2, patience=10, still_wanted=lambda: False) is None
        assert time.monotonic() - started < 2  # the session's OpenCode is gone: no more waiting
    finally:
        _OpenCode.do_GET = original
