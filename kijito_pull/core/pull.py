"""One open pull of one cursor (`Pull`) and what a fetch proved (`Coverage`): the Kijito source's
`OpenPull` (core/source.py), planned by `core.engine.Engine.open`.

A pull holds the cursor's lock while it is open. Scripts hand over `pending` in order and `ack` each
as taken; an agent session (a `Holder`) records a hand-over with `hand_over` and acknowledges only what
its harness's record confirms (`confirm`); `refuse` counts refusals and parks poison mail. Every ack is
durable before the next message is handed over (one ack-journal record, or a save of the state), and
`finish` saves the final position: past everything taken, never past the first message not taken.
"""

from __future__ import annotations

import bisect
import datetime
import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kijito_pull.core import confirmations
from kijito_pull.core import pending as pending_mod
from kijito_pull.core.cursorfields import RECENT_LIMIT, fingerprint
from kijito_pull.core.models import InboxPage, Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.source import HoldingPull
from kijito_pull.core.state import CursorState, Loaded

if TYPE_CHECKING:
    from kijito_pull.core.engine import Engine

#: How a pull was planned (Pull.mode).
FIRST_CONTACT = "first_contact"
CORRUPT = "corrupt"
NORMAL = "normal"



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


class Pull(HoldingPull):
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

    def ack_all(self, messages: Iterable[Message]) -> None:
        """`ack` for several messages at once (one durable record)."""
        ids = {m.id for m in messages}
        # Hand-overs to a session confirmed now (a pending entry acknowledged): logged once saved, for `track`.
        holders = {i: e.holder or (self._holder.key if self._holder else "") for i in ids
                   if (e := self._entries.get(i)) is not None and (e.holder or self._holder)}
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
        if holders and not self._peek:
            confirmations.note(self._engine.store.path, holders)

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
        self._hold(messages)
        self._dirty = True
        self._persist(final=True)

    def _unhold(self, messages: list[Message], given_back: bool) -> None:
        for m in messages:
            entry = self._entries.get(m.id)
            if entry is not None:
                self._entries[m.id] = entry.released()
        if messages:
            self._dirty = True
        if given_back:
            self._persist(final=True)

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
