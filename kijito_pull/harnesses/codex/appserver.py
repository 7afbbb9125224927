"""Asking Codex itself: a short JSON-RPC conversation with `codex app-server` over its stdio.

Codex decides which hooks it runs: a hook runs only when the user trusted it (the hash Codex computes
of its definition is recorded in config.toml), and a project's `.codex/hooks.json` is read only in a
trusted project. Neither rule is ours to re-implement, so kijito-pull asks Codex:

    hooks(codex, cwd)          `hooks/list`: every hook Codex sees for `cwd`, with its key, current
                               hash and trust status ("trusted", "untrusted", "modified")
    trust(codex, cwd, hooks)   `config/batchWrite`: records `[hooks.state."<key>"] trusted_hash` for
                               exactly those hooks, written by Codex into its own config.toml
    write_config(...)          `config/batchWrite` of one table (e.g. a project's trust_level)

One conversation is one `codex app-server` process (about a quarter of a second), ended when the
answer is in; every call is bounded (`TIMEOUT`), and its environment carries no Kijito token.
Errors come back as `AppServerError` with one line that says what failed.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kijito_pull.core import config
from kijito_pull.core.errors import KijitoPullError

TIMEOUT = 20.0
TRUSTED = "trusted"
#: Environment variables that are ours and never reach a Codex we start.
class AppServerError(KijitoPullError):
    """`codex app-server` could not be started or did not answer as expected (one line)."""


@dataclass(frozen=True)
class CodexHook:
    """One hook as Codex sees it (`hooks/list`)."""

    key: str
    event: str  # Codex's camelCase name, e.g. "sessionStart"
    command: str
    source_path: str
    current_hash: str
    trust: str  # "trusted", "untrusted", "modified", ...
    enabled: bool = True

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> CodexHook:
        return cls(str(row.get("key", "")), str(row.get("eventName", "")), str(row.get("command") or ""),
                   str(row.get("sourcePath") or ""), str(row.get("currentHash") or ""),
                   str(row.get("trustStatus") or "unknown"), bool(row.get("enabled", True)))


@dataclass(frozen=True)
class HookList:
    """What Codex's app server lists as its hooks, with the warnings and errors it reported."""

    hooks: tuple[CodexHook, ...]
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


def child_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a Codex process we start: the caller's, without our secrets (the token and the
    Redis password)."""
    return config.without_secrets(environ)


class _Conversation:
    def __init__(self, codex: str, cwd: str, environ: Mapping[str, str], timeout: float):
        self.deadline = time.monotonic() + timeout
        try:
            self.proc = subprocess.Popen([codex, "app-server"], cwd=cwd, env=child_environ(environ),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
        except OSError as exc:
            raise AppServerError(f"cannot start `{codex} app-server`: {exc.strerror or exc}") from None
        self._buffer = b""
        self._next = 0
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)

    def __enter__(self) -> _Conversation:
        self.call("initialize", {"clientInfo": {"name": "kijito-pull", "version": _version()}})
        self.notify("initialized")
        return self

    def __exit__(self, *exc: object) -> None:
        self._selector.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise AppServerError(f"`codex app-server` stopped reading ({exc.strerror or exc})") from None

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self._next += 1
        ident = self._next
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            message = self._read()
            if message.get("id") != ident or "method" in message:
                continue  # a notification, or a request of the server's that we do not serve
            if "error" in message:
                error = message["error"] if isinstance(message["error"], dict) else {}
                raise AppServerError(f"`codex app-server` refused {method}: {str(error.get('message', error))[:200]}")
            return message.get("result")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while b"\n" not in self._buffer:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise AppServerError("`codex app-server` did not answer in time")
            if not self._selector.select(remaining):
                continue
            chunk = self.proc.stdout.read(65536)
            if not chunk:
                raise AppServerError(f"`codex app-server` exited (status {self.proc.poll()}) before answering")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}


def _version() -> str:
    from kijito_pull import __version__

    return __version__


def hooks(codex: str, cwd: str, environ: Mapping[str, str], *, timeout: float = TIMEOUT) -> HookList:
    """Every hook Codex sees for a session started in `cwd`."""
    with _Conversation(codex, cwd, environ, timeout) as talk:
        return _hook_list(talk, cwd)


def _hook_list(talk: _Conversation, cwd: str) -> HookList:
    result = talk.call("hooks/list", {"cwds": [cwd]})
    rows = result.get("data") if isinstance(result, dict) else None
    if not isinstance(rows, list):
        raise AppServerError("`codex app-server` answered hooks/list without a list")
    found: list[CodexHook] = []
    warnings: list[str] = []
    errors: list[str] = []
    for entry in rows:
        if not isinstance(entry, dict):
            continue
        found += [CodexHook.from_json(h) for h in entry.get("hooks") or () if isinstance(h, dict)]
        warnings += [_text(w) for w in entry.get("warnings") or ()]
        errors += [_text(e) for e in entry.get("errors") or ()]
    return HookList(tuple(found), tuple(warnings), tuple(errors))


def _text(item: Any) -> str:
    if isinstance(item, dict):
        return str(item.get("message") or item.get("summary") or item)[:300]
    return str(item)[:300]


def write_config(codex: str, cwd: str, environ: Mapping[str, str], key_path: str, value: dict[str, Any], *,
                 timeout: float = TIMEOUT) -> None:
    """Merge `value` into the table `key_path` of Codex's config.toml, written by Codex itself."""
    with _Conversation(codex, cwd, environ, timeout) as talk:
        talk.call("config/batchWrite", {"edits": [{"keyPath": key_path, "value": value, "mergeStrategy": "upsert"}]})


def trust(codex: str, cwd: str, chosen: Sequence[CodexHook], environ: Mapping[str, str], *,
          timeout: float = TIMEOUT) -> HookList:
    """Record trust for exactly `chosen` (their current hashes), then list again to prove it took."""
    with _Conversation(codex, cwd, environ, timeout) as talk:
        if chosen:
            state = {hook.key: {"trusted_hash": hook.current_hash} for hook in chosen}
            talk.call("config/batchWrite", {"edits": [{"keyPath": "hooks.state", "value": state,
                                                       "mergeStrategy": "upsert"}]})
        return _hook_list(talk, cwd)
