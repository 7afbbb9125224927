"""Facts about the Copilot CLI session a hook serves: interactive or `copilot -p`, and the socket of
kijito-pull's extension in it (extensions/copilot/kijito-pull/extension.mjs), its one way in from outside.

Mode: Copilot CLI puts `COPILOT_LOADER_PID` in the environment of the hooks of its terminal UI and not in
those of `copilot -p` (measured on 1.0.102); `$KIJITO_PULL_COPILOT_MODE` (interactive | headless) overrides it.

The extension (loaded only with `--experimental`) listens on `<runtime>/copilot-<session id>.sock`, where
`<runtime>` is `$XDG_RUNTIME_DIR/kijito-pull`, else `/tmp/kijito-pull-<uid>`: a folder of this user's, 0700,
the socket 0600 (the extension makes both). `Extension` speaks its protocol: one JSON line each way per
connection (`{"hello": true}` -> `{"session": id}`; `{"prompt", "mode"}` -> `{"ok": message id}` or
`{"error": ...}`), every connect, write and read bounded by a timeout. A socket or folder that is not this
user's own, or is a link, is never used.

Standard library only: the hook fast gate calls `detect_mode`.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from kijito_pull.core.errors import KijitoPullError

MODE_ENV = "KIJITO_PULL_COPILOT_MODE"
HOST_ENV = "KIJITO_PULL_COPILOT_HOST"  # "<pid>:<start>" of the Copilot CLI process, handed to the watcher
INTERACTIVE_ENV = "COPILOT_LOADER_PID"
HELLO_TIMEOUT = 1.0  # one look: is the extension there
EXTENSION_WAIT = 30.0  # the extension may still be starting when the session-start hook runs (measured)
SEND_TIMEOUT = 15.0  # one prompt (the extension itself gives session.send 10 s)
MAX_ANSWER = 64 * 1024
IMMEDIATE = "immediate"
ENQUEUE = "enqueue"


def detect_mode(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """(interactive | headless, a note about an ignored setting or None)."""
    raw = environ.get(MODE_ENV, "").strip().lower()
    if raw in ("interactive", "headless"):
        return raw, None
    note = f"ignoring {MODE_ENV}={raw[:20]!r} (expected interactive or headless)" if raw else None
    return ("interactive" if environ.get(INTERACTIVE_ENV, "").strip() else "headless"), note


def copilot_home(environ: Mapping[str, str]) -> Path:
    """Copilot CLI's home: `$COPILOT_HOME`, else `~/.copilot`."""
    from kijito_pull.core.paths import Paths

    paths = Paths(environ)
    raw = environ.get("COPILOT_HOME", "").strip()
    return paths.expand(raw) if raw else paths.expand("~") / ".copilot"


def extension_path(environ: Mapping[str, str]) -> Path:
    """Where `kijito-pull install copilot --user` puts the extension (Copilot's user extensions folder)."""
    return copilot_home(environ) / "extensions" / "kijito-pull" / "extension.mjs"


def split_comments(raw: bytes) -> tuple[bytes, bytes]:
    """(the leading `//` comment lines of a Copilot settings file, the JSON after them)."""
    pos = 0
    while pos < len(raw):
        end = raw.find(b"\n", pos)
        line = raw[pos:] if end < 0 else raw[pos:end + 1]
        if not line.lstrip().startswith(b"//"):
            break
        pos += len(line)
    return raw[:pos], raw[pos:]


def experimental(environ: Mapping[str, str]) -> bool:
    """Has Copilot CLI kept `"experimental": true` (from a `copilot --experimental`) in its settings.json?"""
    try:
        with open(copilot_home(environ) / "settings.json", "rb") as handle:
            raw = handle.read(1 << 20)
        data = json.loads(split_comments(raw)[1] or b"{}")
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("experimental") is True


def push_possible(environ: Mapping[str, str]) -> bool:
    """Will Copilot load kijito-pull's extension: it is installed and the experimental features are on."""
    return extension_path(environ).is_file() and experimental(environ)


def runtime_dir(environ: Mapping[str, str]) -> Path:
    xdg = environ.get("XDG_RUNTIME_DIR", "")
    return Path(xdg) / "kijito-pull" if xdg and os.path.isabs(xdg) else Path("/tmp") / f"kijito-pull-{os.getuid()}"


def socket_path(environ: Mapping[str, str], session_id: str) -> Path:
    return runtime_dir(environ) / f"copilot-{session_id}.sock"


class ExtensionError(KijitoPullError):
    """The extension's socket is missing, not ours, or did not answer."""


class Extension:
    """kijito-pull's extension in one Copilot CLI session, reached through its socket (module docstring)."""

    def __init__(self, path: Path, session_id: str):
        self.path = path
        self.session_id = session_id

    @classmethod
    def of(cls, environ: Mapping[str, str], session_id: str) -> Extension:
        return cls(socket_path(environ, session_id), session_id)

    def _check(self) -> None:
        uid = os.getuid()
        try:
            folder = os.lstat(self.path.parent)
            sock = os.lstat(self.path)
        except OSError as exc:
            raise ExtensionError(f"no extension socket at {self.path} ({exc.strerror})") from None
        if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != uid or folder.st_mode & 0o077:
            raise ExtensionError(f"{self.path.parent} is not a private folder of this user; not used")
        if not stat.S_ISSOCK(sock.st_mode) or sock.st_uid != uid:
            raise ExtensionError(f"{self.path} is not a socket of this user; not used")

    def call(self, request: dict, timeout: float) -> dict:
        """One request, one answer. Raises ExtensionError."""
        self._check()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(timeout)
        try:
            conn.connect(str(self.path))
            conn.sendall(json.dumps(request).encode("utf-8") + b"\n")
            data = b""
            while b"\n" not in data and len(data) < MAX_ANSWER:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            raise ExtensionError(f"the extension socket {self.path}: {exc}") from None
        finally:
            conn.close()
        try:
            answer = json.loads(data.split(b"\n", 1)[0])
        except ValueError:
            raise ExtensionError("the extension's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise ExtensionError("the extension's answer is not an object")
        return answer

    def listening(self, timeout: float = HELLO_TIMEOUT) -> bool:
        """Does this session's extension answer (and is it this session's)?"""
        try:
            return self.call({"hello": True}, timeout).get("session") == self.session_id
        except ExtensionError:
            return False

    def wait(self, within: float = EXTENSION_WAIT, step: float = 0.25) -> bool:
        """Wait, at most `within` seconds, for the extension to answer."""
        deadline = time.monotonic() + within
        while True:
            if self.listening():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(step)

    def send(self, prompt: str, mode: str, timeout: float = SEND_TIMEOUT) -> str | None:
        """`session.send({prompt, mode})` in the session: None when Copilot accepted it, else why not."""
        try:
            answer = self.call({"prompt": prompt, "mode": mode}, timeout)
        except ExtensionError as exc:
            return str(exc)
        if isinstance(answer.get("ok"), str):
            return None
        return f"Copilot CLI refused the message: {str(answer.get('error'))[:200]}"
