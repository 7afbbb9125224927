"""The watch loop of every mail source: woken by the source, fanned out to per-persona pulls only when needed.

Every delivery goes through the shared hand-over loop (`delivery.pull_through`), so the watch loop, the
hooks and `--once` keep one cursor contract. This module decides *when* to pull and what to announce.

What wakes it is the source's own: for Kijito, one account-wide `notify/pending` long-poll (the
`Notifier` thread, watch/longpoll.py), whose count answers are handled on that thread; for any other
source, the source's wake (core/source.py's `MailSource.wake`, one `Wake` over every watched persona:
XREAD BLOCK on their Redis streams) on a `WakeThread` posting to the loop's queue, and a sweep every
`--poll-seconds`. Idle, the main thread blocks on that queue until the next real deadline (a retry,
the sweep, a heartbeat, a rediscovery, an urgent alarm falling due) or a message (a wake, `PULL_NOW`,
`CLOSED`, the stop): there is no periodic tick.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from kijito_pull.core import urgency
from kijito_pull.core.api import KijitoClient
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.engine import Engine
from kijito_pull.core.events import EventFactory
from kijito_pull.core.longpoll import Counts, LongPoll, NotifyFailed
from kijito_pull.core.metrics import Metrics
from kijito_pull.core.models import ApiError
from kijito_pull.core.sink import CLOSED, PULL_NOW, Sink
from kijito_pull.core.source import Wake
from kijito_pull.core.state import LockTimeout, StateError
from kijito_pull.core.wake import WakeThread, Wakeup
from kijito_pull.watch import alarms, readers
from kijito_pull.watch.longpoll import Notifier

ACCOUNT = "*"  # the persona field of account-wide signals
RETRY_CAP = 30.0
PIN_RETRY = 30.0
STALE_RECHECK = 3.0  # a count rose but the inbox read showed nothing new (a lagging replica?): read once more


@dataclass
class WatchOptions:
    """The settings of one watch loop (the flags of `kijito-pull watch`; the relay sets its own)."""

    consumer: str = "agent"
    wait: int = 50
    poll_seconds: float = 60.0
    resync_every: int = 10
    rediscover_every: float = 600.0
    all_personas: bool = False
    alert_after: int = 3
    heartbeat: float | None = None
    stranded_alerts: bool = True
    urgent_alerts: bool = True
    urgent_after: float = 900.0
    content_chars: int | None = 220
    no_content: bool = False
    min_spacing: float = 0.5
    #: where every consumer's cursor files live: mail at or below one of them was delivered, so it is not
    #: stranded whatever the server's unread flags say (None: no such evidence is looked for)
    cursors_dir: Path | None = None


@dataclass(frozen=True)
class SourceWake:
    """A source other than Kijito's account-wide long-poll: `wake` (MailSource.wake, one over every watched
    persona) wakes the loop, which also sweeps every --poll-seconds (mail given back or claimed back wakes
    nobody). `kind` labels its failures in the metrics ("redis"); `fields` is what `armed` and `heartbeat`
    say of the source instead of an API base ({"redis": where}); `after_pull(persona, source)`, when given,
    runs after each good pull (the group metrics)."""

    wake: Wake
    kind: str
    fields: dict[str, Any]
    after_pull: Callable[[str, Any], None] | None = None


@dataclass
class Target:
    """One watched persona: its engine, what the counts last said, and its own health."""

    name: str
    engine: Engine
    health: alarms.Health
    explicit: bool = False  # named by the user (its mail has a consumer: us), not adopted from the account
    last_unread: int | None = None
    last_urgent: int | None = None
    skips: int = 0
    retry_at: float | None = None
    refusals: int = 0
    rechecked: bool = False  # the one re-read after a count rise that found nothing has been scheduled
    hidden: alarms.SetAlarm = field(default_factory=lambda: alarms.SetAlarm(
        "unread mail outside the newest window", "hidden_unread_inboxes"))


class Watcher:
    """The long-running loop behind `kijito-pull watch` and `relay`, for every mail source: arms every watched
    persona (its first pull and an `armed` event), then pulls a persona through the hand-over loop
    (core/delivery.py) only when the source says it may have news (Kijito: its unread count rose, or every
    `--resync-every` arrivals; another source: its wake), on a sweep (`PULL_NOW` from the sink; another
    source: every --poll-seconds too), or when a retry falls due. `make_engine(persona)` gives each
    persona's MailSource; `source_wake` None means Kijito (`client` and `notify_client` are its API clients).
    It knows no harness: only its sink."""

    def __init__(self, *, client: KijitoClient | None, notify_client: KijitoClient | None,
                 make_engine: Callable[[str], Engine], sink: Sink, factory: EventFactory,
                 options: WatchOptions, personas: Iterable[str], stop: threading.Event,
                 loop: queue.Queue | None = None, errors: IO[str] = sys.stderr,
                 clock: Callable[[], float] = time.monotonic, ops: Metrics | None = None,
                 source_wake: SourceWake | None = None):
        self.client = client
        self.notify_client = notify_client
        self.make_engine = make_engine
        self.sink = sink
        self.factory = factory
        self.opts = options
        self.stop = stop
        self.loop: queue.Queue = loop if loop is not None else queue.Queue()
        self.errors = errors
        self.clock = clock
        self.source_wake = source_wake
        self.next_sweep: float | None = None  # another source's: set once its wake runs
        self.ops = ops if ops is not None else Metrics("watch", "watch", float("inf"))  # core/metrics.py
        self.targets: dict[str, Target] = {}  # keyed by casefold: one target per inbox name, original case kept
        self.notify_health = alarms.Health(options.alert_after)
        self.stranded = alarms.SetAlarm("unread mail no persona will read (stranded)", "stranded_inboxes")
        self.urgent = alarms.SetAlarm("urgent mail unanswered", "urgent_inboxes")
        self.urgent_since: dict[str, float] = {}
        self.newest_unread: dict[str, tuple[int, int | None]] = {}  # persona -> (its unread count, newest unread id)
        self.last_counts: dict = {}
        self.directory: dict[str, int | None] = {}
        self.next_heartbeat = None if not options.heartbeat else clock() + options.heartbeat
        self.next_rediscover = clock() + options.rediscover_every if options.all_personas else None
        # Held by whichever thread acts: the notifier thread handles a count answer itself (no hand-off on
        # the wake's path), the main thread everything else (timers, sweeps, failures).
        self.busy = threading.RLock()
        self._failures: list[tuple[str, str, float]] = []  # (persona, error, retry in s) of the pulls so far
        for name in personas:
            self._add(name, explicit=True)

    # -- events ------------------------------------------------------------------------------------

    def emit(self, kind: str, persona: str, **fields: Any) -> None:
        self.sink.signal(self.factory.signal(kind, persona, **fields))

    def _raise(self, persona: str, alarm: dict[str, Any] | None) -> None:
        """Emit an alarm edge. Account-wide ones go to every watched persona, as kijito-inbox-monitor does,
        so a consumer that follows only its own persona's stream still hears them."""
        if alarm:
            kind = alarm.pop("kind")
            for name in [t.name for t in self.targets.values()] if persona == ACCOUNT else [persona]:
                self.emit(kind, name, **alarm)

    def note(self, text: str) -> None:
        self.errors.write(f"kijito-pull: watch: {text}\n")
        self.errors.flush()

    @contextlib.contextmanager
    def _acting(self) -> Iterator[None]:
        """Hold `busy` while acting, then say what failed: one line per error, however many personas it
        failed for (a Kijito that is down at the start fails every persona's first pull at once)."""
        with self.busy:
            try:
                yield
            finally:
                failures, self._failures = self._failures, []
                for line in failure_lines(failures):
                    self.note(line)

    # -- personas ----------------------------------------------------------------------------------

    def _add(self, name: str, explicit: bool = False) -> Target | None:
        key = name.casefold()
        if key in self.targets:
            return None
        target = Target(name, self.make_engine(name), alarms.Health(self.opts.alert_after), explicit=explicit)
        self.targets[key] = target
        return target

    def adopt(self, name: str, why: str) -> None:
        """A persona that appeared mid-run: announce it and deliver its first mail rather than skipping it."""
        target = self._add(name)
        if target is not None:
            self.emit("persona_added", name, reason=why)
            self.pull(target)

    def rediscover(self, announce: bool = True) -> None:
        """Re-read the directory; in all-personas mode, watch the personas that appeared (announced
        unless this is the start, where every persona is new)."""
        try:
            listing = self.client.personas()
        except ApiError as exc:
            if not announce and self.opts.all_personas and not self.targets:
                raise  # nothing to watch without it
            self.note(f"persona directory unavailable ({exc}); keeping the current personas")
            return
        self.directory = {p.persona: p.memory_count for p in listing}
        if self.opts.all_personas:
            for info in listing:
                if announce:
                    self.adopt(info.persona, "found in the persona directory")
                else:
                    self._add(info.persona)

    # -- pulling -----------------------------------------------------------------------------------

    def pull(self, target: Target, expect_mail: bool = False) -> None:
        """Pull one persona. `expect_mail`: its unread count just rose, so an empty read is suspicious."""
        now = self.clock()
        try:
            report = pull_through(target.engine, self.factory, self.sink,
                                  content_chars=self.opts.content_chars, no_content=self.opts.no_content)
        except LockTimeout:
            target.retry_at = now + 1.0  # another puller of this cursor is delivering; look again shortly
            return
        except (ApiError, StateError) as exc:
            self.ops.failed("state" if isinstance(exc, StateError) else self._blame(exc), exc)
            self._raise(target.name, target.health.failure(f"inbox of {target.name} failing: {exc}"))
            target.retry_at = now + min(RETRY_CAP, 2.0 ** (target.health.failures - 1))
            self._failures.append((target.name, str(exc), target.retry_at - now))
            return
        self.ops.pulled(target.name, report)
        self.ops.succeeded()
        if self.source_wake is not None and self.source_wake.after_pull is not None:
            try:
                self.source_wake.after_pull(target.name, target.engine)
            except ApiError as exc:
                self.ops.failed(self.source_wake.kind, exc)
        self._raise(target.name, target.health.success(f"inbox of {target.name}"))
        target.skips = 0
        if report.refused is not None:
            target.refusals += 1
            target.retry_at = now + min(RETRY_CAP, 2.0 ** (target.refusals - 1))
        elif report.pinned:
            target.retry_at = now + PIN_RETRY
        elif expect_mail and not report.delivered and not target.rechecked:
            target.rechecked = True
            target.retry_at = now + STALE_RECHECK
        else:
            target.refusals = 0
            target.retry_at = None
        if report.delivered:
            target.rechecked = False
        if report.hidden_unread is not None:
            self._raise(target.name, target.hidden.update({target.name} if report.hidden_unread else set()))

    def _blame(self, exc: ApiError) -> str:
        """The metrics' label of a failed pull: the sink's word (the relay's Redis), or the source's kind."""
        return self.sink.blames(exc) if self.source_wake is None else self.source_wake.kind

    def pull_all(self) -> None:
        if self.next_sweep is not None:
            self.next_sweep = self.clock() + self.opts.poll_seconds  # a sweep counts from the last pull of all
        for target in list(self.targets.values()):
            if self.stop.is_set():
                return
            self.pull(target)

    # -- reacting to the wake source ---------------------------------------------------------------

    def on_counts(self, item: Counts) -> None:
        self.ops.succeeded()
        self._raise(ACCOUNT, self.notify_health.success("notify/pending"))
        counts = {c.persona: c for c in item.result.counts}
        due = []
        rising: set[str] = set()
        for target in self.targets.values():
            row = counts.get(target.name)
            unread = row.unread if row else 0
            urgent = (row.unread_urgent or 0) if row else 0
            # No earlier count (just adopted, or counts were unavailable): read it, we cannot tell a rise.
            rose = target.last_unread is None or unread > target.last_unread or urgent > (target.last_urgent or 0)
            self.sink.urgent_arrived(target.name, urgency.rise(target.last_urgent, urgent))
            target.last_unread, target.last_urgent = unread, urgent
            if rose:
                due.append(target)
                rising.add(target.name)
            elif item.advanced:
                # Mail arrived somewhere without raising this persona's count: a cheap skip. The floor
                # forces a real read now and then, so a stale or wrong count can never blind us.
                target.skips += 1
                if target.skips >= self.opts.resync_every:
                    due.append(target)
        for target in due:
            self.pull(target, expect_mail=target.name in rising and target.last_unread is not None
                      and target.last_unread > 0)
        if self.opts.all_personas:
            for persona, row in counts.items():
                if row.unread > 0 and persona.casefold() not in self.targets:
                    self.adopt(persona, "has unread mail (notify/pending)")
        self._check_alarms(counts)

    def on_notify_failed(self, item: NotifyFailed) -> None:
        if not item.unavailable:
            self.ops.failed("kijito", item.error)
            self._raise(ACCOUNT, self.notify_health.failure(f"notify/pending failing: {item.error}"))
        # Without counts we cannot tell who has mail: read every inbox (the notifier paces this).
        for target in self.targets.values():
            target.last_unread = None
        self.pull_all()

    def on_wakeup(self, item: Wakeup) -> None:
        """What another source's wake said: news (or a wait that failed and was then answered): read every
        persona; a failure only counts (the wake retries at its own pace, and says news once it is answered)."""
        if item.failed is not None:
            self.ops.failed(self.source_wake.kind if self.source_wake else "kijito", item.failed)
            return
        self.ops.succeeded()  # the source answered the wait: it is up
        if item.news:
            self.pull_all()

    def _check_alarms(self, counts: dict) -> None:
        self.last_counts = counts
        # Mail for a persona the user named is being delivered to its consumer, whatever the directory
        # says; an inbox merely adopted from the account has no known reader, so it can still strand.
        explicit = {t.name for t in self.targets.values() if t.explicit}
        unread = {p: c.unread for p, c in counts.items() if p not in explicit}
        if self.opts.stranded_alerts and self.directory:
            candidates, _ = alarms.stranded(unread, self.directory)
            delivered = {p for p in candidates if self._delivered(p, unread[p])}
            names, detail = alarms.stranded({p: n for p, n in unread.items() if p not in delivered}, self.directory)
            self._raise(ACCOUNT, self.stranded.update(names, detail))
        if self.opts.urgent_alerts:
            now = self.clock()
            urgent_now = {p for p, c in counts.items() if (c.unread_urgent or 0) > 0}
            self.urgent_since = {p: self.urgent_since.get(p, now) for p in urgent_now}
            overdue = {p for p, since in self.urgent_since.items() if now - since >= self.opts.urgent_after}
            self._raise(ACCOUNT, self.urgent.update(overdue, f" (unread for over {self.opts.urgent_after:g} s)"))

    def _delivered(self, persona: str, unread: int) -> bool:
        """Was every unread message this inbox shows delivered by some local consumer? (The server's unread
        flags never change under peeks.) One peek of its newest page per change of its unread count."""
        if self.opts.cursors_dir is None:
            return False
        known = self.newest_unread.get(persona)
        if known is None or known[0] != unread:
            try:
                page = self.client.inbox(persona)
            except ApiError:
                return False  # no evidence: the alarm stands
            ids = [m.id for m in page.messages if not m.read]
            known = self.newest_unread[persona] = (unread, max(ids) if ids else None)
        through = readers.delivered_through(self.opts.cursors_dir, self.client.api_base, persona)
        return known[1] is not None and through is not None and through >= known[1]

    # -- timers ------------------------------------------------------------------------------------

    def _next_deadline(self) -> float | None:
        times = [t.retry_at for t in self.targets.values() if t.retry_at is not None]
        times += [x for x in (self.next_heartbeat, self.next_rediscover, self.next_sweep) if x is not None]
        if self.opts.urgent_alerts:  # an urgent message becomes overdue without any new answer arriving
            times += [since + self.opts.urgent_after for p, since in self.urgent_since.items()
                      if p not in self.urgent.current]
        return min(times) if times else None

    def _run_timers(self) -> None:
        now = self.clock()
        if self.opts.urgent_alerts and self.last_counts:
            self._check_alarms(self.last_counts)
        for target in list(self.targets.values()):
            if target.retry_at is not None and target.retry_at <= now:
                self.pull(target)
        if self.next_sweep is not None and self.next_sweep <= now:
            self.pull_all()
        if self.next_rediscover is not None and self.next_rediscover <= now:
            self.next_rediscover = now + self.opts.rediscover_every
            self.rediscover()
        if self.next_heartbeat is not None and self.next_heartbeat <= now and self.opts.heartbeat:
            self.next_heartbeat = now + self.opts.heartbeat
            for target in self.targets.values():
                self.emit("heartbeat", target.name, cursor=self._cursor(target), **self._where())

    def _where(self) -> dict[str, Any]:
        """What events say of the source: Kijito's API base, or another source's own fields."""
        return dict(self.source_wake.fields) if self.source_wake is not None else {"api_base": self.client.api_base}

    @staticmethod
    def _cursor(target: Target) -> int | None:
        """The persona's local cursor; None for a source whose position lives elsewhere (a Redis group's)."""
        store = getattr(target.engine, "store", None)
        if store is None:
            return None
        state = store.load().state
        return state.cursor if state else None

    # -- main loop ---------------------------------------------------------------------------------

    def arm(self) -> None:
        """Start: learn the directory, take a count baseline (Kijito), then announce (`armed`) and pull every
        persona."""
        if self.source_wake is None:
            self._baseline()
        for target in list(self.targets.values()):
            # `armed` first, with the cursor it starts from: the backlog's `new` events follow it.
            self.emit("armed", target.name, cursor=self._cursor(target), **self._where(),
                      consumer=self.opts.consumer)
            self.pull(target)
            if target.last_unread is None:
                target.last_unread, target.last_urgent = 0, 0

    def _baseline(self) -> None:
        """Kijito's directory (all personas, or the stranded alarm's evidence) and a count baseline."""
        if self.opts.all_personas or self.opts.stranded_alerts:
            self.rediscover(announce=False)
        try:
            baseline = self.client.notify_pending()
            for row in baseline.counts:
                target = self.targets.get(row.persona.casefold())
                if target is not None and target.name == row.persona:
                    target.last_unread, target.last_urgent = row.unread, row.unread_urgent or 0
        except ApiError:
            pass  # counts unavailable: the notifier's first answer will say so

    def _start_wake(self) -> None:
        """Start what wakes the loop: Kijito's Notifier (count answers handled on its thread), or the
        source's wake on a WakeThread with the first sweep due; and the stop's own bell."""
        if self.source_wake is None:
            protocol = LongPoll(self.opts.wait, self.opts.poll_seconds, self.opts.min_spacing)
            Notifier(self.notify_client, protocol, self.loop, self.stop, handle=self.handle_counts).start()
        else:
            self.next_sweep = self.clock() + self.opts.poll_seconds
            WakeThread(self.source_wake.wake, self.loop, self.stop).start()
        threading.Thread(target=_bell, args=(self.stop, self.loop), name="watch-stop", daemon=True).start()

    def handle_counts(self, item: Counts) -> None:
        """A count answer, on the notifier's thread. A failure is handed to the main thread to raise."""
        with self._acting():
            if self.stop.is_set():
                return
            before = self._next_deadline()
            try:
                self.on_counts(item)
            except BaseException as exc:
                self.loop.put(_Crashed(exc))
                raise
            after = self._next_deadline()
        if after is not None and (before is None or after < before):
            self.loop.put(None)  # a new, earlier timer: the main thread recomputes its wait

    def run(self) -> None:
        """Arm, start the wake, then act on each message and deadline until `stop` (or `CLOSED`). Idle, it
        blocks on the queue until the earliest deadline, or for good when none is set: a wake, the sink, a
        new earlier deadline (`handle_counts` posts None) and the stop (`_bell`) each post to the queue."""
        with self._acting():
            self.arm()
        self._start_wake()
        while not self.stop.is_set():
            with self.busy:
                deadline = self._next_deadline()
            try:
                item = self.loop.get(timeout=None if deadline is None else max(0.0, deadline - self.clock()))
            except queue.Empty:
                item = None
            if self.stop.is_set():
                break
            if isinstance(item, _Crashed):
                raise item.error
            with self._acting():
                if isinstance(item, Counts):
                    try:
                        self.on_counts(item)
                    finally:
                        item.handled.set()  # the notifier may send its next hold now
                elif isinstance(item, NotifyFailed):
                    self.on_notify_failed(item)
                elif isinstance(item, Wakeup):
                    self.on_wakeup(item)
                elif item == PULL_NOW:
                    self.pull_all()
                elif item == CLOSED:
                    self.stop.set()
                    break
                self._run_timers()


def failure_lines(failures: list[tuple[str, str, float]], names: int = 3) -> list[str]:
    """The lines for (persona, error, retry in s) failures: one per distinct error, naming up to `names`
    personas and counting the rest."""
    by_error: dict[str, list[tuple[str, float]]] = {}
    for persona, error, retry in failures:
        by_error.setdefault(error, []).append((persona, retry))
    lines = []
    for error, rows in by_error.items():
        shown = ", ".join(p for p, _ in rows[:names])
        rest = len(rows) - names
        who = shown if rest <= 0 else f"{shown} and {rest} more persona{'s' if rest > 1 else ''}"
        low, high = min(r for _, r in rows), max(r for _, r in rows)
        when = f"{low:.0f} s" if round(low) == round(high) else f"{low:.0f}-{high:.0f} s"
        lines.append(f"{who}: {error}; retrying in {when}")
    return lines


def _bell(stop: threading.Event, loop: queue.Queue) -> None:
    """Wait (without waking) for `stop`, then post to the loop's queue so a loop blocked on it sees the stop
    at once: a SIGTERM handler (cli/stopsignals.py) or a caller only sets the event."""
    stop.wait()
    loop.put(None)


@dataclass(frozen=True)
class _Crashed:
    """A failure of the notifier thread's handling, raised again on the main thread."""

    error: BaseException
