"""The watcher of one OpenCode session whose server listens: new mail becomes a new prompt of the session.

OpenCode's server (`opencode serve --port N`, the TUI started with `opencode --port N`) takes a prompt from
outside: `POST /session/{id}/prompt_async` answers 204 at once; an idle session starts a turn with it (the
model request came 0.23 s later in the TUI, 1.3 s with `opencode serve`), a busy one queues it as its next
turn (measured on 1.18.33). `opencode-chat-message` starts one watcher per such session, detached
(`kijito-pull hook opencode-watch`); it

- is the shared push watcher (kijito_pull.harnesses.session.pushwatch: the session's lease, one per session,
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

from collections.abc import Sequence
from typing import Any

from kijito_pull.core import process
from kijito_pull.core.models import Message
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.opencode.record import Record
from kijito_pull.harnesses.opencode.server import Server
from kijito_pull.harnesses.opencode.variant import OPENCODE, Variant, for_name
from kijito_pull.harnesses.session import pushwatch

NAME = OPENCODE.hook("watch")  # Kilo's: `kilo-watch`, with KIJITO_PULL_KILO_HOST
HOST_ENV = OPENCODE.host_env  # "<pid>:<start>" of the OpenCode process, handed to the watcher
#: The watcher is a background process, so it waits longer than a hook for OpenCode's server: each request
#: (its first look, the session's messages, a prompt) up to REQUEST_TIMEOUT, and a server that does not answer
#: its first look is asked again for up to PATIENCE while the OpenCode process lives (opencode/server.py).
REQUEST_TIMEOUT = 10.0
PATIENCE = 60.0


def push_holder_key(session_id: str, variant: Variant = OPENCODE) -> str:
    return f"{variant.name}-push:{session_id}"


class Watcher(pushwatch.PushWatcher):
    """One OpenCode session's watcher: the shared push watcher, with `prompt_async` as the way in (module
    docstring)."""

    name = NAME
    host_title = "OpenCode"

    def __init__(self, *args: Any, server: Server, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.server = server
        self.name = self.inp.hook  # `opencode-watch` or `kilo-watch`
        self.host_title = server.title

    def push(self, text: str, shown: Sequence[Message]) -> str | None:
        """One prompt into the session (None: OpenCode accepted it)."""
        return self.server.prompt(self.sid, text)


def run(inp: HookInput, env: Any) -> int:
    """`kijito-pull hook opencode-watch` (started by opencode-chat-message): take the lease, watch."""
    environ, errors = env.environ, env.stderr
    variant = for_name(inp.hook)
    name = variant.hook("watch")
    sid = inp.session_id
    url = inp.data.get("server_url")
    if sid is None or not isinstance(url, str):
        say(errors, f"{name}: no session id or server URL in the input; not watching")
        return 0
    host = pushwatch.parse_host(environ.get(variant.host_env))
    server = Server.for_session(url, sid, environ, timeout=REQUEST_TIMEOUT, patience=PATIENCE,
                                still_wanted=lambda: host is None or process.alive(host.pid, host.start),
                                variant=variant)
    if server is None:
        say(errors, f"{name}: session {sid}: no {variant.title} server that knows this session at {url}; not watching")
        return 0
    return pushwatch.serve(
        inp, env, name=name, source=variant.name, host=host, route=f"POST {server.base}/session/{sid}/prompt_async",
        build=lambda me, ready: Watcher(inp, environ, errors, holder_key=push_holder_key(sid, variant), me=me,
                                        host=host, ready=ready, server=server,
                                        confirm=Record.of(inp.data, sid, environ, server, variant)))
