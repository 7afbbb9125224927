"""Claude Code's session inbox socket: where a session takes a user message from one of its own children.

Claude Code 2.1.224+ binds a Unix socket per session (`claude -p` included, not `--bare`) and exports
its path and a token to every hook (measured on 2.1.332: docs/claude.md, "Pushing mail to a busy
session"). The protocol is NDJSON: first `{"type": "auth", "token": ...}`, then
`{"type": "user", "message": {"role": "user", "content": TEXT}}`. Nothing is written back: whether the
session took the message shows only in its transcript (a `queue-operation` line when it is queued, the
message itself once the model is given it; kijito_pull.harnesses.transcript), and a session whose
`crossSessionInbound` setting is `hold` or `refuse` says nothing at all.

The feature is detected at run time, never from a version: the two variables present and the socket
accepting a connection. The token stays in this process: it is never logged, never put in argv, never
passed to a process we start. Standard library only.
"""

from __future__ import annotations

import json
import os
import socket

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SOCKET_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"
TOKEN_ENV = "CLAUDE_CODE_MESSAGING_TOKEN"
PUSH_ENV = "KIJITO_PULL_CLAUDE_PUSH"  # "off": never push through the socket (the doorbell and Stop hook only)
TIMEOUT = 2.0
MAX_TEXT = 200_000  # far under the socket's ~1M characters per message


class InboxSocket:
    """One session's inbox socket. `repr` never shows the token."""

    def __init__(self, path: str, token: str):
        self.path = path
        self._token = token

    def __repr__(self) -> str:
        return f"InboxSocket({self.path!r})"

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        return sock

    def reachable(self) -> bool:
        """Does the socket accept a connection now? (Nothing is sent.)"""
        try:
            self._connect().close()
        except OSError:
            return False
        return True

    def send(self, text: str) -> None:
        """Write one user message. Raises OSError when it cannot be written (the session may still refuse
        or hold it without a word: only its transcript tells)."""
        if len(text) > MAX_TEXT:
            raise ValueError(f"a socket message is limited to {MAX_TEXT} characters here")
        lines = [{"type": "auth", "token": self._token},
                 {"type": "user", "message": {"role": "user", "content": text}}]
        payload = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
        sock = self._connect()
        try:
            sock.sendall(payload)
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        finally:
            sock.close()


def from_environ(environ: Mapping[str, str], *, probe: bool = True) -> tuple[InboxSocket | None, str]:
    """(the session's socket, why) -- None when this session has none we may use. probe=False: only what
    the environment says (no connection is made; the socket may still refuse them)."""
    if environ.get(PUSH_ENV, "").strip().lower() == "off":
        return None, f"{PUSH_ENV}=off"
    path, token = environ.get(SOCKET_ENV, ""), environ.get(TOKEN_ENV, "")
    if not path or not token:
        return None, (f"this Claude Code gives hooks no inbox socket (${SOCKET_ENV} is not set: older than "
                      f"2.1.224, or --bare)")
    if "\0" in path or not os.path.isabs(path):
        return None, f"${SOCKET_ENV} is not an absolute path"
    sock = InboxSocket(path, token)
    if not probe:
        return sock, f"the session inbox socket {path} is named (not yet tried)"
    if not sock.reachable():
        return None, f"the session inbox socket {path} does not accept connections"
    return sock, f"the session inbox socket {path} accepts connections"
