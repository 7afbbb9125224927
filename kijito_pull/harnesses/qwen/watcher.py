"""The watcher of one interactive Qwen Code session: new mail goes in through the session's inbox.

`qwen-session-start` arms one watcher per TUI session (a session whose Qwen process registered an inbox,
kijito_pull.harnesses.qwen.inbox; `qwen -p` registers none) as `kijito-pull hook qwen-watch`. It

- is the shared push watcher (kijito_pull.harnesses.session.pushwatch: the session's lease, ending with the
  Qwen process, a taken-back lease or a stop marker; the long-poll; one batch in flight at a time), with the
  session inbox as the way in, recorded first as pending with its own holder `qwen-push:<session id>`, so the
  session's hooks leave it alone while Qwen holds it;
- sends with a controller token (inbox.controller), so Qwen delivers the message without holding it for
  review: an idle TUI runs it as a new turn at once, a busy one after the current turn (Qwen queues inbox
  messages to the turn's end whatever their priority, so there is no interrupting a turn this way);
- ends, besides the shared reasons, when Qwen's registry stops naming its session (`/clear` starts a new
  session in the same process);
- confirms it from the session's chat record (harnesses/transcript.py, its own reader `qwen-push`): Qwen
  records a pushed message as a user record holding our markers. Only then does the cursor move past it and
  the next batch go out.

Qwen frames an inbox message for the model as its user's word relayed by a trusted controller; the hand-over
text (core.render) says itself that the mail is data written by other agents, not instructions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kijito_pull.core import process
from kijito_pull.core.models import Message
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.qwen import inbox
from kijito_pull.harnesses.session import pushwatch
from kijito_pull.harnesses.transcript import Transcript, transcript_of

NAME = "qwen-watch"
PUSH_KEY = "qwen-push"
READER = "qwen-push"  # the watcher's own chat-record reader (offset), apart from the hooks'
HOST_ENV = "KIJITO_PULL_QWEN_HOST"
CLI_ENV = "QWEN_CODE_CLI"  # Qwen's own entry script, in every hook's environment
INBOX_WAIT = 10.0  # how long the watcher waits for the session's registry record


def push_holder_key(session_id: str) -> str:
    return f"{PUSH_KEY}:{session_id}"


def qwen_command(environ: Mapping[str, str], host: process.Proc | None) -> list[str]:
    """The session's own Qwen: its Node and entry script (`$QWEN_CODE_CLI`), else `qwen` on PATH."""
    cli = environ.get(CLI_ENV, "")
    if host is not None and cli and os.path.isabs(cli):
        try:
            return [os.readlink(f"/proc/{host.pid}/exe"), cli]
        except OSError:
            pass
    return ["qwen"]


def wait_for_inbox(environ: Mapping[str, str], sid: str, host: process.Proc | None,
                   seconds: float) -> inbox.Inbox | None:
    if host is None:
        return None
    deadline = time.monotonic() + seconds
    while True:
        found = inbox.find(environ, sid, host.pid)
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


class Watcher(pushwatch.PushWatcher):
    """One Qwen TUI session's watcher: the shared push watcher, with the session inbox as the way in (module
    docstring)."""

    name = NAME
    host_title = "Qwen Code"

    def __init__(self, *args: Any, way_in: inbox.Inbox, token: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.way_in = way_in
        self.token = token

    def push(self, text: str, shown: Sequence[Message]) -> str | None:
        return inbox.send(self.way_in, self.token, text)

    def should_end(self) -> str | None:
        """Also when Qwen's registry no longer names this session: after `/clear` the process goes on with a
        new session (whose own watcher takes over), and the SessionEnd of this one may have come before this
        watcher held its lease."""
        why = super().should_end()
        if why is None and inbox.find(self.environ, self.sid, self.way_in.pid) is None:
            return "Qwen's registry no longer names this session (cleared, or Qwen is ending)"
        return why


def run(inp: HookInput, env: Any) -> int:
    """`kijito-pull hook qwen-watch` (started by qwen-session-start, never by Qwen): take the lease, watch."""
    environ, errors = env.environ, env.stderr
    sid = inp.session_id
    record = transcript_of(inp.data, Paths(environ), sid) if sid is not None else None
    if sid is None or record is None:
        say(errors, f"{NAME}: no session id or chat record in the input; not watching")
        return 0
    host = pushwatch.parse_host(environ.get(HOST_ENV))
    way_in = wait_for_inbox(environ, sid, host, INBOX_WAIT)
    if way_in is None:
        say(errors, f"{NAME}: session {sid}: Qwen registered no inbox for it in {inbox.registry_dir(environ)} "
                    f"within {INBOX_WAIT:g} s; not watching")
        return 0
    token, problem = inbox.controller(environ, qwen_command(environ, host))
    if token is None:
        say(errors, f"{NAME}: session {sid}: {problem}; not watching (new mail waits for the next prompt or the "
                    f"turn's end)")
        return 0
    return pushwatch.serve(
        inp, env, name=NAME, source="qwen", host=host, route=f"the session inbox {way_in.path}",
        build=lambda me, ready: Watcher(inp, environ, errors, holder_key=push_holder_key(sid), me=me, host=host,
                                        ready=ready, way_in=way_in, token=token,
                                        confirm=Transcript(Paths(environ), sid, record.path, reader=READER)))
