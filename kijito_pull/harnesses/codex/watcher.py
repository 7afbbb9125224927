"""The watcher of one interactive Codex session: new mail wakes the idle session through `codex queue`.

Codex has one way in from outside: `codex queue --thread <session id> --message TEXT` makes an idle
session take a new turn with TEXT as a user message (a busy one takes it as its next turn). The session
start hook arms one watcher per interactive session (codex.session.detect_mode) as a detached process
(`kijito-pull hook codex-watch`); the watcher

- is the shared push watcher (kijito_pull.harnesses.session.pushwatch: the session's lease, ending with the
  session's host process (the TUI, or the shared app-server daemon that runs the session's thread), a
  taken-back lease or a stop marker; the long-poll; one batch in flight at a time), with Codex's way in:
  one budgeted batch (core.render.hand_over, with its `kijito-ref:` markers) to `codex queue`, recorded first
  as a pending hand-over of its own holder `codex-queue:<session id>` (core/pending.py): the session's
  hooks leave that mail alone while it is in Codex's queue, so it never goes out on two paths;
- confirms the batch from the session's rollout (harnesses/transcript.py, read from its own offset),
  which records the queued text once the turn takes it; only then is the cursor moved past it, and only
  then is the next batch queued. A queue that refused (`codex queue` failed) releases the batch at once;
  one that never delivers is claimed back at its deadline or when the host is gone, and the hooks hand
  it over instead.

The mail travels as the argument of a short-lived `codex queue` process (its only interface), so it is
visible in the process list for about a quarter of a second; the process gets no Kijito token.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import Any

from kijito_pull.core import render
from kijito_pull.core.models import Message
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.codex import appserver
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.session import pushwatch
from kijito_pull.harnesses.transcript import Transcript

NAME = "codex-watch"
READER = "queue"  # the watcher's own rollout reader (offset), apart from the hooks'
QUEUE_TIMEOUT = 20.0  # one `codex queue` call


def queue_holder_key(session_id: str) -> str:
    return f"codex-queue:{session_id}"


class Watcher(pushwatch.PushWatcher):
    """An interactive Codex session's one watcher: the shared push watcher with `codex queue` as the way in
    (module docstring)."""

    name = NAME
    verb = "queued"
    host_title = "Codex"

    def __init__(self, *args: Any, codex: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.codex = codex

    def push(self, text: str, shown: Sequence[Message]) -> str | None:
        try:
            done = subprocess.run([self.codex, "queue", "--thread", self.sid, "--message", text],
                                  env=appserver.child_environ(self.environ), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=QUEUE_TIMEOUT,
                                  start_new_session=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`codex queue` failed: {exc}"
        if done.returncode != 0:
            detail = " ".join(done.stderr.decode("utf-8", "replace").split())[-200:]
            return f"`codex queue` exited {done.returncode}: {render.sanitize(detail)}"
        return None


def run(inp: HookInput, env: Any) -> int:
    """`kijito-pull hook codex-watch` (started by codex-session-start, never by Codex): take the lease, watch."""
    from kijito_pull.harnesses.codex import session as codex_session

    environ, errors = env.environ, env.stderr
    sid = inp.session_id
    raw = inp.data.get("transcript_path")
    if sid is None or not isinstance(raw, str) or not os.path.isabs(raw):
        say(errors, f"{NAME}: no session id or rollout path in the input; not watching")
        return 0
    host = pushwatch.parse_host(environ.get(codex_session.HOST_ENV))
    codex = codex_session.codex_command(environ, host)
    if codex is None:
        say(errors, f"{NAME}: session {sid}: no `codex` command found (PATH, ${codex_session.CODEX_ENV}); not watching")
        return 0
    return pushwatch.serve(
        inp, env, name=NAME, source="codex", host=host, route=f"{codex} queue --thread {sid}",
        build=lambda me, ready: Watcher(inp, environ, errors, holder_key=queue_holder_key(sid), me=me, host=host,
                                        ready=ready, confirm=Transcript(Paths(environ), sid, raw, reader=READER),
                                        codex=codex))
