"""The watcher of one OpenCode session whose server listens: new mail becomes a new prompt of the session.

OpenCode's server (`opencode serve --port N`, the TUI started with `opencode --port N`) takes a prompt from
outside: `POST /session/{id}/prompt_async` answers 204 at once; an idle session starts a turn with it (the
model request came 0.23 s later in the TUI, 1.3 s with `opencode serve`), a busy one queues it as its next
turn (measured on 1.18.33). `opencode-chat-message` starts one watcher per such session, detached
(`kijito-pull hook opencode-watch`); it

- is Codex's watcher loop (kijito_pull.harnesses.codex.watcher.Watcher: the session's lease, one per session,
  ending with the OpenCode process, a taken-back lease or a stop marker; the long-poll; one batch in flight
  at a time through core.delivery.pull_through with a `HELD_WAITS` batch sink), with OpenCode's way in:
  the batch goes out as one prompt, recorded first as pending with its own holder `opencode-push:<session id>`,
  so the plugin's hooks leave it alone while it is in OpenCode's queue;
- confirms it from the session's messages on the same server (opencode/record.py), which show the prompt's
  markers once OpenCode took it; only then does the cursor move past it and the next batch go out. A refused
  prompt releases the batch at once; one never shown is claimed back at its deadline or when OpenCode is gone.

The mail travels in the body of a loopback HTTP request to OpenCode's own server (with OpenCode's own
`OPENCODE_SERVER_PASSWORD` when set); no Kijito setting goes with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.core import process
from kijito_pull.core.pending import Holder
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.codex import watcher as codex_watcher
from kijito_pull.harnesses.codex.session import host_token, parse_host
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.opencode.record import Record
from kijito_pull.harnesses.opencode.server import Server
from kijito_pull.harnesses.session import lifecycle

NAME = "opencode-watch"
HOST_ENV = "KIJITO_PULL_OPENCODE_HOST"  # "<pid>:<start>" of the OpenCode process, handed to the watcher
PUSH_TTL = codex_watcher.QUEUE_TTL  # a queued prompt may wait behind a long turn


def push_holder_key(session_id: str) -> str:
    return f"opencode-push:{session_id}"


class Watcher(codex_watcher.Watcher):
    """One OpenCode session's watcher: Codex's loop, with `prompt_async` as the way in (module docstring)."""

    def __init__(self, inp: HookInput, environ: Mapping[str, str], errors: Any, *, server: Server,
                 me: lifecycle.Proc, host: lifecycle.Proc | None, ready: handover.Setup, record: Record):
        super().__init__(inp, environ, errors, codex="", me=me, host=host, ready=ready,
                         transcript=record)  # type: ignore[arg-type] - a Confirmation, as the loop needs
        self.server = server
        self.holder = Holder(push_holder_key(self.sid), host.pid if host else None, host.start if host else None,
                             ttl=PUSH_TTL)

    def queue(self, text: str) -> str | None:
        """One prompt into the session (None: OpenCode accepted it)."""
        return self.server.prompt(self.sid, text)


def spawn(raw_input: bytes, environ: Mapping[str, str], host: process.Proc | None, log: Path) -> int:
    """Start `kijito-pull hook opencode-watch` detached from the hook (its own session, no pipe of OpenCode's
    held open), reading the same hook input. Returns its pid; raises OSError."""
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    env = dict(environ)
    env[HOST_ENV] = host_token(host)
    try:
        child = subprocess.Popen([sys.executable, "-m", "kijito_pull", "hook", NAME], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=fd, env=env, start_new_session=True, close_fds=True)
    finally:
        os.close(fd)
    assert child.stdin is not None
    try:
        child.stdin.write(raw_input)
        child.stdin.close()
    except OSError:
        pass
    return child.pid


def run(inp: HookInput, env: Any) -> int:
    """`kijito-pull hook opencode-watch` (started by opencode-chat-message): take the lease, watch."""
    environ, errors = env.environ, env.stderr
    sid = inp.session_id
    url = inp.data.get("server_url")
    if sid is None or not isinstance(url, str):
        say(errors, f"{NAME}: no session id or server URL in the input; not watching")
        return 0
    server = Server.for_session(url, sid, environ)
    if server is None:
        say(errors, f"{NAME}: session {sid}: no OpenCode server that knows this session at {url}; not watching")
        return 0
    host = parse_host(environ.get(HOST_ENV))
    ready = handover.setup(inp.persona, environ, timeout=5.0, attempts=1, deadline=5.0)
    me = process.me()
    try:
        outcome = lifecycle.acquire(environ, sid, project=inp.project, persona=inp.persona, me=me, host=host,
                                    source="opencode", one_per_host=False)  # `opencode serve` runs many sessions
    except lifecycle.LifecycleError as exc:
        ready.close()
        say(errors, f"{NAME}: session {sid}: {lifecycle.Result.STARTUP_FAILED.value} ({exc})")
        return 0
    if outcome.result is not lifecycle.Result.ARMED:
        ready.close()
        say(errors, f"{NAME}: {outcome.line()}")
        return 0
    say(errors, f"{NAME}: {outcome.line()}; POST {server.base}/session/{sid}/prompt_async")
    watcher = Watcher(inp, environ, errors, server=server, me=me, host=host, ready=ready,
                      record=Record.of(inp.data, sid, environ, server))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: watcher.stop.set())
    return watcher.run()
