"""Qwen Code's session inbox: how a message from outside reaches a running TUI session (measured on 0.24.4,
docs/qwen.md).

Every interactive Qwen process registers itself in `<Qwen's folder>/sessions/<pid>.json` (0600, removed on
exit; `kind: "tui"`; not written by `qwen -p`), naming its session id and its inbox, a Unix socket
(`ipcPath`). An outside process connects, writes two NDJSON lines and closes: an `auth` line with a
*controller token*, then a `user` frame addressed to the session. Qwen answers nothing; an idle TUI runs the
message as a new turn (0.6 s), a busy one queues it to the turn's end; the chat record shows it as a user
record holding the whole `<cross_session_message ...>` envelope, our `kijito-ref:` markers included.

A controller token is minted once per Qwen folder with `qwen sessions controllers add --label
kijito-pull-<8 hex> --json` (shown once; Qwen keeps only its SHA-256 in `peer-controllers.json`; labels are
unique, ours is one per kijito-pull state folder). kijito-pull keeps the token in its own state folder (0600)
and checks, before each use, that Qwen still lists its hash (a controller the user removed is minted again;
one of our label whose token was lost is revoked first). The session's own `ipcToken` is not used: Qwen
holds messages sent with it for the user to review.

    find(environ, sid, pid)        the live session's inbox, from its registry record (qwen/session.py)
    controller(environ, command)   the controller token (minted with `command` when there is none)
    send(inbox, token, text)       one user message; None when the socket took it, else why not
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from kijito_pull.core import lock
from kijito_pull.core.files import ensure_private_dir
from kijito_pull.core.paths import Paths
from kijito_pull.core.state import StateError
from kijito_pull.harnesses import installkit
from kijito_pull.harnesses.qwen.session import Inbox, find, qwen_dir, read_json, registry_dir

LABEL = "kijito-pull"
FROM_NAME = "kijito"
MINT_TIMEOUT = 30.0
SEND_TIMEOUT = 5.0


# -- the controller token ----------------------------------------------------------------------------------


def _token_file(environ: Mapping[str, str]) -> Path:
    return Paths(environ).state_dir / "qwen-controller.json"


def _listed(environ: Mapping[str, str], token: str) -> bool:
    """Does Qwen still list this controller (its token's SHA-256 in peer-controllers.json)?"""
    data = read_json(qwen_dir(environ) / "peer-controllers.json")
    digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
    found = data.get("controllers") if isinstance(data, dict) else None
    return any(isinstance(c, dict) and c.get("tokenHash") == digest for c in found or ())


def _stored(environ: Mapping[str, str]) -> str | None:
    data = read_json(_token_file(environ))
    if not isinstance(data, dict) or data.get("qwen_dir") != str(qwen_dir(environ)):
        return None
    token = data.get("token")
    return token if isinstance(token, str) and token.startswith("qpc_") else None


def _store(environ: Mapping[str, str], token: str, ident: str) -> None:
    path = _token_file(environ)
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"qwen_dir": str(qwen_dir(environ)), "id": ident, "token": token}, handle)
    os.replace(tmp, path)


def label(environ: Mapping[str, str]) -> str:
    """Our controller's label: Qwen wants labels unique, so one per kijito-pull state folder."""
    place = str(Paths(environ).state_dir)
    return f"{LABEL}-{hashlib.sha256(place.encode('utf-8')).hexdigest()[:8]}"


def _labelled(environ: Mapping[str, str], name: str) -> list[str]:
    """The ids of Qwen's controllers called `name`."""
    data = read_json(qwen_dir(environ) / "peer-controllers.json")
    found = data.get("controllers") if isinstance(data, dict) else None
    return [str(c.get("id")) for c in found or () if isinstance(c, dict) and c.get("label") == name and c.get("id")]


def _qwen(command: Sequence[str], environ: Mapping[str, str], *words: str) -> subprocess.CompletedProcess | str:
    try:
        return subprocess.run([*command, "sessions", "controllers", *words], env=installkit.child_environ(environ),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=MINT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`qwen sessions controllers {words[0]}` could not run ({type(exc).__name__})"


def controller(environ: Mapping[str, str], command: Sequence[str]) -> tuple[str | None, str | None]:
    """(token, None), or (None, why not). A stored token Qwen still lists is used; else one is minted by
    running `command` (the session's own Qwen) with `sessions controllers add`, one watcher at a time (under
    a lock beside the token file). A controller of our label whose token was lost (our state folder was
    wiped) is revoked first: Qwen refuses a second controller of the same label."""
    token = _stored(environ)
    if token is not None and _listed(environ, token):
        return token, None
    path = _token_file(environ)
    try:
        ensure_private_dir(path.parent)
        fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except (OSError, StateError) as exc:
        return None, f"the controller token's lock could not be opened ({exc})"
    try:
        if not lock.acquire(fd, MINT_TIMEOUT * 2):
            return None, "another watcher is minting a controller token for too long"
        token = _stored(environ)  # minted meanwhile by the watcher that held the lock
        if token is not None and _listed(environ, token):
            return token, None
        name = label(environ)
        for ident in _labelled(environ, name):
            _qwen(command, environ, "remove", ident)
        done = _qwen(command, environ, "add", "--label", name, "--json")
        if isinstance(done, str):
            return None, done
        try:
            made = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
        except (ValueError, IndexError):
            made = None
        token = made.get("token") if isinstance(made, dict) else None
        if not isinstance(token, str) or not token.startswith("qpc_"):
            why = (done.stderr or "").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            return None, f"`qwen sessions controllers add` gave no token ({why[0][:200]})"
        try:
            _store(environ, token, str(made.get("id", "")))
        except (OSError, StateError) as exc:
            return None, f"the controller token could not be kept ({exc})"
        return token, None
    finally:
        os.close(fd)


# -- sending -------------------------------------------------------------------------------------------------


def frames(inbox: Inbox, token: str, text: str) -> bytes:
    auth = {"msgV": 1, "type": "auth", "token": token}
    user = {"msgV": 1, "msgId": str(uuid.uuid4()), "type": "user", "fromName": FROM_NAME,
            "toSessionId": inbox.session_id, "priority": "next", "message": {"role": "user", "content": text}}
    return (json.dumps(auth) + "\n" + json.dumps(user) + "\n").encode("utf-8")


def send(inbox: Inbox, token: str, text: str, timeout: float = SEND_TIMEOUT) -> str | None:
    """Write one user message to the session's inbox: None when the socket took it, else why not (Qwen writes
    nothing back; the chat record confirms it)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(inbox.path)
            sock.sendall(frames(inbox, token, text))
            sock.shutdown(socket.SHUT_WR)
    except OSError as exc:
        return f"the session inbox {inbox.path} refused the message ({exc.strerror or type(exc).__name__})"
    return None


__all__ = ["Inbox", "controller", "find", "frames", "registry_dir", "send"]
