"""The OpenCode adapter: what `kijito-pull hook opencode-*` does for the plugin (extensions/opencode/kijito-pull.js).

    opencode-chat-message   a user message: waiting mail as `{"text": ...}` (`{}` when none), which the plugin
                            adds to the message as one more text part. Pending with the session (holder
                            `opencode:<session id>`) until OpenCode's record shows its markers; then, when the
                            session's server listens, the session's watcher is armed (opencode/watcher.py)
    opencode-session-idle   a turn's end (the plugin runs it detached, so it outlives `opencode run`): what the
                            session holds, its hooks' and its watcher's (`opencode-push:<session id>`), is
                            confirmed from its record; the rest stays pending (the session may go on; its
                            holder's end or deadline claims it back)
    opencode-watch          the watcher itself (started by opencode-chat-message, never by the plugin)

The hand-over is the shared one (kijito_pull.harnesses.handover: its budget, its `HookSink`, its one JSON
answer, its failure lines), through core.delivery.pull_through with this session as the holder and OpenCode's
record (opencode/record.py) as the confirmation: the session's server when it listens, else `opencode export`.
"""

from __future__ import annotations

import os

from kijito_pull.core import config
from kijito_pull.core.delivery import PullReport, pull_through
from kijito_pull.core.environment import Environment
from kijito_pull.core.models import ApiError
from kijito_pull.core.pending import Holder
from kijito_pull.core.state import StateError
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.opencode.record import Record
from kijito_pull.harnesses.opencode.server import Server
from kijito_pull.harnesses.opencode.variant import OPENCODE, Variant, for_name
from kijito_pull.harnesses.session import lifecycle

CHAT_MESSAGE = OPENCODE.hook("chat-message")  # Kilo's: `kilo-chat-message`, ... (its variant's names)
SESSION_IDLE = OPENCODE.hook("session-idle")
WATCH = OPENCODE.hook("watch")


def session_holder_key(sid: str, variant: Variant = OPENCODE) -> str:
    return f"{variant.name}:{sid}"


def server_of(inp: HookInput, env: Environment) -> Server | None:
    """The session's own OpenCode server, when the plugin's `server_url` is one that knows this session."""
    url = inp.data.get("server_url")
    if inp.session_id is None or not isinstance(url, str) or not url:
        return None
    return Server.for_session(url, inp.session_id, env.environ, variant=for_name(inp.hook))


def record_of(inp: HookInput, env: Environment, server: Server | None) -> Record:
    assert inp.session_id is not None
    return Record.of(inp.data, inp.session_id, env.environ, server, for_name(inp.hook))


def pull(inp: HookInput, env: Environment, sink: handover.HookSink, server: Server | None) -> PullReport:
    """One hand-over through `sink`, pending with the session until its record shows it (a session without a
    valid id: acknowledged once written). Raises ConfigError, ApiError or StateError."""
    ready = handover.setup(inp.persona, env.environ)
    try:
        if inp.session_id is None:
            return pull_through(ready.engine, ready.engine.factory, sink)
        host = lifecycle.host_process()  # the OpenCode process that runs the plugin
        holder = Holder(session_holder_key(inp.session_id, for_name(inp.hook)), host.pid if host else None,
                        host.start if host else None, ttl=handover.HAND_OVER_TTL)
        return pull_through(ready.engine, ready.engine.factory, sink, holder=holder,
                            confirm=record_of(inp, env, server))
    finally:
        ready.close()


def chat_message(inp: HookInput, env: Environment, out: handover.Output, server: Server | None = None) -> int:
    """Waiting mail as one more part of the user message; any failure lets the message go on without it."""
    persona = inp.persona

    def emit(text: str) -> bool:
        return out.json({"text": text})

    sink = handover.HookSink(emit)
    report = handover.checked_pull(inp, env, out, sink, via=lambda i, e, s: pull(i, e, s, server))
    if report is None:
        return 0
    if not report.delivered and report.refused is None and sink.notes:
        emit(sink.text(persona, []))  # e.g. an urgency note, or mail that would not fit
    return 0


# -- the hooks' handlers (each named by its Hook in kijito_pull.harnesses.opencode.HARNESS) ---------------------


def on_chat_message(inp: HookInput, env: Environment) -> int:
    server = server_of(inp, env)
    handover.answer(inp, env, lambda i, e, out: chat_message(i, e, out, server))
    if server is not None:
        arm_watcher(inp, env)
    return 0


def on_session_idle(inp: HookInput, env: Environment) -> int:
    """Confirm what the session holds (its hooks' hand-overs and its watcher's pushes) from its record; nothing
    is handed over. A push the record shows is confirmed here too, so a watcher gone before its next look
    (killed, or ended with OpenCode) leaves nothing the model has to be claimed back and pushed again. The
    plugin runs it detached, with no stderr: what it says goes to `<sessions>/<session id>.idle.log`."""
    sid = inp.session_id
    if sid is None:
        return 0
    log = lifecycle.sessions_dir(env.environ) / f"{sid}.idle.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return _confirm_idle(inp, env, sid)
    with os.fdopen(fd, "a", encoding="utf-8") as errors:
        return _confirm_idle(inp, Environment(stdin=env.stdin, stdout=env.stdout, stderr=errors,
                                              environ=env.environ, cwd=env.cwd), sid)


def _confirm_idle(inp: HookInput, env: Environment, sid: str) -> int:
    from kijito_pull.harnesses.opencode.watcher import push_holder_key

    ready = handover.setup(inp.persona, env.environ)
    try:
        variant = for_name(inp.hook)
        held = {key: ready.engine.held_by(key) for key in (session_holder_key(sid, variant),
                                                          push_holder_key(sid, variant))}
        ids = [i for key_ids in held.values() for i in key_ids]
        if not ids:
            return 0
        record = record_of(inp, env, server_of(inp, env))
        seen = record.shown(inp.persona, ids)  # one read of the record for both holders
        if record.problem:
            say(env.stderr, f"{inp.hook}: session {sid}: {record.problem}; the hand-over stays pending")
        for key, key_ids in held.items():
            if key_ids:
                ready.engine.settle(key, confirmed=seen & set(key_ids))
        say(env.stderr, f"{inp.hook}: session {sid}: {len(seen)} of {len(ids)} hand-over(s) confirmed from "
                        f"{record.where}")
    except (config.ConfigError, ApiError, StateError) as exc:
        say(env.stderr, f"{inp.hook}: session {sid}: {handover.failure_text(exc)}")
    finally:
        ready.close()
    return 0


def on_watch(inp: HookInput, env: Environment) -> int:
    from kijito_pull.harnesses.opencode import watcher

    return watcher.run(inp, env)


def arm_watcher(inp: HookInput, env: Environment) -> None:
    """After the answer is written: start the session's watcher, unless it has one or was stopped."""
    from kijito_pull.harnesses.session import pushwatch

    variant = for_name(inp.hook)
    pushwatch.arm(inp, env, name=variant.hook("watch"), host_env=variant.host_env, host=lifecycle.host_process(),
                  later="new mail waits for the next message")
