"""A stand-in for the HTTP server of one OpenCode session's process, as the OpenCode watcher uses it
(kijito_pull.harnesses.opencode.server; measured on 1.18.33: docs/opencode.md, the real server in
tests/e2e/test_opencode_e2e.py), and for the OpenCode behind it:

    GET  /session/{id}               200 `{"id": ...}` for this session, else 404
    GET  /session/{id}/message       200, the session's messages (HarnessSession.messages_json: the same
                                     store `opencode export` prints, so the hooks and the watcher read one record)
    POST /session/{id}/prompt_async  204 once OpenCode took the prompt (its one text part); the prompt is
                                     recorded as a user message (HarnessSession.pushed) when its turn starts

With `OPENCODE_SERVER_PASSWORD` set OpenCode asks for basic auth; here every request must carry user
`opencode` and a password `run-<tag>`, and a push's `tag` is that password's tail: the crash trials give
each watcher its own (`watcher_env`). What a push becomes (taken, late, never recorded, refused: 500) is
the shared stand-in's (tests/wayin.py).
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kijito_pull.harnesses.opencode.variant import VARIANTS
from tests.entrypoints import HarnessSession
from tests.wayin import WayIn

_PASSWORD = "run-"


class OpenCodeServer(WayIn):
    """One OpenCode session's server on loopback (module docstring)."""

    def __init__(self, session: HarnessSession, **kwargs):
        super().__init__(**kwargs)
        assert session.harness in VARIANTS  # OpenCode, or Kilo Code CLI under its own names
        self.variant = VARIANTS[session.harness]
        self.session = session
        way = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

            def _answer(self, status: int, body: str | None = None) -> None:
                raw = body.encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(raw)))
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except OSError:
                    pass  # the watcher was killed while it waited for the answer

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                tag = way.tag_of(self.headers.get("Authorization") or "")
                if tag is None:
                    return self._answer(401)
                base = f"/session/{way.session.id}"
                if self.command == "GET" and self.path == base:
                    return self._answer(200, json.dumps({"id": way.session.id, "title": "crash trial"}))
                if self.command == "GET" and self.path == base + "/message":
                    return self._answer(200, way.session.messages_json())
                if self.command == "POST" and self.path == base + "/prompt_async":
                    try:
                        parts = json.loads(body)["parts"]
                        text = "".join(p["text"] for p in parts if p.get("type") == "text")
                    except (ValueError, KeyError, TypeError):
                        return self._answer(400, json.dumps({"name": "BadRequest"}))
                    if not way.offer(text, tag, {"parts": parts}):
                        return self._answer(500, json.dumps({"name": "UnknownError"}))
                    return self._answer(204)
                return self._answer(404, json.dumps({"name": "NotFoundError"}))

            do_GET = do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def tag_of(self, authorization: str) -> str | None:
        """The tag of a request's basic auth (`opencode:run-<tag>`, Kilo: `kilo:`), or None when it does not log
        in."""
        kind, _, encoded = authorization.partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if kind != "Basic" or user != self.variant.default_user or not password.startswith(_PASSWORD):
            return None
        return password[len(_PASSWORD):]

    def record(self, text: str) -> None:
        self.session.pushed(text)

    def watcher_env(self, tag: str) -> dict[str, str]:
        """The watcher's environment: OpenCode's server password, which tells its requests apart."""
        return {self.variant.password_env: _PASSWORD + tag}

    def input_fields(self) -> dict[str, str]:
        """What the plugin passes the hooks of this session: the server's URL."""
        return {"server_url": self.url}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        super().close()


def for_session(runtime: Path, session: HarnessSession, seed: int) -> OpenCodeServer:
    """The crash trials' way in for a session (kijito_pull/harnesses/opencode/testing.py names it)."""
    return OpenCodeServer(session, record_delay=0.3, seed=seed)
