"""The Claude Code adapter: its hooks over the shared hand-over (kijito_pull.harnesses.handover), plus
what only Claude Code has: the doorbell prompt and the waker.

    claude-session-start  SessionStart: waiting mail as `additionalContext`; in an interactive
                          session, one line on how new mail will wake it
    claude-stop           Stop: unseen mail blocks the stop (`{"decision": "block", "reason": ...}`),
                          at most `max_stop_blocks` times in a row; never twice for the same mail
    claude-prompt         UserPromptSubmit, only for a waker's doorbell: the mail as context of the
                          turn the doorbell started
    claude-waker          SessionStart and Stop, `asyncRewake`: the session's one waker. It waits on the source's
                          wake (MailSource.wake: the long-poll, or XREAD BLOCK on a Redis stream) for new
                          mail and, when there is some, exits 2 with a short doorbell (which
                          wakes the idle session). It acknowledges nothing: the mail itself is handed
                          over by the prompt hook of the turn it starts, or by the next Stop hook, so
                          a wake that never lands loses nothing.
                          Where the session has an inbox socket (Claude Code 2.1.224+), the waker is
                          also the session's pusher (kijito_pull.harnesses.claude.push): mail the
                          project's interrupt policy lets through is pushed into the session as it
                          arrives, busy or idle, and confirmed from the transcript; the rest still
                          rings the doorbell (which a busy session answers after its turn).
    claude-pusher         SessionStart, `async`, headless runs (`claude -p`) only, and only where the
                          session has an inbox socket: the same process without a doorbell (a headless
                          wake would be dropped); what it does not push, the Stop hook hands over.
    claude-session-end    SessionEnd (answered in the gate, kijito_pull.harnesses.claude.gate): ends
                          the session's waker.

"Took it" for a hook is "its JSON was written to stdout and flushed": the cursor is acknowledged
only then. Every failure becomes one stderr line and exit 0, so a broken inbox never wedges or
breaks a Claude Code session, and each synchronous hook gives up after a fixed budget (default 8 s)
whatever the network does.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from kijito_pull.core import config, process, render
from kijito_pull.core.environment import Environment
from kijito_pull.core.models import ApiError, Message
from kijito_pull.core.state import LockTimeout, StateError
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.base import INTERACTIVE
from kijito_pull.harnesses.claude import host as claude_host
from kijito_pull.harnesses.claude import inbox_socket
from kijito_pull.harnesses.claude.gate import DOORBELL, PROMPT, PUSHER, WAKER
from kijito_pull.harnesses.claude.push import Pusher
from kijito_pull.harnesses.handover import (  # noqa: F401 - BUDGET_ENV...HOOK_TIMEOUT: read by tests and benches
    BUDGET_ENV,
    DEFAULT_BUDGET,
    HOOK_DEADLINE,
    HOOK_TIMEOUT,
    MAX_BLOCKS_ENV,
    HookSink,
    Output,
    Setup,
    context_json,
    failure_text,
    report_problems,
    setup,
)
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.session import lifecycle
from kijito_pull.harnesses.session.optin import INTERRUPT_ALL, during_a_turn

PUSH_READER = "push-transcript"  # the pusher's own transcript reader (offset), apart from the hooks'
WAKER_WAIT = 25  # long-poll hold asked of notify/pending
WAKER_POLL = 15.0  # seconds between polls when the server does not long-poll
WAKER_GRACE = 3.0  # at most this long, let the synchronous hook of the same event hand over what waits
WAKER_CHECK = 0.5  # how often the waker looks for its session, lease and stop marker
WAKER_RESYNC = 8  # read the inbox after this many quiet long-polls even if no count moved
WAKER_MAX_LIFE = 7 * 24 * 3600 - 600  # under the hooks.json timeout (604800 s)
VOUCH_MARGIN = 5.0  # a "nothing new" note outlives the long-poll hold in flight by this much


# -- the hooks --------------------------------------------------------------------------------------------


def sync_key(data: Mapping[str, Any]) -> str:
    """Names one hook event, the same for every hook it runs (the waker and its synchronous sibling)."""
    return "|".join(str(data.get(k) or "") for k in ("hook_event_name", "source", "prompt_id"))


def _synced(inp: HookInput, env: Environment) -> Callable[[], None]:
    """After SessionStart or Stop: note that this hook event ran (its waker sibling reads it)."""

    def note() -> None:
        if inp.session_id:
            try:
                lifecycle.write_synced(env.environ, inp.session_id, sync_key(inp.data))
            except lifecycle.LifecycleError:
                pass

    return note


# -- the hooks' handlers (each named by its Hook in kijito_pull.harnesses.claude.HARNESS) ---------------------


def on_session_start(inp: HookInput, env: Environment) -> int:
    """claude-session-start: waiting mail as the session's context."""
    return handover.answer(inp, env, session_start, after=_synced(inp, env))


def on_stop(inp: HookInput, env: Environment) -> int:
    """claude-stop: unseen mail blocks the stop (bounded, handover.stop)."""
    return handover.answer(inp, env, handover.stop, after=_synced(inp, env))


def on_prompt(inp: HookInput, env: Environment) -> int:
    """claude-prompt: the mail a doorbell announced, handed to the turn it started."""
    return handover.answer(inp, env, prompt)


def waker_sentence(inp: HookInput, environ: Mapping[str, str]) -> str | None:
    """What an interactive session's context says about being woken (None: nothing to say)."""
    persona = inp.persona
    choice, _why = claude_host.waker_choice(environ)
    if choice == claude_host.OFF:
        return None
    try:
        marker = lifecycle.stop_marker(environ, inp.project, persona)
    except lifecycle.LifecycleError:
        marker = None
    if marker is not None:
        since = f" since {marker['since']}" if marker.get("since") else ""
        return (f"The kijito-pull waker is stopped for this project and persona{since}, so new mail does not "
                f"wake this session; it is handed over when a turn ends (`kijito-pull session start` turns "
                f"the waker back on).")
    if choice == claude_host.MONITOR:
        command = f"kijito-pull watch --persona {shlex.quote(persona)}"
        return (f"This Claude Code cannot run kijito-pull's waker hook, so new mail does not wake this session "
                f"by itself; it is handed over when a turn ends. The Monitor tool can watch the inbox: "
                f"Monitor({{command: {json.dumps(command)}, description: {json.dumps('Kijito inbox for ' + persona)}, "
                f"persistent: true}})")
    if inbox_socket.from_environ(environ)[0] is not None:
        return (f"New mail for {persona} reaches this session by itself as it arrives: kijito-pull pushes it "
                f"through Claude Code's session inbox (between tool calls when busy, as a new turn when idle)"
                f"{_policy_clause(inp)}.")
    return (f"New mail for {persona} wakes this session by itself: kijito-pull's waker rings when it arrives "
            f"and the mail is handed over in that turn.")


def _policy_clause(inp: HookInput) -> str:
    clause = during_a_turn(getattr(inp.optin, "interrupt", INTERRUPT_ALL))
    return f"; {clause}" if clause else ""


def session_start(inp: HookInput, env: Environment, out: Output) -> int:
    """The shared session start, telling an interactive session how new mail will wake it."""
    sentence = waker_sentence(inp, env.environ) if inp.mode == INTERACTIVE else None
    return handover.session_start(inp, env, out, extra=[sentence] if sentence else ())


def prompt(inp: HookInput, env: Environment, out: Output) -> int:
    """A doorbell turn: hand the mail it announced to this turn."""
    persona = inp.persona

    def emit(text: str) -> bool:
        return out.json(context_json("UserPromptSubmit", text))

    sink = HookSink(emit)
    try:
        report = handover.pull(inp, env, sink)
    except config.ConfigError as exc:
        say(env.stderr, f"{PROMPT}: {persona}: {failure_text(exc)}")
        return 0
    except (ApiError, StateError) as exc:
        if handover.written_before_failure(inp, env, out, exc):
            return 0
        say(env.stderr, f"{PROMPT}: {persona}: {failure_text(exc)}; the mail is handed over when the turn ends")
        emit(f"Kijito inbox for {render.sanitize(persona)}: the new mail could not be fetched just now "
             f"({failure_text(exc)}); it is handed over when this turn ends.")
        return 0
    report_problems(inp, env, report)
    if not report.delivered and report.refused is None:
        emit(render.for_model(persona, [], extra_notes=[
            *sink.notes, "The mail the doorbell announced was already handed over earlier in this session."]))
    return 0


# -- the waker ------------------------------------------------------------------------------------------------


def doorbell_text(persona: str, messages: Sequence[Message]) -> str:
    ids = [m.id for m in messages]
    noun = "message" if len(ids) == 1 else "messages"
    listed = ", ".join(str(i) for i in ids) if len(ids) <= 5 else f"{ids[0]} to {ids[-1]}"
    who = " ".join(render.sanitize(persona).split())[:128]
    return (f"New Kijito mail for {who}: {len(ids)} unseen {noun} (id{'s' if len(ids) != 1 else ''} {listed}). "
            f"{DOORBELL} kijito-pull hands the mail to this turn as context; if it is not there, "
            f"`kijito-pull --once --persona {shlex.quote(who)}` prints it.")


class Waker:
    """The session's one waker: waits for unseen mail, then rings (writes the doorbell, exits)."""

    def __init__(self, ready: Setup, environ: Mapping[str, str], *,
                 session_id: str, project: str, persona: str, me: lifecycle.Proc, host: lifecycle.Proc | None,
                 ring_stream: IO[str], ring_code: int, errors: IO[str], sync_key: str | None = None,
                 grace: float = WAKER_GRACE, wait: int = WAKER_WAIT, poll: float = WAKER_POLL,
                 check_every: float = WAKER_CHECK, max_life: float = WAKER_MAX_LIFE,
                 exit_fn: Callable[[int], None] = os._exit, pusher: Pusher | None = None, can_ring: bool = True):
        self.ready = ready
        self.engine = ready.engine
        self.environ = environ
        self.session_id = session_id
        self.project = project
        self.persona = persona
        self.me = me
        self.host = host
        self.ring_stream = ring_stream
        self.ring_code = ring_code
        self.errors = errors
        self.sync_key = sync_key
        self.grace = grace
        self.wait = wait
        self.poll = poll
        self.check_every = check_every
        self.deadline = time.monotonic() + max_life
        self._exit = exit_fn
        self._quitting = threading.Lock()
        self._stop = threading.Event()
        self.initial_ppid = os.getppid()
        self.started = time.time()
        self.pusher = pusher  # pushes through the session inbox socket (None: the doorbell only)
        self.can_ring = can_ring  # False in a headless run: no doorbell, the Stop hook hands the rest over
        self._push_off_recorded = False  # the session's push mode record says the pusher gave up
        self._vouch: list[Any] | None = None  # the cursor files' stamp after a clear peek (lean hooks)
        self._vouch_files: list[str] = []
        self.wake: Any = None  # the source's wake (MailSource.wake), made by `_loop` before its first look

    # -- ending -------------------------------------------------------------------------------------
    def quit(self, code: int, why: str | None = None) -> None:
        """Leave now (from the watchdog thread or a signal handler): give the lease back, exit."""
        if not self._quitting.acquire(blocking=False):
            return
        # Release before waking the main thread: once it returns, the interpreter exits and this
        # (daemon) thread with it, which would leave a lease naming a dead process behind.
        lifecycle.clear_current(self.environ, self.session_id)
        lifecycle.release(self.environ, self.session_id, self.me)
        self._stop.set()
        self._exit(code)

    def should_end(self) -> str | None:
        if os.getppid() != self.initial_ppid:
            return "the process that started the waker is gone"
        if self.host is not None and not lifecycle.alive(self.host.pid, self.host.start):
            return "the Claude Code process is gone"
        if not lifecycle.holds(self.environ, self.session_id, self.me):
            return "the lease was taken back (session ended or stopped)"
        if lifecycle.stop_marker(self.environ, self.project, self.persona) is not None:
            return "stopped by `kijito-pull session stop`"
        if time.monotonic() > self.deadline:
            return "the waker reached its maximum lifetime"
        return None

    def _watch(self) -> None:
        while not self._stop.wait(self.check_every):
            try:
                why = self.should_end()
            except Exception:  # noqa: BLE001 - a broken check must not leave the waker running blind
                why = "the session checks failed"
            if why:
                self.quit(0, why)
                return

    # -- work ---------------------------------------------------------------------------------------
    def peek(self) -> list[Message]:
        """Unseen mail now, read under the source's exclusion so a hook delivering right now is waited for
        (MailSource.look). Also notes whether the waker may vouch that nothing is new (`_vouch`: the
        cursor files' stamp, or None; a source without files never vouches)."""
        look = self.engine.look(vouch=lifecycle.files_stamp)
        self._vouch, self._vouch_files = look.vouched, look.files
        return look.pending

    def _vouch_now(self, seconds: float) -> None:
        """Write (or renew) the session's "nothing new" note for lean hooks; only after a clear peek whose
        files have not changed since, and with no push awaiting its confirmation."""
        stamp = self._vouch
        if stamp is None or (self.pusher is not None and self.pusher.waiting):
            return
        if lifecycle.files_stamp(self._vouch_files) != stamp:
            self._vouch = None
            lifecycle.clear_current(self.environ, self.session_id)
            return
        lifecycle.write_current(self.environ, self.session_id, me=self.me, persona=self.persona,
                                files=self._vouch_files, stamp=stamp, until=time.time() + seconds)

    def _doubt(self) -> None:
        """Something may be new (news from the server, an error, a push): hooks must pull again."""
        self._vouch = None
        lifecycle.clear_current(self.environ, self.session_id)

    def ring(self, pending: list[Message]) -> int:
        self._doubt()
        text = doorbell_text(self.persona, pending)
        try:
            lifecycle.write_rung(self.environ, self.session_id, max(m.id for m in pending))
        except lifecycle.LifecycleError as exc:
            say(self.errors, f"{WAKER}: cannot record the doorbell: {exc}")
        if not self._quitting.acquire(blocking=False):
            return 0  # being ended right now: do not ring into a session that is going away
        self._stop.set()
        try:
            self.ring_stream.write(text + "\n")
            self.ring_stream.flush()
        except (OSError, ValueError):
            pass
        lifecycle.release(self.environ, self.session_id, self.me)
        return self.ring_code

    def run_with_signals(self) -> int:
        """`run` with SIGTERM/SIGINT/SIGHUP ending the waker cleanly (lease released, exit 0)."""
        saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):
                if sig is not None:
                    saved[sig] = signal.signal(sig, lambda *_: self.quit(0, "signalled"))
        try:
            return self.run()
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)

    def run(self) -> int:
        threading.Thread(target=self._watch, name="kijito-waker-watch", daemon=True).start()
        try:
            return self._loop()
        finally:
            self._stop.set()
            lifecycle.clear_current(self.environ, self.session_id)
            if self.pusher is not None:
                self.pusher.finish()
            if self._quitting.acquire(blocking=False):
                lifecycle.release(self.environ, self.session_id, self.me)
            if self.wake is not None:
                self.wake.close()
            self.ready.close()

    def _sleep(self, seconds: float) -> bool:
        """Sleep; False when the waker is being ended."""
        return not self._stop.wait(max(0.0, seconds))

    def _settle(self) -> bool:
        """Wait (at most `grace`) for the synchronous hook of the same event to finish its pull, so
        the waker does not ring for mail that hook is handing over right now. False: being ended."""
        if not self.sync_key:
            return not self._stop.is_set()
        deadline = time.monotonic() + self.grace
        not_before = self.started - 5.0  # the same event: its hooks are started together
        while time.monotonic() < deadline:
            try:
                synced = lifecycle.read_synced(self.environ, self.session_id)
            except lifecycle.LifecycleError:
                synced = None
            if synced is not None and synced[0] == self.sync_key and synced[1] >= not_before:
                return not self._stop.is_set()
            if not self._sleep(0.05):
                return False
        return not self._stop.is_set()

    def _loop(self) -> int:
        if not self._settle():
            return 0
        try:
            rung = lifecycle.read_rung(self.environ, self.session_id)
        except lifecycle.LifecycleError:
            rung = -1  # below every id (Kijito's first is 0)
        # Made before the first look, so nothing that arrives after it is missed (Kijito: its own long-poll
        # connection, primed with the server's cursor; Redis: XREAD BLOCK after the newest entry now).
        self.wake = self.engine.wake(self.wait, self.poll)
        due = True
        failures = 0
        quiet = 0
        while not self._stop.is_set():
            if self.pusher is not None:
                due = self._check_pushes() or due
                if self.pusher is None and not self.can_ring:
                    return 0  # a headless run without the socket: the Stop hook hands everything over
            if due:
                try:
                    pending = self.peek()
                    if self.pusher is not None:
                        self.pusher.urgent.found(self.persona, pending)  # the mail an urgent rise announced
                    if self.pusher is not None and any(self.pusher.wanted(m) for m in pending):
                        self._doubt()
                        self.pusher.push()
                        pending = [m for m in pending if not self.pusher.wanted(m)]
                except LockTimeout:
                    if not self._sleep(0.2):
                        return 0
                    continue
                except (ApiError, StateError) as exc:
                    failures += 1
                    pause = min(30.0, 2.0 ** min(failures, 5) / 2)
                    say(self.errors, f"{self.name}: {self.persona}: {failure_text(exc)}; retrying in {pause:g} s")
                    if not self._sleep(pause):
                        return 0
                    continue
                failures = 0
                due = False
                self._vouch_now(self.wait + VOUCH_MARGIN)
                if self.pusher is not None and self.pusher.refused is not None:
                    continue  # _check_pushes falls back at the top of the loop
                if self.can_ring and pending and max(m.id for m in pending) > rung:
                    if self.pusher is None or not self.pusher.waiting:
                        return self.ring(pending)
                    due = True  # ring once the pushes in flight are settled (leaving now would orphan them)
            # The source's wake (MailSource.wake): Kijito's long-poll, or XREAD BLOCK on a Redis stream.
            woke = self.wake.wait(brief=self.pusher is not None and self.pusher.waiting)
            if woke.failed is not None:
                self._doubt()
                due = True
            else:
                if self.pusher is not None:
                    self.pusher.urgent.arrived(self.persona, woke.urgent)
                quiet += 1
                if woke.news or quiet >= WAKER_RESYNC:
                    due, quiet = True, 0
                    self._doubt()
                else:
                    self._vouch_now(woke.covered + VOUCH_MARGIN)
                    due = due or self._vouch is None  # the cursor changed (a hook handed over): look again
            pause = woke.pause
            if not self._sleep(pause):
                return 0
        return 0


    @property
    def name(self) -> str:
        return WAKER if self.can_ring else PUSHER

    def _check_pushes(self) -> bool:
        """Settle pushes from the transcript; when the socket stopped working, fall back (the doorbell in
        an interactive session; nothing in a headless run, whose Stop hook then hands the mail over).
        True when unseen mail should be looked at again now. The session's push mode record
        (lifecycle.write_push_mode, read by `kijito-pull doctor`) says, with the reason, that pushing
        stopped as soon as the pusher gives up, even while what it pushed before is still confirmed."""
        pusher = self.pusher
        assert pusher is not None
        try:
            pusher.check()
        except (ApiError, StateError, LockTimeout) as exc:
            say(self.errors, f"{self.name}: cannot settle pushed mail yet ({failure_text(exc)})")
        if pusher.refused is None:
            return False
        if not self._push_off_recorded:
            self._push_off_recorded = True
            lifecycle.write_push_mode(self.environ, self.session_id, False,
                                      f"pushing stopped for this session: {pusher.refused}")
        if pusher.waiting:
            return False  # what Claude Code queued is still confirmed before the pusher goes
        say(self.errors, f"{self.name}: session {self.session_id}: not pushing any more: {pusher.refused}")
        self.pusher = None
        return True


def _pusher_for(inp: HookInput, ready: Setup, environ: Mapping[str, str], errors: IO[str],
                me: lifecycle.Proc) -> tuple[Pusher | None, str]:
    """The session's pusher, when it has an inbox socket that accepts connections and a transcript."""
    from kijito_pull.core.paths import Paths
    from kijito_pull.harnesses.transcript import Transcript, transcript_of

    sock, why = inbox_socket.from_environ(environ)
    if sock is None or inp.session_id is None:
        return None, why
    paths = Paths(environ)
    found = transcript_of(inp.data, paths, inp.session_id)
    if found is None:
        return None, "the hook input names no transcript, so a push could not be confirmed"
    transcript = Transcript(paths, inp.session_id, found.path, reader=PUSH_READER)
    return Pusher(ready.engine, sock, transcript, persona=inp.persona, session_id=inp.session_id,
                  policy=inp.optin.interrupt, pid=me.pid, pid_start=me.start, errors=errors,
                  mark_handed=lambda: handover.mark_handed(transcript.handed_marker)), why


def run_pusher(inp: HookInput, env: Environment) -> int:
    """claude-pusher (a headless run with an inbox socket): the session's one process that pushes new mail
    into it; no doorbell. Where the environment names no socket it leaves at once; where the socket does
    not accept connections it records why (`kijito-pull doctor`) and leaves. The Stop hook does the rest."""
    sid = inp.session_id
    if sid is None:
        return 0
    # Only what the environment says: arm's _pusher_for connects to the socket (once) to see that it
    # accepts connections, and records why not for `kijito-pull doctor` when it does not.
    sock, _why = inbox_socket.from_environ(env.environ, probe=False)
    if sock is None:
        return 0
    outcome, waker = arm(inp.project, inp.persona, sid, env.environ, env.stderr, host=lifecycle.host_process(),
                         source=str(inp.data.get("source") or inp.data.get("hook_event_name") or ""),
                         options={"sync_key": sync_key(inp.data), "can_ring": False}, push_input=inp)
    if waker is None:
        if outcome.result is not lifecycle.Result.ALREADY_ARMED:
            say(env.stderr, f"{PUSHER}: {outcome.line()}")
        return 0
    if waker.pusher is None:
        waker.ready.close()
        lifecycle.release(env.environ, sid, waker.me)
        return 0
    return waker.run_with_signals()


def run_waker(inp: HookInput, env: Environment) -> int:
    """claude-waker: arm this session's one waker and wait; exit 2 with the doorbell when mail comes."""
    environ = env.environ
    sid = inp.session_id
    if sid is None:  # fastpath already said so; reachable only from in-process callers
        return 0
    choice, why = claude_host.waker_choice(environ)
    if choice != claude_host.REWAKE:
        say(env.stderr, f"{WAKER}: session {sid}: {lifecycle.Result.UNSUPPORTED.value} ({why})")
        return 0
    outcome, waker = arm(inp.project, inp.persona, sid, environ, env.stderr, host=lifecycle.host_process(),
                         source=str(inp.data.get("source") or inp.data.get("hook_event_name") or ""),
                         options={"sync_key": sync_key(inp.data)}, push_input=inp)
    if waker is None:
        if outcome.result is not lifecycle.Result.ALREADY_ARMED:
            say(env.stderr, f"{WAKER}: {outcome.line()}")
        return 0
    return waker.run_with_signals()


def arm(project: str, persona: str, session_id: str, environ: Mapping[str, str], errors: IO[str], *,
        host: lifecycle.Proc | None, source: str | None = None, ring_stream: IO[str] | None = None,
        ring_code: int = 2, options: dict[str, Any] | None = None,
        push_input: HookInput | None = None) -> tuple[lifecycle.Outcome, Waker | None]:
    """Take the session's lease and build its waker; or say, typed, why there is none. With `push_input`
    (the hook's input), the waker also pushes through the session's inbox socket when it has one."""
    Result = lifecycle.Result
    try:
        if lifecycle.stop_marker(environ, project, persona) is not None:
            return lifecycle.Outcome(Result.STOPPED, session_id, "a stop marker is set for this project and "
                                     "persona; `kijito-pull session start` removes it"), None
    except lifecycle.LifecycleError as exc:
        return lifecycle.Outcome(Result.STARTUP_FAILED, session_id, str(exc)), None
    try:
        ready = setup(persona, environ, timeout=5.0, attempts=1, deadline=5.0)
    except config.ConfigError as exc:
        return lifecycle.Outcome(Result.STARTUP_FAILED, session_id, failure_text(exc)), None
    me = process.me()
    try:
        outcome = lifecycle.acquire(environ, session_id, project=project, persona=persona, me=me, host=host,
                                    source=source)
    except lifecycle.LifecycleError as exc:
        ready.close()
        return lifecycle.Outcome(Result.STARTUP_FAILED, session_id, str(exc)), None
    if outcome.result is not Result.ARMED:
        ready.close()
        return outcome, None
    pusher = None
    if push_input is not None:
        pusher, why = _pusher_for(push_input, ready, environ, errors, me)
        lifecycle.write_push_mode(environ, session_id, pusher is not None, why)
    waker = Waker(ready, environ, session_id=session_id, project=lifecycle.project_key(project),
                  persona=persona, me=me, host=host, ring_stream=ring_stream if ring_stream is not None else errors,
                  ring_code=ring_code, errors=errors, pusher=pusher, **(options or {}))
    return outcome, waker
