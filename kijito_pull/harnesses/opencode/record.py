"""OpenCode's own record of a session, as the hand-over loop's Confirmation (core/source.py).

OpenCode keeps its sessions in SQLite (`~/.local/share/opencode/opencode.db`, no JSON files), and shows one
session as JSON two ways (measured on 1.18.33): `opencode export <session id>` (a process, about 1 to 4 s)
and, when its server listens, `GET /session/{id}/message`. Both hold every part of every message: the text
part the plugin added at `chat.message` and a prompt pushed through `prompt_async`, each with its
`kijito-ref:` markers (core.render.ref). A hand-over counts as confirmed only when its markers are there,
never by our own write (OpenCode may drop a part, or exit before it saves one).

    Record.of(data, sid, environ, server)   the session's record: its server's when given, else the export
    opencode_command(data, environ)         which `opencode` to ask (the plugin names its own binary)

`opencode export` gets OpenCode's environment without any Kijito setting (the token never reaches it), runs
in a neutral folder (so no project's plugins are loaded for it) and is bounded (`EXPORT_TIMEOUT`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kijito_pull.core import render
from kijito_pull.core.errors import KijitoPullError
from kijito_pull.harnesses import installkit
from kijito_pull.harnesses.opencode.server import Server, ServerError
from kijito_pull.harnesses.opencode.variant import OPENCODE, Variant

EXPORT_TIMEOUT = 20.0
OPENCODE_ENV = OPENCODE.command_env  # which `opencode` to ask, when the plugin does not say


class RecordError(KijitoPullError):
    """OpenCode's record of a session could not be read (export failed or said something unexpected)."""


def opencode_command(data: Mapping[str, Any], environ: Mapping[str, str], variant: Variant = OPENCODE) -> str | None:
    """The OpenCode binary the plugin runs in (its `process.execPath`, an absolute executable whose name
    starts with "opencode"; Kilo: "kilo" or ".kilo"), else $KIJITO_PULL_OPENCODE ($KIJITO_PULL_KILO), else
    `opencode` (`kilo`) on PATH."""
    named = data.get("opencode")
    if isinstance(named, str) and os.path.isabs(named) and os.path.basename(named).startswith(variant.binaries) \
            and os.path.isfile(named) and os.access(named, os.X_OK):
        return named
    return installkit.which(environ.get(variant.command_env, "").strip() or variant.executable, environ)


def export_text(opencode: str, sid: str, environ: Mapping[str, str], timeout: float = EXPORT_TIMEOUT) -> str:
    """`opencode export <sid>`'s JSON, as text. Raises RecordError."""
    try:
        done = subprocess.run([opencode, "export", sid], env=installkit.child_environ(environ),
                              cwd=tempfile.gettempdir(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=timeout, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RecordError(f"`{os.path.basename(opencode)} export` failed: {exc}") from None
    if done.returncode != 0:
        raise RecordError(f"`{os.path.basename(opencode)} export {sid}` exited {done.returncode}")
    return done.stdout.decode("utf-8", "replace")


class Record:
    """One session's record, read whole at each look (it is never long; nothing is kept between looks)."""

    def __init__(self, read: Callable[[], str], where: str):
        self.read = read
        self.where = where
        self.problem: str | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any], sid: str, environ: Mapping[str, str], server: Server | None = None,
           variant: Variant = OPENCODE) -> Record:
        if server is not None:
            return cls(lambda: server.messages(sid), f"{server.base}/session/{sid}/message")
        opencode = opencode_command(data, environ, variant)

        def read() -> str:
            if opencode is None:
                raise RecordError(f"no `{variant.executable}` command found to export the session with")
            return export_text(opencode, sid, environ)

        return cls(read, f"`{variant.executable} export {sid}`")

    def text(self) -> str | None:
        try:
            return self.read()
        except (RecordError, ServerError) as exc:
            self.problem = str(exc)
            return None

    # -- the hand-over loop's Confirmation (core/source.py) ---------------------------------------------------

    def shown(self, persona: str, ids: Sequence[int]) -> set[int]:
        """Which of `ids` the session's record shows (their markers); nothing when it cannot be read."""
        if not ids:
            return set()
        text = self.text()
        if text is None:
            return set()
        return {i for i in ids if render.ref(persona, i) in text}

    def kept(self) -> None:
        """Nothing to keep: each look reads the whole record."""


__all__ = ["EXPORT_TIMEOUT", "Record", "RecordError", "export_text", "opencode_command"]
