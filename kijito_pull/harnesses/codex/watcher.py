"""The watcher of one interactive Codex session: new mail wakes the idle session through `codex queue`.

Codex has one way in from outside: `codex queue --thread <session id> --message TEXT` makes an idle
session take a new turn with TEXT as a user message (a busy one takes it as its next turn). The session
start hook arms one watcher per interactive session (codex.session.detect_mode) as a detached process
(`kijito-pull hook codex-watch`); the watcher

- holds the session's lease (session/lifecycle: one per session, never two), and ends when the session's
  host process is gone (the TUI, or the shared app-server daemon that runs the session's thread), when
  the lease is taken back (SessionEnd, `kijito-pull session stop`), or at a stop marker;
- waits on its source's wake (MailSource.wake: Kijito's long-poll, or XREAD BLOCK on a Redis stream;
  core/wake.py's WakeThread) and, when the persona has unseen mail, hands one
  budgeted batch (core.render.hand_over, with its `kijito-ref:` markers) to `codex queue`, recorded first
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
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from kijito_pull.core import process, render
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.models import ApiError, Message
from kijito_pull.core.paths import Paths
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import HELD_WAITS, BatchSink
from kijito_pull.core.state import LockTimeout, StateError
from kijito_pull.core.wake import WakeThread
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.codex import appserver
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.session import lifecycle
from kijito_pull.harnesses.transcript import Transcript

NAME = "codex-watch"
READER = "queue"  # the watcher's own rollout reader (offset), apart from the hooks'
QUEUE_TTL = 2 * 3600.0  # a queued hand-over may wait behind a long turn; claimed back after this
QUEUE_TIMEOUT = 20.0  # one `codex queue` call
CHECK = 0.5  # how often the watcher looks at its session, lease and rollout
WAIT = 25  # long-poll hold asked of notify/pending
POLL = 15.0  # seconds between polls when the server does not long-poll
RESYNC = 8  # read the inbox after this many quiet long-polls even if no count moved
MAX_LIFE = 30 * 24 * 3600.0


def queue_holder_key(session_id: str) -> str:
    return f"codex-queue:{session_id}"


class _QueueSink(BatchSink):
    """One queued turn (`codex queue --thread`): nothing more is queued while a turn is in flight
    (WAIT), so the rollout confirms one hand-over at a time."""

    held = HELD_WAITS

    def __init__(self, watcher: Watcher):
        super().__init__()
        self.watcher = watcher
        self.problem: str | None = None

    def write(self, text: str, shown: Sequence[Message]) -> bool:
        self.problem = self.watcher.queue(text)
        return self.problem is None


class Watcher:
    """An interactive Codex session's one watcher: long-polls the inbox and queues new mail as the
    session's next turn, pending with its own holder until the rollout shows it (module docstring)."""

    def __init__(self, inp: HookInput, environ: Mapping[str, str], errors: IO[str], *, codex: str,
                 me: lifecycle.Proc, host: lifecycle.Proc | None, ready: handover.Setup, transcript: Transcript,
                 check: float = CHECK, wait: int = WAIT, poll: float = POLL, ttl: float = QUEUE_TTL):
        assert inp.session_id is not None
        self.sid = inp.session_id
        self.persona = inp.persona
        self.project = lifecycle.project_key(inp.project)
        self.environ = environ
        self.errors = errors
        self.codex = codex
        self.me = me
        self.host = host
        self.ready = ready
        self.engine = ready.engine
        self.transcript = transcript
        self.check = check
        self.holder = Holder(queue_holder_key(self.sid), host.pid if host else None, host.start if host else None,
                             ttl=ttl)
        self.wait, self.poll = wait, poll
        self.stop = threading.Event()
        self.deadline = time.monotonic() + MAX_LIFE
        self.in_flight = False
        self.failures = 0

    # -- ending ---------------------------------------------------------------------------------------
    def should_end(self) -> str | None:
        if self.stop.is_set():
            return "signalled"
        if self.host is not None and not lifecycle.alive(self.host.pid, self.host.start):
            return "the session's Codex process is gone"
        if not lifecycle.holds(self.environ, self.sid, self.me):
            return "the lease was taken back (the session ended or was stopped)"
        if lifecycle.stop_marker(self.environ, self.project, self.persona) is not None:
            return "stopped by `kijito-pull session stop`"
        if time.monotonic() > self.deadline:
            return "the watcher reached its maximum lifetime"
        return None

    # -- one look ---------------------------------------------------------------------------------------
    def look(self) -> bool:
        """Confirm what Codex took; queue the next batch when nothing is in flight (the hand-over loop,
        core/delivery.py, with this watcher's holder and the rollout as the confirmation). True: mail
        was queued. Raises QueueError when `codex queue` failed (the mail is unseen again)."""
        sink = _QueueSink(self)
        report = pull_through(self.engine, self.engine.factory, sink, holder=self.holder, confirm=self.transcript)
        self.in_flight = bool(report.held)
        if sink.problem is not None:
            raise QueueError(sink.problem)
        if report.delivered:
            say(self.errors, f"{NAME}: session {self.sid}: queued {len(report.delivered)} message(s) for "
                             f"{self.persona}")
        return bool(report.delivered)

    def queue(self, text: str) -> str | None:
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
                    say(self.errors, f"{NAME}: session {self.sid}: ending: {why}")
                    return 0
                if due or self.in_flight:
                    try:
                        self.look()
                        due, self.failures = False, 0
                    except LockTimeout:
                        pass  # a hook is pulling right now: look again at the next tick
                    except (ApiError, StateError, QueueError) as exc:
                        self.failures += 1
                        pause = min(60.0, 2.0 ** min(self.failures, 6) / 2)
                        say(self.errors, f"{NAME}: session {self.sid}: {exc}; trying again in {pause:g} s")
                        if self.stop.wait(pause):
                            return 0
                try:
                    item = events.get(timeout=self.check)
                except queue.Empty:
                    continue
                quiet += 1
                if item.news or quiet >= RESYNC:
                    due, quiet = True, 0
        finally:
            self.stop.set()
            lifecycle.release(self.environ, self.sid, self.me)
            wake.close()
            self.ready.close()


class QueueError(Exception):
    pass


def run(inp: HookInput, env: Any) -> int:
    """`kijito-pull hook codex-watch` (started by codex-session-start, never by Codex): take the lease, watch."""
    from kijito_pull.harnesses.codex import session as codex_session

    environ, errors = env.environ, env.stderr
    sid = inp.session_id
    raw = inp.data.get("transcript_path")
    if sid is None or not isinstance(raw, str) or not os.path.isabs(raw):
        say(errors, f"{NAME}: no session id or rollout path in the input; not watching")
        return 0
    host = codex_session.parse_host(environ.get(codex_session.HOST_ENV))
    codex = codex_session.codex_command(environ, host)
    if codex is None:
        say(errors, f"{NAME}: session {sid}: no `codex` command found (PATH, ${codex_session.CODEX_ENV}); not watching")
        return 0
    ready = handover.setup(inp.persona, environ, timeout=5.0, attempts=1, deadline=5.0)
    me = process.me()
    try:
        outcome = lifecycle.acquire(environ, sid, project=inp.project, persona=inp.persona, me=me, host=host,
                                    source="codex", one_per_host=False)
    except lifecycle.LifecycleError as exc:
        ready.close()
        say(errors, f"{NAME}: session {sid}: {lifecycle.Result.STARTUP_FAILED.value} ({exc})")
        return 0
    if outcome.result is not lifecycle.Result.ARMED:
        ready.close()
        say(errors, f"{NAME}: {outcome.line()}")
        return 0
    say(errors, f"{NAME}: {outcome.line()}; {codex} queue --thread {sid}")
    watcher = Watcher(inp, environ, errors, codex=codex, me=me, host=host, ready=ready,
                      transcript=Transcript(Paths(environ), sid, raw, reader=READER))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: watcher.stop.set())
    return watcher.run()
