"""The pull engine: reconcile one cursor with the server and hand over only unseen mail, in id order.

The contract (design.md, "Delivery contract"): the cursor is a confirmed-contiguous watermark; it moves
only past mail the consumer took; a span above the cursor that the server withheld is walked backward
with `before_id` until the walk reaches the cursor; a walk that cannot complete pins the cursor,
remembers what was delivered above it and raises one alert. The engine is given its client and store,
so every entry point (CLI, hooks, watch loop) shares this one implementation.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kijito_pull.core.models import ApiError, InboxPage, Message
from kijito_pull.core.state import EMPTY_CURSOR, CursorState, Loaded, StateStore

DEFAULT_MAX_REPLAY = 50
DEFAULT_PAGE_BUDGET = 1000
DEFAULT_LOCK_TIMEOUT = 5.0

FIRST_CONTACT = "first_contact"
CORRUPT = "corrupt"
NORMAL = "normal"


class InboxSource(Protocol):
    def inbox(self, persona: str, before_id: int | None = None, limit: int | None = None) -> InboxPage: ...


class SignalFactory(Protocol):
    def signal(self, kind: str, persona: str, **fields: Any) -> dict: ...


@dataclass
class Coverage:
    """What a fetch proved: the rows seen above the cursor, and whether they are *all* of them."""

    rows: dict[int, Message] = field(default_factory=dict)
    complete: bool = False
    problem: str | None = None
    pages: int = 0


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Pull:
    """One open pull of one cursor, under its lock. Hand over `pending` in order, `ack` each as taken."""

    def __init__(self, engine: Engine, loaded: Loaded, newest: InboxPage, coverage: Coverage,
                 signals: list[dict], mode: str, pending: list[Message], target: int, peek: bool):
        self.persona = engine.persona
        self.consumer = engine.consumer
        self.mode = mode
        self.pending = pending
        self.signals = signals
        self.coverage = coverage
        self.newest = newest
        self._engine = engine
        self._before = loaded.state
        self._target = target
        self._peek = peek
        self._acked: set[int] = set()
        # Incremental bookkeeping, so each ack costs O(1) amortised instead of a scan of `pending`
        # (a 10,000-message catch-up spent ~6.5 s in those scans): the pending ids in order, the
        # index of the first one not yet acked, and the acked ids not yet passed by that index.
        self._order = sorted(m.id for m in pending)
        self._next = 0
        self._acked_ahead: set[int] = set()
        self._dirty = False
        self._unsynced = False  # a save whose directory entry is not yet fsynced

    @property
    def pinned(self) -> bool:
        return self.mode == NORMAL and not self.coverage.complete

    @property
    def problem(self) -> str | None:
        return self.coverage.problem

    def ack(self, message: Message) -> None:
        """Record that the consumer took `message`, durably, before the next one is handed over."""
        self.ack_all([message])

    def ack_all(self, messages: Iterable[Message]) -> None:
        ids = {m.id for m in messages}
        self._acked |= ids
        self._acked_ahead |= ids
        while self._next < len(self._order) and self._order[self._next] in self._acked:
            self._acked_ahead.discard(self._order[self._next])
            self._next += 1
        self._dirty = True
        self._persist(final=False)

    def finish(self) -> None:
        """Persist the final position: past everything taken, never past the first message not taken."""
        if self.mode == NORMAL or self._dirty or self.all_taken:
            self._persist(final=True)

    @property
    def all_taken(self) -> bool:
        return all(m.id in self._acked for m in self.pending)

    def state_after(self) -> CursorState:
        before = self._before or CursorState()
        if self.pinned:
            above = sorted(set(before.delivered_above) | self._acked)
            pin = before.pin or {"since": _now(), "reason": self.coverage.problem or "gap not proven"}
            return CursorState(cursor=before.cursor, delivered_above=above, pin=pin)
        # The lowest pending id not taken yet; acked ids below it are all <= the watermark, so only the
        # acked ids not yet passed (`_acked_ahead`) can still belong above it.
        watermark = (self._order[self._next] - 1) if self._next < len(self._order) else self._target
        if before.cursor is not None and self.mode == NORMAL:
            watermark = max(watermark, before.cursor)
        above = sorted(i for i in set(before.delivered_above) | self._acked_ahead if i > watermark)
        return CursorState(cursor=watermark, delivered_above=above, pin=None)

    def _persist(self, final: bool) -> None:
        if self._peek:
            return
        after = self.state_after()
        if after != self._before:
            self._engine.store.save(after, sync_dir=final)
            self._before = after
            self._unsynced = not final
        elif final and self._unsynced:
            self._engine.store.sync()  # make the last per-message save durable too
            self._unsynced = False


class Engine:
    def __init__(self, client: InboxSource, store: StateStore, signals: SignalFactory, *, persona: str,
                 consumer: str = "agent", max_replay: int = DEFAULT_MAX_REPLAY,
                 page_budget: int = DEFAULT_PAGE_BUDGET, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 suppress_authors: Iterable[str] = (), progress: Callable[[int, int], None] | None = None):
        self.client = client
        self.store = store
        self.factory = signals
        self.persona = persona
        self.consumer = consumer
        self.max_replay = max_replay
        self.page_budget = page_budget
        self.lock_timeout = lock_timeout
        # Self-echo: mail the watched persona wrote itself is acknowledged silently, never delivered.
        self.suppressed = {persona, *suppress_authors}
        self.progress = progress  # called with (pages walked, messages found) during a catch-up walk

    @contextlib.contextmanager
    def open(self, peek: bool = False) -> Iterator[Pull]:
        """Lock the cursor, fetch and plan; the caller delivers and acks; the final state is saved on exit.

        Raises ApiError when the newest page cannot be read (nothing is changed), StateError when the
        cursor cannot be locked or saved.
        """
        lock = contextlib.nullcontext() if peek else self.store.locked(self.lock_timeout)
        with lock:
            pull = self._plan(self.store.load(), peek)
            try:
                yield pull
            finally:
                pull.finish()

    # -- planning ----------------------------------------------------------------------------------

    def _plan(self, loaded: Loaded, peek: bool) -> Pull:
        newest = self.client.inbox(self.persona)
        if loaded.state is None or loaded.state.cursor is None:
            return self._plan_first_contact(loaded, newest, peek)
        state = loaded.state
        coverage = self._cover(newest, state.cursor)
        delivered = set(state.delivered_above)
        candidates = [m for i, m in sorted(coverage.rows.items())]
        pending = [m for m in candidates if m.id not in delivered and m.sender not in self.suppressed]
        target = max([state.cursor, *coverage.rows])
        signals = []
        if not coverage.complete and state.pin is None:
            signals.append(self.factory.signal(
                "alert", self.persona, reason=f"cursor pinned at {state.cursor}: {coverage.problem}",
                cursor=state.cursor, consumer=self.consumer))
        elif coverage.complete and state.pin is not None:
            signals.append(self.factory.signal(
                "recovered", self.persona, reason="the gap above the cursor is covered; pin released",
                cursor=state.cursor, consumer=self.consumer))
        return Pull(self, loaded, newest, coverage, signals, NORMAL, pending, target, peek)

    def _plan_first_contact(self, loaded: Loaded, newest: InboxPage, peek: bool) -> Pull:
        visible = [m for m in newest.messages if m.sender not in self.suppressed]
        signals = []
        target = newest.newest_id if newest.newest_id is not None else EMPTY_CURSOR
        coverage = Coverage(rows={m.id: m for m in newest.messages}, complete=True, pages=0)
        if loaded.corrupt_reason is not None:
            # Fail closed: we no longer know what was delivered, so everything visible goes out again.
            signals.append(self.factory.signal(
                "state_corrupt", self.persona, reason=loaded.corrupt_reason, redelivered=len(visible),
                consumer=self.consumer))
            if not newest.declares_end or newest.unread_not_shown:
                # Older mail the window withheld may never have been delivered, and with no cursor there
                # is nothing to walk back to: the cursor is baselined over it, which must not be silent.
                fields = {"seeded": target, "skipped_read": 0, "consumer": self.consumer,
                          "reason": "the state was corrupt: mail older than the newest window was not re-delivered"}
                if newest.unread_not_shown:
                    fields["unread_not_shown"] = newest.unread_not_shown
                signals.append(self.factory.signal("baseline_skipped", self.persona, **fields))
            return Pull(self, loaded, newest, coverage, signals, CORRUPT, visible, target, peek)
        unread = [m for m in visible if not m.read]
        pending = unread[-self.max_replay:] if self.max_replay > 0 else []
        if len(unread) > len(pending):
            signals.append(self.factory.signal(
                "replay_capped", self.persona, capped_to=self.max_replay, dropped=len(unread) - len(pending),
                ids=[m.id for m in unread[: len(unread) - len(pending)]], consumer=self.consumer))
        skipped_read = len(visible) - len(unread)
        withheld = newest.withheld or bool(newest.unread_not_shown)
        if skipped_read or withheld:
            fields: dict[str, Any] = {"seeded": target, "skipped_read": skipped_read, "consumer": self.consumer}
            if newest.unread_not_shown:
                fields["unread_not_shown"] = newest.unread_not_shown
            if withheld:
                fields["reason"] = "older mail beyond the first window was not replayed"
            signals.append(self.factory.signal("baseline_skipped", self.persona, **fields))
        return Pull(self, loaded, newest, coverage, signals, FIRST_CONTACT, pending, target, peek)

    def _cover(self, newest: InboxPage, cursor: int) -> Coverage:
        """Prove that the rows above `cursor` are all seen, walking backward while the server withheld rows."""
        cov = Coverage()
        page = newest
        while True:
            for m in page.messages:
                if m.id > cursor:
                    cov.rows[m.id] = m
            contradiction = page.contradiction()
            if contradiction is not None:
                where = "newest page" if page.before_id is None else f"page before id {page.before_id}"
                cov.problem = f"the server's {where} contradicts itself ({contradiction})"
                return cov
            if page.declares_end or (page.oldest_id is not None and page.oldest_id <= cursor):
                cov.complete = True
                return cov
            if cov.pages >= self.page_budget:
                cov.problem = f"the backward walk hit its budget of {self.page_budget} pages"
                return cov
            assert page.oldest_id is not None  # a consistent page that withheld rows has an oldest id
            try:
                page = self.client.inbox(self.persona, before_id=page.oldest_id)
            except ApiError as exc:
                cov.problem = f"a backward page failed ({exc})"
                return cov
            cov.pages += 1
            if self.progress is not None:
                self.progress(cov.pages, len(cov.rows))
