"""The watcher of one interactive Copilot CLI session: new mail goes in through kijito-pull's extension.

Copilot CLI takes a message from outside only through an extension (`--experimental`): ours
(extensions/copilot/kijito-pull/extension.mjs) calls `session.send({prompt, mode})` for what arrives on its
socket (copilot/session.py). Measured on 1.0.102 in the terminal UI: an idle session takes the message as a
new turn (the model request 0.4 s later); in a busy one `immediate` reaches the next model call and
`enqueue` becomes the turn after the current one. Either way the session's events.jsonl records it as a
`user.message` only when the model is given it. `copilot-session-start` arms one watcher per interactive
session whose extension answers (`kijito-pull hook copilot-watch`); it

- is the shared push watcher (kijito_pull.harnesses.session.pushwatch: the session's lease, ending with the
  Copilot CLI process, a taken-back lease or a stop marker; the long-poll; one batch in flight at a time),
  with the extension's socket as the way in, recorded first as pending with its own holder
  `copilot-push:<session id>`, so the session's Stop hook leaves it alone while Copilot holds it;
- picks the mode by the project's `inbox interrupt:` policy (optin.may_interrupt): the mail that may reach a
  busy agent goes `immediate` (under `urgent`, only mail marked urgent, ahead of the rest: a row's flag where the
  source has one, else the rise of the persona's urgent count that the wake saw); everything else
  `enqueue`, for the turn's end;
- confirms it from the session's events.jsonl (harnesses/transcript.py, its own reader `push`); only then does
  the cursor move past it and the next batch go out.

The mail travels over the 0600 socket; the extension gets no Kijito setting from kijito-pull.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kijito_pull.core.models import Message
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.copilot.hooks import record_path
from kijito_pull.harnesses.copilot.session import ENQUEUE, EXTENSION_WAIT, HOST_ENV, IMMEDIATE, Extension
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.session import pushwatch
from kijito_pull.harnesses.session.optin import INTERRUPT_TURN_END, may_interrupt
from kijito_pull.harnesses.transcript import Transcript

NAME = "copilot-watch"
PUSH_KEY = "copilot-push"
READER = "push"  # the watcher's own events.jsonl reader (offset), apart from the hooks'


def push_holder_key(session_id: str) -> str:
    return f"{PUSH_KEY}:{session_id}"


class Watcher(pushwatch.PushWatcher):
    """One interactive Copilot CLI session's watcher: the shared push watcher, with the extension's
    `session.send` as the way in (module docstring)."""

    name = NAME
    host_title = "Copilot CLI"

    def __init__(self, *args: Any, extension: Extension, policy: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.extension = extension
        self.policy = policy
        self.mode = ENQUEUE

    def select(self, pending: Sequence[Message]) -> list[Message]:
        """The mail that may interrupt a turn goes first, `immediate`; when there is none, all of it, `enqueue`."""
        urgent = [m for m in pending if may_interrupt(self.policy, True if self.urgent.marked(self.persona, m)
                                                     else m.urgent)]
        self.mode = IMMEDIATE if urgent else ENQUEUE
        return urgent or list(pending)

    def push(self, text: str, shown: Sequence[Message]) -> str | None:
        return self.extension.send(text, self.mode)


def run(inp: HookInput, env: Any) -> int:
    """`kijito-pull hook copilot-watch` (started by copilot-session-start, never by Copilot): take the lease,
    watch."""
    environ, errors = env.environ, env.stderr
    sid = inp.session_id
    if sid is None:
        say(errors, f"{NAME}: no session id in the input; not watching")
        return 0
    extension = Extension.of(environ, sid)
    if not extension.wait():
        say(errors, f"{NAME}: session {sid}: kijito-pull's extension did not answer at {extension.path} within "
                    f"{EXTENSION_WAIT:g} s; not watching")
        return 0
    host = pushwatch.parse_host(environ.get(HOST_ENV))
    policy = getattr(inp.optin, "interrupt", INTERRUPT_TURN_END)
    return pushwatch.serve(
        inp, env, name=NAME, source="copilot", host=host, route=f"session.send through {extension.path}",
        build=lambda me, ready: Watcher(inp, environ, errors, holder_key=push_holder_key(sid), me=me, host=host,
                                        ready=ready, extension=extension, policy=policy,
                                        confirm=Transcript(Paths(environ), sid, str(record_path(environ, sid)),
                                                           reader=READER)))
