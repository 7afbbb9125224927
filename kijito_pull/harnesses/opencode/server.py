"""OpenCode's own HTTP server, as kijito-pull uses it: is it this session's, its messages, a new prompt.

`opencode serve --port N` and the TUI started with `opencode --port N` listen on loopback (measured on
1.18.33); the plugin passes its `serverUrl`. Without `--port` that URL is a placeholder
(`http://localhost:4096/`) where nothing, or another OpenCode, may listen: a server counts as the session's
only when it knows the session (`GET /session/{id}` answers 200 with that id). With
`OPENCODE_SERVER_PASSWORD` set the server asks for HTTP basic auth (user `$OPENCODE_SERVER_USERNAME`, default
`opencode`); the password is read from the environment OpenCode gave us and sent only to that server.

    Server.for_session(url, sid, environ)   the server, or None when it is not this session's (or not there);
                                            with `patience`, a server that does not answer is asked again
    Server.messages(sid)                    the session's messages as JSON text (GET /session/{id}/message)
    Server.prompt(sid, text)                POST /session/{id}/prompt_async: None when accepted (204), else why

Every request is bounded (`TIMEOUT`): a first request to a server still starting was measured to hang. A
hook asks once, within its own short budget; the detached watcher (opencode/watcher.py) is patient: on a loaded
machine (load 10 on 2 cores) OpenCode's server took longer than `TIMEOUT` to answer its first look, and a
watcher that gave up on that one look left the session unwoken for good.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

from kijito_pull.core.errors import KijitoPullError

PASSWORD_ENV = "OPENCODE_SERVER_PASSWORD"
USERNAME_ENV = "OPENCODE_SERVER_USERNAME"
TIMEOUT = 3.0
MAX_BODY = 64 << 20


def loopback(url: str) -> str | None:
    """`url` as `http://host:port` when it is an http URL on loopback, else None (mail goes nowhere else)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return None
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1") or parts.port is None:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"http://{host}:{parts.port}"


class ServerError(KijitoPullError):
    """An OpenCode server request failed or answered something unexpected."""


class Server:
    """One OpenCode server on loopback (module docstring)."""

    def __init__(self, base: str, environ: Mapping[str, str], timeout: float = TIMEOUT):
        self.base = base
        self.timeout = timeout
        password = environ.get(PASSWORD_ENV, "")
        user = environ.get(USERNAME_ENV, "") or "opencode"
        self._auth = ("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()) if password else None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy

    @classmethod
    def for_session(cls, url: str, sid: str, environ: Mapping[str, str], timeout: float = TIMEOUT,
                    patience: float = 0.0, still_wanted: Callable[[], bool] = lambda: True) -> Server | None:
        """The server at `url` when it knows session `sid`; None when it is not loopback, answers that it does
        not know the session, or did not answer. `patience`: for how many seconds a server that does not
        answer (still starting, or slow on a loaded machine) is asked again, while `still_wanted()`."""
        base = loopback(url) if url else None
        if base is None:
            return None
        server = cls(base, environ, timeout)
        deadline, pause = time.monotonic() + patience, 0.25
        while True:
            try:
                status, body = server._request("GET", f"/session/{urllib.parse.quote(sid)}")
                break
            except ServerError:
                if time.monotonic() + pause > deadline or not still_wanted():
                    return None
                time.sleep(pause)
                pause = min(2 * pause, 4.0)
        try:
            found = json.loads(body) if status == 200 else None
        except ValueError:
            return None
        return server if isinstance(found, dict) and found.get("id") == sid else None

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base + path, data=body, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if self._auth:
            request.add_header("Authorization", self._auth)
        try:
            with self._opener.open(request, timeout=self.timeout) as answer:
                return answer.status, answer.read(MAX_BODY)
        except urllib.error.HTTPError as exc:
            return exc.code, b""
        except (OSError, ValueError) as exc:
            raise ServerError(f"OpenCode's server at {self.base} did not answer ({exc})") from None

    def messages(self, sid: str) -> str:
        status, body = self._request("GET", f"/session/{urllib.parse.quote(sid)}/message")
        if status != 200:
            raise ServerError(f"OpenCode's server at {self.base} answered {status} for the session's messages")
        return body.decode("utf-8", "replace")

    def prompt(self, sid: str, text: str) -> str | None:
        payload = json.dumps({"parts": [{"type": "text", "text": text}]}).encode()
        try:
            status, _ = self._request("POST", f"/session/{urllib.parse.quote(sid)}/prompt_async", payload)
        except ServerError as exc:
            return str(exc)
        return None if status in (200, 204) else f"OpenCode's server at {self.base} answered {status} to prompt_async"


__all__ = ["PASSWORD_ENV", "Server", "ServerError", "loopback"]
