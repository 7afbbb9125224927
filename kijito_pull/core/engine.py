"""The pull engine: reconcile one cursor with the server and hand over only unseen mail, in id order.

The contract (docs/delivery.md): the cursor is a confirmed-contiguous watermark; it moves
only past mail the consumer took; a span above the cursor that the server withheld is walked backward
with `before_id` until the walk reaches the cursor; a walk that cannot complete pins the cursor,
remembers what was delivered above it and raises one alert. The engine is given its client and store,
so every entry point (CLI, hooks, watch loop) shares this one implementation.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import datetime
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kijito_pull.core import pending as pending_mod
from kijito_pull.core.models import ApiError, InboxPage, Message, Untrustworthy
from kijito_pull.core.pending import Holder
from kijito_pull.core.source import SignalFactory
from kijito_pull.core.state import EMPTY_CURSOR, RECENT_LIMIT, CursorState, Loaded, StateError, StateStore, fingerprint

DEFAULT_MAX_REPLAY = 50
DEFAULT_PAGE_BUDGET = 1000
DEFAULT_LOCK_TIMEOUT = 5.0
DEFAULT_MAX_ATTEMPTS = 10  # refusals (or unconfirmed hand-overs) before a message is parked

#: What a pull does when the server's ids start over below the cursor (docs/delivery.md, "Server resets").
REPLAY = "replay"  # deliver the visible unread mail as on first contact and start the cursor again
PIN = "pin"  # keep the cursor pinned and alert until a person decides
RESET_POLICIES = (REPLAY, PIN)

FIRST_CONTACT = "first_contact"
CORRUPT = "corrupt"
NORMAL = "normal"


class InboxSource(Protocol):
    """What the engine reads pages from (core.api.KijitoClient)."""

    def inbox(self, persona: str, before_id: int | None = None, limit: int | None = None) -> InboxPage:
        """The newest page, or with `before_id` the page of ids below it."""


@dataclass
class Coverage:
    """What a fetch proved: the rows seen above the cursor, and whether they are *all* of them."""

    rows: dict[int, Message] = field(default_factory=dict)
    complete: bool = False
    problem: str | None = None
    pages: int = 0


def parked_record(attempts: int, reason: str) -> dict[str, Any]:
    """What the state keeps of a parked message (`kijito-pull parked` lists it; `--retry` sets retry)."""
    return {"since": _now(), "attempts": attempts, "retry": False, "reason": reason[:200]}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Pull:
    """One open pull of one cursor, under its lock.

    Scripts hand over `pending` in order and `ack` each as taken. An agent session (opened with a
    `Holder`) records a hand-over with `hand_over` instead, and acks only what its harness's record
    confirms (`confirm`); `held` lists what it was handed before and has not confirmed yet, which
    `retake` makes unseen again (core/pending.py).
    """

    def __init__(self, engine: Engine, loaded: Loaded, newest: InboxPage, coverage: Coverage,
                 signals: list[dict], mode: str, pending: list[Message], target: int, peek: bool, *,
                 held: Iterable[Message] = (), blocked: Iterable[int] = (), accounted: Iterable[int] = (),
                 entries: dict[int, pending_mod.Entry] | None = None, holder: Holder | None = None,
                 late: Iterable[int] = (), parked: dict[int, dict[str, Any]] | None = None):
        self.persona = engine.persona
        self.consumer = engine.consumer
        self.mode = mode
        self.pending = pending
        self.held = list(held)
        self.signals = signals
        self.coverage = coverage
        self.newest = newest
        self._engine = engine
        self._before = loaded.state
        self._target = target
        self._peek = peek
        self._holder = holder
        self._entries = dict(entries or {})
        self._acked: set[int] = set(accounted)
        # Incremental bookkeeping, so each ack costs O(1) amortised instead of a scan of `pending`
        # (a 10,000-message catch-up spent ~6.5 s in those scans): the ids the watermark may not pass
        # until they are acked (to hand over, held by a session, or accounted for without delivery), in
        # order; the index of the first one not yet acked; the acked ids not yet passed by that index.
        # Ids at or below the cursor that became visible late (delivered now; they never hold the cursor),
        # and every row this pull saw, in order, to remember what the cursor passes (`recent`).
        self._late = set(late)
        self._late_taken: set[int] = set()
        self._rows = coverage.rows
        self._seen = sorted(coverage.rows)
        self._recent_base: CursorState | None | bool = False  # what _recent's running copy was built from
        self._recent_ids: dict[int, str] = {}
        self._recent_upto = 0
        self._order = sorted(({m.id for m in pending} | {m.id for m in self.held} | set(blocked) | self._acked)
                             - self._late)
        self._next = 0
        self._acked_ahead: set[int] = set(self._acked)
        self._advance()
        self._dirty = False
        self._unsynced = False  # a save whose directory entry is not yet fsynced
        self._repair = loaded.restored is not None  # rewrite a damaged file even if nothing else changes
        self._initial = loaded.state  # what the pull started from (the last good copy keeps it)
        self._saved = False
        keep = loaded.state if mode == NORMAL and loaded.state is not None else CursorState()
        self._failures = dict(keep.failures)
        self._parked = dict(parked if parked is not None else keep.parked)

    @property
    def pinned(self) -> bool:
        """The walk could not prove it saw everything above the cursor: the cursor stays where it is."""
        return self.mode == NORMAL and not self.coverage.complete

    @property
    def problem(self) -> str | None:
        """Why the cursor is pinned (None: it is not)."""
        return self.coverage.problem

    @property
    def hidden_unread(self) -> bool | None:
        """The newest page's claim about unread mail outside its window (None: it made none)."""
        return self.newest.hidden_unread()

    def ack(self, message: Message) -> None:
        """Record that the consumer took `message`, durably, before the next one is handed over."""
        self.ack_all([message])

    def ack_all(self, messages: Iterable[Message]) -> None:
        """`ack` for several messages at once (one durable record)."""
        ids = {m.id for m in messages}
        for i in ids:
            self._entries.pop(i, None)
            self._failures.pop(i, None)
            self._parked.pop(i, None)  # a parked message handed over again (`parked --retry`)
        taken = set(ids)
        self._late_taken |= ids & self._late
        ids -= self._late
        self._acked |= ids
        self._acked_ahead |= ids
        self._advance()
        self._dirty = True
        # Durable before the next message is handed over: one journal record in an ordinary pull (the final
        # save folds the journal in), else a save of the whole state. When this ack leaves nothing more to
        # hand over in this pull, that save is the final one, made at once: a pull of one message (a watch's
        # wake) writes the state file once and never opens a journal.
        if self._peek or self.mode != NORMAL:
            self._persist(final=False)
        elif not self.pending or self.pending[-1].id in taken:
            self._persist(final=True)
        elif not self._engine.store.journal_acks(sorted(taken)):
            self._persist(final=False)

    def _advance(self) -> None:
        while self._next < len(self._order) and self._order[self._next] in self._acked:
            self._acked_ahead.discard(self._order[self._next])
            self._next += 1

    def refuse(self, message: Message, reason: str = "the consumer did not take it") -> dict | None:
        """The consumer refused `message` once more. At the limit (Engine.max_attempts; 0 = never) it is
        parked: announced by the returned alert, accounted for so the cursor moves on and later mail
        flows, and listed by `kijito-pull parked` until `--retry`. Else None: it holds the cursor."""
        count = self._failures.get(message.id, 0) + 1
        limit = self._engine.max_attempts
        self._dirty = True
        if not limit or count < limit:
            self._failures[message.id] = count
            self._persist(final=False)
            return None
        self._failures.pop(message.id, None)
        self._parked[message.id] = parked_record(count, reason)
        self._acked.add(message.id)
        self._acked_ahead.add(message.id)
        self._advance()
        self._persist(final=False)
        return self._engine.factory.signal(
            "alert", self.persona, id=message.id, attempts=count, consumer=self.consumer,
            reason=f"message {message.id} was refused {count} times ({reason[:200]}); it is parked so later mail "
                   f"flows: `kijito-pull parked` lists it, `kijito-pull parked --retry {message.id}` hands it over "
                   f"again")

    # -- hand-overs to an agent session (a Holder) -------------------------------------------------------

    def hand_over(self, messages: Iterable[Message], shown: Iterable[int] | None = None) -> None:
        """Record `messages` as pending with this pull's holder, durably, before they are written out.

        They are not acknowledged: the cursor stays below them until `confirm` (or `Engine.settle`).
        `shown`: the ids written out now, counted as handed over (default: all of them, one text); the
        rest are claimed for this holder and counted when written (`Engine.settle(shown=...)`), so a
        consumer killed before reaching them does not count against them (they would be parked as poison)."""
        assert self._holder is not None, "hand_over needs a pull opened with a holder"
        messages = list(messages)
        now = time.time()
        handed = {m.id for m in messages}
        counted = handed if shown is None else set(shown)
        for m in messages:
            self._entries[m.id] = self._entries.get(m.id, pending_mod.fresh()).handed(
                self._holder, now, shown=m.id in counted)
        self.pending = [m for m in self.pending if m.id not in handed]
        self.held = sorted([*self.held, *(m for m in messages if m.id not in {h.id for h in self.held})],
                           key=lambda m: m.id)
        self._dirty = True
        self._persist(final=True)

    def confirm(self, ids: Iterable[int]) -> list[Message]:
        """The harness's record shows these were given to the model: acknowledge them. Returns those acked."""
        wanted = set(ids)
        done = [m for m in self.held if m.id in wanted]
        if done:
            self.held = [m for m in self.held if m.id not in wanted]
            self.ack_all(done)
        return done

    def retake(self) -> list[Message]:
        """What this holder was handed and has not confirmed goes back to `pending` (unseen, count kept)."""
        back, self.held = self.held, []
        for m in back:
            entry = self._entries.get(m.id)
            if entry is not None:
                self._entries[m.id] = entry.released()
        self.pending = sorted([*self.pending, *back], key=lambda m: m.id)
        if back:
            self._dirty = True
        return back

    def release(self, ids: Iterable[int]) -> list[Message]:
        """Only these of what this holder holds go back to `pending` (a write that failed): unseen again."""
        wanted = set(ids)
        back = [m for m in self.held if m.id in wanted]
        if not back:
            return []
        self.held = [m for m in self.held if m.id not in wanted]
        for m in back:
            entry = self._entries.get(m.id)
            if entry is not None:
                self._entries[m.id] = entry.released()
        self.pending = sorted([*self.pending, *back], key=lambda m: m.id)
        self._dirty = True
        self._persist(final=True)
        return back

    def handed_count(self, message: Message) -> int:
        """How often `message` was handed over without being confirmed."""
        entry = self._entries.get(message.id)
        return entry.count if entry is not None else 0

    def finish(self) -> None:
        """Persist the final position: past everything taken, never past the first message not taken."""
        if self.mode == NORMAL or self._dirty or self.all_taken or self._repair:
            self._persist(final=True)
        self._engine.store.close_journal()

    @property
    def all_taken(self) -> bool:
        """Every planned message was acknowledged."""
        return all(m.id in self._acked for m in self.pending)

    def state_after(self) -> CursorState:
        """The cursor state this pull would save now: past everything taken, never past the first not taken."""
        before = self._before or CursorState()
        if self.pinned:
            above = sorted(set(before.delivered_above) | self._acked)
            pin = before.pin or {"since": _now(), "reason": self.coverage.problem or "gap not proven"}
            return CursorState(cursor=before.cursor, delivered_above=above, pin=pin, pending=dict(self._entries),
                               recent=self._recent(self._initial, before.cursor), failures=dict(self._failures),
                               parked=dict(self._parked))
        # The lowest blocking id not acked yet; acked ids below it are all <= the watermark, so only the
        # acked ids not yet passed (`_acked_ahead`) can still belong above it.
        watermark = (self._order[self._next] - 1) if self._next < len(self._order) else self._target
        if before.cursor is not None and self.mode == NORMAL:
            watermark = max(watermark, before.cursor)
        prior_above = before.delivered_above if self.mode == NORMAL else ()  # a reset forgets the old numbering
        above = sorted(i for i in set(prior_above) | self._acked_ahead if i > watermark)
        entries = {i: e for i, e in self._entries.items() if i > watermark}
        return CursorState(cursor=watermark, delivered_above=above, pin=None, pending=entries,
                           recent=self._recent(self._initial if self.mode == NORMAL else None, watermark),
                           failures={i: n for i, n in self._failures.items() if i > watermark
                                     or i in self._late}, parked=dict(self._parked))

    def _recent(self, before: CursorState | None, cursor: int | None) -> dict[int, str]:
        """The newest RECENT_LIMIT ids at or below `cursor` accounted for, with their fingerprints: what was
        remembered, the rows this pull saw that the cursor now passes (all delivered, self-echo or
        announced), the late ids taken. Incremental: each save of a long catch-up costs only what the
        cursor passed since the last one."""
        if cursor is None:
            return {}
        if self._recent_base is False:  # the first call of this pull: start from what was remembered
            self._recent_base = before
            self._recent_ids = dict(before.recent) if before is not None else {}
        upto = bisect.bisect_right(self._seen, cursor)
        if upto > self._recent_upto:
            for i in self._seen[max(self._recent_upto, upto - RECENT_LIMIT):upto]:
                self._recent_ids[i] = self._fingerprint(i)
            self._recent_upto = upto
        if self._late_taken - self._recent_ids.keys() or any(i > cursor for i in self._late_taken):
            # A late id lands below others (rare): rebuild in id order, the order the file and min() rely on.
            for i in self._late_taken - self._recent_ids.keys():
                self._recent_ids[i] = self._fingerprint(i)
            keep = sorted(i for i in self._recent_ids if i <= cursor)
            self._recent_ids = {i: self._recent_ids[i] for i in keep}
        # Ids come in increasing order, so the oldest are first: drop from the front (no sort, no scan).
        for i in list(itertools.islice(self._recent_ids, max(0, len(self._recent_ids) - RECENT_LIMIT))):
            del self._recent_ids[i]
        return dict(self._recent_ids)

    def _fingerprint(self, ident: int) -> str:
        m = self._rows[ident]
        return fingerprint(m.sender, m.created, m.content)

    def _persist(self, final: bool) -> None:
        if self._peek:
            return
        after = self.state_after()
        if after != self._before or self._repair:
            self._repair = False
            # The first save of a pull keeps the state the pull started from as the last good copy: one
            # link per pull, not per message, and damage costs at most one pull's mail again.
            self._engine.store.save(after, sync_dir=final, keep_previous=not self._saved)
            self._engine.store.close_journal()  # the save holds every journaled ack
            self._saved = True
            self._before = after
            self._unsynced = not final
        elif final and self._unsynced:
            self._engine.store.sync()  # make the last per-message save durable too
            self._unsynced = False


class Engine:
    """The Kijito mail source (core/source.py's `MailSource`): one (API base, persona, consumer) cursor.

    `open()` locks the cursor file, reads the newest page, walks backward until the cursor is reached
    (or pins it) and plans what is unseen, as a `Pull`; `settle()` confirms or releases pending
    hand-overs outside a pull; `held_by()` lists a holder's. The client and store are given, so the
    engine is tested without HTTP and every entry point shares it (docs/delivery.md).
    """

    def __init__(self, client: InboxSource, store: StateStore, signals: SignalFactory, *, persona: str,
                 consumer: str = "agent", max_replay: int = DEFAULT_MAX_REPLAY,
                 page_budget: int = DEFAULT_PAGE_BUDGET, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 suppress_authors: Iterable[str] = (), progress: Callable[[int, int], None] | None = None,
                 holder_alive: pending_mod.Liveness | None = pending_mod.process_alive,
                 max_handovers: int = pending_mod.DEFAULT_MAX_HANDOVERS, on_reset: str = "replay",
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS):
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
        self.holder_alive = holder_alive  # does a pending hand-over's holder still run? (None: deadline only)
        self.max_handovers = max_handovers
        if on_reset not in RESET_POLICIES:
            raise ValueError(f"on_reset must be one of {', '.join(RESET_POLICIES)}")
        self.on_reset = on_reset
        self.max_attempts = max_attempts  # refusals before a message is parked; 0: hold the cursor forever

    @contextlib.contextmanager
    def open(self, peek: bool = False, holder: Holder | None = None) -> Iterator[Pull]:
        """Lock the cursor, fetch and plan; the caller delivers and acks; the final state is saved on exit.

        With `holder` (an agent session), mail pending with another live session is left out, what this
        holder was handed before is in `pull.held`, and `pull.hand_over` records a new hand-over.
        Raises ApiError when the newest page cannot be read (nothing is changed), StateError when the
        cursor cannot be locked or saved.
        """
        lock = contextlib.nullcontext() if peek else self.store.locked(self.lock_timeout)
        with lock:
            pull = self._plan(self.store.load(), peek, holder)
            try:
                yield pull
            finally:
                pull.finish()

    def settle(self, holder: str, confirmed: Iterable[int] = (), released: Iterable[int] = (),
               shown: Iterable[int] = ()) -> None:
        """Outside a pull, briefly under the lock: `confirmed` hand-overs are acknowledged (remembered in
        `delivered_above`; the next pull moves the cursor past them), `released` ones are unseen again,
        and `shown` ones (claimed by `Pull.hand_over` without being counted) are about to be written out:
        counted as handed over. Only this holder's entries are released or counted; a confirmation counts
        whoever holds the entry now (the model has the message either way). No request is sent."""
        confirmed, released = set(confirmed), set(released) - set(confirmed)
        shown = set(shown) - confirmed - released
        if not confirmed and not released and not shown:
            return
        with self.store.locked(self.lock_timeout):
            loaded = self.store.load()
            state = loaded.state
            if state is None or state.cursor is None:
                return  # absent or damaged: nothing is pending; a later pull re-delivers what is visible
            entries = dict(state.pending)
            above = set(state.delivered_above)
            for i in confirmed:
                if i > state.cursor:
                    above.add(i)
                entries.pop(i, None)
            for i in released:
                entry = entries.get(i)
                if entry is not None and entry.held_by(holder):
                    entries[i] = entry.released()
            for i in shown:
                entry = entries.get(i)
                if entry is not None and entry.held_by(holder):
                    entries[i] = entry.shown()
            # Everything else the state holds (recent ids, refusals, parked mail) is kept as it is.
            after = dataclasses.replace(state, delivered_above=sorted(above), pending=entries)
            if after != state:
                self.store.save(after)

    def held_by(self, holder: str) -> list[int]:
        """The ids pending with `holder` now (briefly under the lock; no request is sent)."""
        with self.store.locked(self.lock_timeout):
            state = self.store.load().state
        if state is None:
            return []
        return sorted(i for i, e in state.pending.items() if e.held_by(holder))

    def unseen(self, exclude: Iterable[int] = ()) -> list[int]:
        """The ids unseen now, read under the lock (a pull under way is waited for); nothing changes."""
        skip = set(exclude)
        with self.store.locked(self.lock_timeout):
            with self.open(peek=True) as pull:
                return [m.id for m in pull.pending if m.id not in skip]

    # -- planning ----------------------------------------------------------------------------------

    def _plan(self, loaded: Loaded, peek: bool, holder: Holder | None = None) -> Pull:
        if loaded.refused is not None:
            raise StateError(loaded.refused)  # before any request: nothing is handed over or acknowledged
        distrust = None
        try:
            newest = self.client.inbox(self.persona)
        except Untrustworthy as exc:
            if loaded.state is None or loaded.state.cursor is None:
                raise  # no cursor to pin: the pull fails (nothing is changed), saying why
            # Nothing from it is delivered: planned as an empty window whose coverage is not proven.
            distrust = f"the server's newest page is not believed ({exc})"
            newest = InboxPage.unbelieved()
        if loaded.state is None or loaded.state.cursor is None:
            return self._plan_first_contact(loaded, newest, peek, holder)
        state = loaded.state
        reset = self._reset_seen(state, newest)
        if reset is not None and self.on_reset == REPLAY:
            # Planned as a first contact: the old cursor is replaced, not merged (its numbering is gone).
            pull = self._plan_first_contact(loaded, newest, peek, holder)
            pull.signals.insert(0, self.factory.signal(
                "alert", self.persona, reason=f"{reset}; its unread mail is delivered as on first contact and "
                                              f"the cursor starts again (on_reset={REPLAY})",
                cursor=state.cursor, consumer=self.consumer))
            return pull
        problem = distrust or reset
        coverage = self._cover(newest, state.cursor) if problem is None else Coverage(problem=problem)
        delivered = set(state.delivered_above)
        # Ids at or below the cursor that became visible after the cursor passed them (a late commit): in
        # the trailing window of ids remembered as accounted for, an id not among them was never seen.
        recent = state.recent
        floor = min(recent) if recent else state.cursor
        late = [m for m in newest.messages if floor < m.id <= state.cursor and m.id not in recent]
        parked = dict(state.parked)
        late += self._retries(parked, newest, {m.id for m in late})  # `kijito-pull parked --retry ID`
        coverage.rows.update((m.id, m) for m in late)  # remembered once taken (self-echo: at once)
        candidates = [*(m for m in sorted(late, key=lambda m: m.id) if m.sender not in self.suppressed),
                      *(m for i, m in sorted(coverage.rows.items())
                        if i > state.cursor and m.id not in delivered and m.sender not in self.suppressed
                        and m.id not in parked)]
        entries = dict(state.pending)
        now = time.time()
        pending, held, blocked = [], [], []
        signals = []
        if loaded.restored is not None:
            signals.append(self.factory.signal(
                "state_corrupt", self.persona, reason=loaded.restored, restored="the last good copy",
                cursor=state.cursor, consumer=self.consumer))
        for m in candidates:
            entry = entries.get(m.id)
            if entry is not None and entry.holder is not None:
                if holder is not None and entry.held_by(holder.key):
                    held.append(m)
                    continue
                if pending_mod.is_live(entry, now, self.holder_alive):
                    blocked.append(m.id)  # another session has it: not handed over twice, not passed
                    continue
                entries[m.id] = entry.released()  # its holder is gone or late: claimed back
                if self.max_attempts and entry.count >= self.max_attempts:
                    entries.pop(m.id)  # poison for every session: parked, so later mail flows
                    parked[m.id] = parked_record(entry.count, f"handed over {entry.count} times, never confirmed")
                    signals.append(self.factory.signal(
                        "alert", self.persona, id=m.id, handovers=entry.count, consumer=self.consumer,
                        reason=f"message {m.id} was handed over {entry.count} times and no session confirmed "
                               f"it; it is parked so later mail flows (`kijito-pull parked --retry {m.id}`)"))
                    continue
                if entry.count >= self.max_handovers:
                    signals.append(self.factory.signal(
                        "alert", self.persona, id=m.id, handovers=entry.count, consumer=self.consumer,
                        reason=f"message {m.id} was handed over {entry.count} times and no session confirmed "
                               f"it (last holder {entry.holder}); it stays unseen"))
            pending.append(m)
        target = max([state.cursor, *coverage.rows])
        if not coverage.complete and state.pin is None:
            signals.append(self.factory.signal(
                "alert", self.persona, reason=f"cursor pinned at {state.cursor}: {coverage.problem}",
                cursor=state.cursor, consumer=self.consumer))
        elif coverage.complete and state.pin is not None:
            signals.append(self.factory.signal(
                "recovered", self.persona, reason="the gap above the cursor is covered; pin released",
                cursor=state.cursor, consumer=self.consumer))
        return Pull(self, loaded, newest, coverage, signals, NORMAL, pending, target, peek,
                    held=held, blocked=blocked, entries=entries, holder=holder, late=[m.id for m in late],
                    parked=parked)

    def _retries(self, parked: dict[int, dict[str, Any]], newest: InboxPage, known: set[int]) -> list[Message]:
        """Parked messages someone asked to hand over again, fetched one by one (they lie below the cursor,
        often below the newest window). One that is gone from the server stays listed, with a note."""
        out = []
        visible = {m.id: m for m in newest.messages}
        for ident, record in parked.items():
            if not record.get("retry") or ident in known:
                continue
            message = visible.get(ident)
            if message is None:
                try:
                    page = self.client.inbox(self.persona, before_id=ident + 1, limit=1)
                except ApiError:
                    continue  # tried again next pull
                message = next((m for m in page.messages if m.id == ident), None)
            if message is None:
                parked[ident] = {**record, "retry": False, "reason": "asked to retry, but it is gone from the server"}
                continue
            out.append(message)
        return out

    def _reset_seen(self, state: CursorState, newest: InboxPage) -> str | None:
        """Why the newest page shows a server whose ids started over below this cursor, or None.

        A reset shows only ids below the cursor, none of them one this cursor accounted for. (A deleted
        newest message also leaves ids below the cursor, but ones we remember.) Only a consistent page
        with rows, and a cursor that remembers what it passed, can tell."""
        if not state.recent or not newest.messages or newest.contradiction() is not None:
            return None
        if newest.newest_id is None or newest.newest_id >= state.cursor:
            return None
        known = state.recent
        if any(known.get(m.id) == fingerprint(m.sender, m.created, m.content) for m in newest.messages):
            return None  # mail we accounted for is still there: deleted mail, not a reset
        return (f"the server's ids start over below the cursor: its newest message is {newest.newest_id}, the "
                f"cursor is at {state.cursor} (a reset server, or an old copy of the account)")

    def _plan_first_contact(self, loaded: Loaded, newest: InboxPage, peek: bool,
                            holder: Holder | None = None) -> Pull:
        signals = []
        target = newest.newest_id if newest.newest_id is not None else EMPTY_CURSOR
        if loaded.corrupt_reason is not None:
            visible = [m for m in newest.messages if m.sender not in self.suppressed]
            coverage = Coverage(rows={m.id: m for m in newest.messages}, complete=True, pages=0)
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
            return Pull(self, loaded, newest, coverage, signals, CORRUPT, visible, target, peek, holder=holder)
        coverage, last = self._walk_for_unread(newest)
        visible = [m for _, m in sorted(coverage.rows.items()) if m.sender not in self.suppressed]
        unread = [m for m in visible if not m.read]
        pending = unread[-self.max_replay:] if self.max_replay > 0 else []
        if len(unread) > len(pending):
            signals.append(self.factory.signal(
                "replay_capped", self.persona, capped_to=self.max_replay, dropped=len(unread) - len(pending),
                ids=[m.id for m in unread[: len(unread) - len(pending)]], consumer=self.consumer))
        skipped_read = len(visible) - len(unread)
        beyond = last.withheld or bool(newest.unread_not_shown and not coverage.complete)
        if skipped_read or beyond:
            fields: dict[str, Any] = {"seeded": target, "skipped_read": skipped_read, "consumer": self.consumer}
            if newest.unread_not_shown:
                fields["unread_not_shown"] = newest.unread_not_shown
            if beyond:
                fields["reason"] = ("older mail beyond the first window was not replayed" if not coverage.pages else
                                    f"older mail beyond the {coverage.pages + 1} newest pages was not replayed"
                                    + (f" ({coverage.problem})" if coverage.problem else ""))
            signals.append(self.factory.signal("baseline_skipped", self.persona, **fields))
        # Read mail, capped mail and self-echo are accounted for without delivery (announced above), so a
        # cursor left below a message not taken yet never hands them over later.
        taken = {m.id for m in pending}
        accounted = [i for i in coverage.rows if i not in taken]
        return Pull(self, loaded, newest, coverage, signals, FIRST_CONTACT, pending, target, peek,
                    accounted=accounted, holder=holder)

    def _walk_for_unread(self, newest: InboxPage) -> tuple[Coverage, InboxPage]:
        """First contact: page back past the newest window until `max_replay` unread messages are seen, or
        all the unread the newest page admits to, or the chain ends (or lies, fails, or hits the budget).
        Returns what was seen and the last page read."""
        cov = Coverage(rows={m.id: m for m in newest.messages}, complete=True)
        page = newest

        def unread_seen() -> int:
            return sum(1 for m in cov.rows.values() if not m.read and m.sender not in self.suppressed)

        hidden = newest.unread_not_shown
        want = self.max_replay if hidden is None else min(self.max_replay, unread_seen() + hidden)
        while page.withheld and unread_seen() < want:
            if page.contradiction() is not None or page.oldest_id is None:
                cov.complete, cov.problem = False, f"the server's page contradicts itself ({page.contradiction()})"
                break
            if cov.pages >= self.page_budget:
                cov.complete, cov.problem = False, f"the backward walk hit its budget of {self.page_budget} pages"
                break
            try:
                older = self.client.inbox(self.persona, before_id=page.oldest_id)
            except ApiError as exc:
                cov.complete, cov.problem = False, f"a backward page failed ({exc})"
                break
            if older.contradiction() is not None or older.contradicts(cov.rows) is not None:
                cov.complete, cov.problem = False, f"the server's page before id {page.oldest_id} contradicts itself"
                break
            page = older
            cov.pages += 1
            for m in page.messages:
                cov.rows.setdefault(m.id, m)
            if self.progress is not None:
                self.progress(cov.pages, len(cov.rows))
        return cov, page

    def _cover(self, newest: InboxPage, cursor: int) -> Coverage:
        """Prove that the rows above `cursor` are all seen, walking backward while the server withheld rows.
        A lying newest window's rows are kept (the cursor pinned); nothing from a backward page that
        contradicts itself or an earlier page is (shared/design.md, "Untrustworthy answers")."""
        cov = Coverage()
        page = newest
        while True:
            contradiction = page.contradiction()
            if page.before_id is not None:
                contradiction = contradiction or page.contradicts(cov.rows)
                if contradiction is not None:
                    cov.problem = (f"the server's page before id {page.before_id} contradicts itself or an "
                                   f"earlier page ({contradiction}); nothing from it is delivered")
                    return cov
            for m in page.messages:
                if m.id > cursor:
                    cov.rows[m.id] = m
            if contradiction is not None:
                cov.problem = f"the server's newest page contradicts itself ({contradiction})"
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
            except ApiError as exc:  # an Untrustworthy one included: nothing from it is delivered
                cov.problem = f"a backward page failed ({exc})"
                return cov
            cov.pages += 1
            if self.progress is not None:
                self.progress(cov.pages, len(cov.rows))
