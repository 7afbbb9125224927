"""The one watcher behind every push route: a detached process per session that long-polls the inbox and
pushes new mail into the session through the harness's own way in, one batch at a time.

A harness with a way to hand a running session a message from outside (Codex's `codex queue`, OpenCode's
`prompt_async`, Copilot CLI's extension socket) brings two things: `PushWatcher.push(text, shown)`, its way
in, and the `Confirmation` that reads its record (a rollout, a server's messages, an events.jsonl). The rest
is here, once:

- `arm(...)`: a hook of the session, after its answer is written, starts `kijito-pull hook <name>`
  detached (`spawn`: its own session, stdin the hook input, stderr a 0600 log, the host process handed over
  in an environment variable), unless the session has a watcher already or the project and persona were
  stopped (`kijito-pull session stop`);
- `serve(...)`: that process takes the session's lease (session/lifecycle: one per session, never two) and
  runs the watcher until the session's host process is gone, the lease is taken back (SessionEnd,
  `kijito-pull session stop`), a stop marker appears, or its maximum lifetime;
- `PushWatcher.run()`: the source's wake (MailSource.wake: Kijito's long-poll, or XREAD BLOCK on a Redis
  stream; core/wake.py's WakeThread) and, when the persona has unseen mail, one
  budgeted batch (core.render.hand_over, with its `kijito-ref:` markers) through core.delivery.pull_through,
  recorded first as a pending hand-over of the watcher's own holder, so the session's hooks leave it alone
  while it is on its way. The batch is confirmed from the record, and only then does the cursor move and
  the next batch go out (`HELD_WAITS`). A way in that refused releases the batch at once; one that never
  delivers is claimed back at its deadline or when the host is gone, and the hooks hand it over instead.
  A watcher's first look waits on nothing (`HELD_AGAIN`): what an earlier watcher of the session held and
  the record does not show is pushed again, since that watcher may have died (kill -9) after recording the
  batch as pending and before pushing it, and would otherwise hold the session's mail until the deadline
  (a push it did make and the session has not yet recorded then comes twice: one repeat for that death);
- each hand-over marks the session as handed to (its `handed` marker), so the session's SessionEnd settles
  the watcher's holder too, whether or not a hook of the session handed mail over.

Every log line starts with the watcher's `name` (`codex-watch`, `opencode-watch`, `copilot-watch`).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from kijito_pull.core import process, urgency
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.errors import KijitoPullError
from kijito_pull.core.models import ApiError, Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import HELD_AGAIN, HELD_WAITS, BatchSink
from kijito_pull.core.source import Confirmation
from kijito_pull.core.state import LockTimeout, StateError
from kijito_pull.core.wake import WakeThread
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.session import lifecycle

PUSH_TTL = 2 * 3600.0  # a pushed hand-over may wait behind a long turn; claimed back after this
CHECK = 0.5  # how often the watcher looks at its session, lease and record
WAIT = 25  # long-poll hold asked of notify/pending
POLL = 15.0  # seconds between polls when the server does not long-poll
RESYNC = 8  # read the inbox after this many quiet long-polls even if no count moved
MAX_LIFE = 30 * 24 * 3600.0


def host_token(host: process.Proc | None) -> str:
    return f"{host.pid}:{host.start or ''}" if host is not None else ""


def parse_host(raw: str | None) -> process.Proc | None:
    if not raw:
        return None
    pid, _, start = raw.partition(":")
    return process.Proc(int(pid), start or None) if pid.isdigit() and int(pid) > 1 else None


class PushError(KijitoPullError):
    """The way in refused a batch (the mail is unseen again)."""


class _PushSink(BatchSink):
    """One pushed batch: nothing more goes out while one is in flight (HELD_WAITS), so the record confirms
    one hand-over at a time; at the watcher's first look, what it holds from before goes again (HELD_AGAIN,
    module docstring)."""

    def __init__(self, watcher: PushWatcher):
        super().__init__()
        self.watcher = watcher
        self.held = HELD_AGAIN if watcher.fresh else HELD_WAITS
        self.problem: str | None = None

    def before_hand_over(self, shown: Sequence[Message]) -> None:
        handover.mark_handed(lifecycle.handed_marker(self.watcher.environ, self.watcher.sid))

    def select(self, pending: Sequence[Message]) -> list[Message]:
        watcher = self.watcher
        watcher.urgent.found(watcher.persona, pending)
        chosen = watcher.select(pending)
        note = watcher.urgent.note(watcher.persona, chosen)
        if note:
            self.notes.append(note)
        return chosen

    def write(self, text: str, shown: Sequence[Message]) -> bool:
        self.problem = self.watcher.push(text, shown)
        return self.problem is None


class PushWatcher:
    """One session's watcher: long-polls the inbox and pushes new mail through `push`, pending with its own
    holder until `confirm` (the harness's record) shows it (module docstring). A harness subclasses it with
    its way in (`push`) and, when not all mail goes at once, `select`."""

    name = "watch"  # the log prefix: the hook that runs it
    verb = "pushed"  # what the log says happened to a batch
    host_title = "host"  # what the host process is called in the log ("Codex", "OpenCode", "Copilot CLI")

    def __init__(self, inp: HookInput, environ: Mapping[str, str], errors: IO[str], *, holder_key: str,
                 me: lifecycle.Proc, host: lifecycle.Proc | None, ready: handover.Setup, confirm: Confirmation,
                 check: float = CHECK, wait: int = WAIT, poll: float = POLL, ttl: float = PUSH_TTL):
        assert inp.session_id is not None
        self.sid = inp.session_id
        self.persona = inp.persona
        self.inp = inp
        self.project = lifecycle.project_key(inp.project)
        self.environ = environ
        self.errors = errors
        self.me = me
        self.host = host
        self.ready = ready
        self.engine = ready.engine
        self.confirm = confirm
        self.check = check
        self.holder = Holder(holder_key, host.pid if host else None, host.start if host else None, ttl=ttl)
        self.wait, self.poll = wait, poll
        self.stop = threading.Event()
        self.deadline = time.monotonic() + MAX_LIFE
        self.in_flight = False
        self.fresh = True  # no look done yet: what the holder holds may never have been pushed
        self.failures = 0
        #: urgent mail the wake's counts announced (Kijito rows carry no flag): `marked` tells a harness
        #: whose way in can interrupt a turn which unseen messages it may send that way (core/urgency.py)
        self.urgent = urgency.Arrivals()

    # -- what a harness brings ------------------------------------------------------------------------------
    def push(self, text: str, shown: Sequence[Message]) -> str | None:
        """Hand `text` (the hand-over of `shown`) to the session: None when it was accepted, else why not."""
        raise NotImplementedError

    def select(self, pending: Sequence[Message]) -> list[Message]:
        """Which of the unseen mail this push may carry (all of it, unless the harness says otherwise)."""
        return list(pending)

    # -- ending ---------------------------------------------------------------------------------------
    def should_end(self) -> str | None:
        if self.stop.is_set():
            return "signalled"
        if self.host is not None and not lifecycle.alive(self.host.pid, self.host.start):
            return f"the session's {self.host_title} process is gone"
        if not lifecycle.holds(self.environ, self.sid, self.me):
            return "the lease was taken back (the session ended or was stopped)"
        if lifecycle.stop_marker(self.environ, self.project, self.persona) is not None:
            return "stopped by `kijito-pull session stop`"
        if time.monotonic() > self.deadline:
            return "the watcher reached its maximum lifetime"
        return None

    # -- one look ---------------------------------------------------------------------------------------
    def look(self) -> bool:
        """Confirm what the session took; push the next batch when nothing is in flight (the hand-over loop,
        core/delivery.py, with this watcher's holder and the record as the confirmation). True: mail was
        pushed. Raises PushError when the way in refused (the mail is unseen again)."""
        sink = _PushSink(self)
        report = pull_through(self.engine, self.engine.factory, sink, holder=self.holder, confirm=self.confirm)
        self.fresh = False
        self.in_flight = bool(report.held)
        if sink.problem is not None:
            raise PushError(sink.problem)
        if report.delivered:
            say(self.errors, f"{self.name}: session {self.sid}: {self.verb} {len(report.delivered)} message(s) "
                             f"for {self.persona}")
        return bool(report.delivered)

    # -- the loop ----------------------------------------------------------------------------------------
    def run(self) -> int:
        events: queue.Queue = queue.Queue()
        # The source's wake (MailSource.wake: Kijito's long-poll, or XREAD BLOCK on a Redis stream), made
        # before the first look so nothing that arrives after it is missed.
        wake = self.engine.wake(self.wait, self.poll)
        WakeThread(wake, events, self.stop).start()
        due, quiet = True, 0
        try:
            while True:
                why = self.should_end()
                if why:
                    say(self.errors, f"{self.name}: session {self.sid}: ending: {why}")
                    return 0
                if due or self.in_flight:
                    try:
                        self.look()
                        due, self.failures = False, 0
                    except LockTimeout:
                        pass  # a hook is pulling right now: look again at the next tick
                    except (ApiError, StateError, PushError) as exc:
                        self.failures += 1
                        pause = min(60.0, 2.0 ** min(self.failures, 6) / 2)
                        say(self.errors, f"{self.name}: session {self.sid}: {exc}; trying again in {pause:g} s")
                        if self.stop.wait(pause):
                            return 0
                try:
                    item = events.get(timeout=self.check)
                except queue.Empty:
                    continue
                quiet += 1
                self.urgent.arrived(self.persona, item.urgent)
                if item.news or quiet >= RESYNC:
                    due, quiet = True, 0
        finally:
            self.stop.set()
            lifecycle.release(self.environ, self.sid, self.me)
            wake.close()
            self.ready.close()


def serve(inp: HookInput, env: Any, *, name: str, source: str, host: process.Proc | None, route: str,
          build: Callable[[process.Proc, handover.Setup], PushWatcher]) -> int:
    """`kijito-pull hook <name>`: take the session's lease and run the watcher `build(me, ready)` makes.
    `route` names the way in for the log. Every failure is one log line and exit 0."""
    environ, errors = env.environ, env.stderr
    sid = inp.session_id
    assert sid is not None
    ready = handover.setup(inp.persona, environ, timeout=5.0, attempts=1, deadline=5.0)
    me = process.me()
    try:
        outcome = lifecycle.acquire(environ, sid, project=inp.project, persona=inp.persona, me=me, host=host,
                                    source=source, one_per_host=False)  # a host may run many sessions
    except lifecycle.LifecycleError as exc:
        ready.close()
        say(errors, f"{name}: session {sid}: {lifecycle.Result.STARTUP_FAILED.value} ({exc})")
        return 0
    if outcome.result is not lifecycle.Result.ARMED:
        ready.close()
        say(errors, f"{name}: {outcome.line()}")
        return 0
    say(errors, f"{name}: {outcome.line()}; {route}")
    watcher = build(me, ready)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: watcher.stop.set())
    return watcher.run()


def may_arm(inp: HookInput, environ: Mapping[str, str]) -> bool:
    """May this session get a watcher: it has an id and its project and persona were not stopped."""
    if inp.session_id is None:
        return False
    try:
        return lifecycle.stop_marker(environ, lifecycle.project_key(inp.project), inp.persona) is None
    except lifecycle.LifecycleError:
        return False


def arm(inp: HookInput, env: Any, *, name: str, host_env: str, host: process.Proc | None, later: str) -> None:
    """After a hook's answer is written: start the session's watcher (`kijito-pull hook <name>`), unless it
    has one or was stopped. `later` says how new mail comes when the watcher cannot start."""
    sid = inp.session_id
    if sid is None or not may_arm(inp, env.environ):
        return
    try:
        if lifecycle.live_lease(env.environ, sid) is not None:
            return  # resumed or re-started: its watcher runs already
        log = lifecycle.sessions_dir(env.environ) / f"{sid}.watch.log"
        pid = spawn(name, json.dumps(inp.data).encode(), env.environ, host_env, host, log)
    except (OSError, lifecycle.LifecycleError) as exc:
        say(env.stderr, f"{inp.hook}: session {sid}: {lifecycle.Result.STARTUP_FAILED.value}: the watcher could "
                        f"not be started ({exc}); {later}")
        return
    say(env.stderr, f"{inp.hook}: session {sid}: watcher started (pid {pid}); its log: {log}")


def spawn(name: str, raw_input: bytes, environ: Mapping[str, str], host_env: str, host: process.Proc | None,
          log: Path) -> int:
    """Start `kijito-pull hook <name>` detached from the hook (its own session, no pipe of the harness's
    held open), reading the same hook input, the host process in `$<host_env>`. Returns its pid; raises
    OSError."""
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    env = dict(environ)
    env[host_env] = host_token(host)
    try:
        child = subprocess.Popen([sys.executable, "-m", "kijito_pull", "hook", name], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=fd, env=env, start_new_session=True,
                                 close_fds=True)
    finally:
        os.close(fd)
    assert child.stdin is not None
    try:
        child.stdin.write(raw_input)
        child.stdin.close()
    except OSError:
        pass
    return child.pid
