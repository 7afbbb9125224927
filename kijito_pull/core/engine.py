"""The pull engine: reconcile one cursor with the server and hand over only unseen mail, in id order.

The contract (docs/delivery.md): the cursor is a confirmed-contiguous watermark; it moves
only past mail the consumer took; a span above the cursor that the server withheld is walked backward
with `before_id` until the walk reaches the cursor; a walk that cannot complete pins the cursor,
remembers what was delivered above it and raises one alert. The engine is given its client and store,
so every entry point (CLI, hooks, watch loop) shares this one implementation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from kijito_pull.core import confirmations, directory
from kijito_pull.core import pending as pending_mod
from kijito_pull.core.cursorfields import fingerprint
from kijito_pull.core.models import ApiError, InboxPage, Message, Untrustworthy, message_at
from kijito_pull.core.pending import Holder
from kijito_pull.core.pull import CORRUPT, FIRST_CONTACT, NORMAL, Coverage, Pull, parked_record
from kijito_pull.core.source import Look, SignalFactory
from kijito_pull.core.state import EMPTY_CURSOR, CursorState, Loaded, StateError, StateStore
from kijito_pull.core.wake import KijitoWake

DEFAULT_MAX_REPLAY = 50
DEFAULT_PAGE_BUDGET = 1000
DEFAULT_LOCK_TIMEOUT = 5.0
DEFAULT_MAX_ATTEMPTS = 10  # refusals (or unconfirmed hand-overs) before a message is parked

#: What a pull does when the server's ids start over below the cursor (docs/delivery.md, "Server resets").
REPLAY = "replay"  # deliver the visible unread mail as on first contact and start the cursor again
PIN = "pin"  # keep the cursor pinned and alert until a person decides
RESET_POLICIES = (REPLAY, PIN)

class InboxSource(Protocol):
    """What the engine reads pages from (core.api.KijitoClient)."""

    def inbox(self, persona: str, before_id: int | None = None, limit: int | None = None) -> InboxPage:
        """The newest page, or with `before_id` the page of ids below it."""


class Engine:
    """The Kijito mail source (core/source.py's `MailSource`): one (API base, persona, consumer) cursor.

    `open()` locks the cursor file, reads the newest page, walks backward until the cursor is reached
    (or pins it) and plans what is unseen, as a `Pull`; `settle()` confirms or releases pending
    hand-overs outside a pull; `held_by()` lists a holder's; `look()`, `wake()` and `remarks()` are the
    waker's look, its long-poll and what a pull's silence may mean. The client and store are given, so the
    engine is tested without HTTP and every entry point shares it (docs/delivery.md).
    """

    def __init__(self, client: InboxSource, store: StateStore, signals: SignalFactory, *, persona: str,
                 consumer: str = "agent", max_replay: int = DEFAULT_MAX_REPLAY,
                 page_budget: int = DEFAULT_PAGE_BUDGET, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 suppress_authors: Iterable[str] = (), progress: Callable[[int, int], None] | None = None,
                 holder_alive: pending_mod.Liveness | None = pending_mod.process_alive,
                 max_handovers: int = pending_mod.DEFAULT_MAX_HANDOVERS, on_reset: str = "replay",
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, notify_client: Callable[[], Any] | None = None):
        self.client = client
        self.notify_client = notify_client  # makes the wake's own connection (None: it shares `client`)
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
            holders: dict[int, str] = {}
            for i in confirmed:
                if i > state.cursor:
                    above.add(i)
                entry = entries.pop(i, None)
                if entry is not None:
                    holders[i] = entry.holder or holder
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
            confirmations.note(self.store.path, holders)  # when, for `track` (core/confirmations.py)

    def held_by(self, holder: str) -> list[int]:
        """The ids pending with `holder` now (briefly under the lock; no request is sent)."""
        with self.store.locked(self.lock_timeout):
            state = self.store.load().state
        if state is None:
            return []
        return sorted(i for i, e in state.pending.items() if e.held_by(holder))

    def renew(self, holder: Holder) -> float | None:
        """None: a holder of a local cursor is on this machine, so its death is seen (its pid) and its
        ttl is the only other deadline; nothing to renew."""
        return None

    def unseen(self, exclude: Iterable[int] = ()) -> list[int]:
        """The ids unseen now, read under the lock (a pull under way is waited for); nothing changes."""
        skip = set(exclude)
        with self.store.locked(self.lock_timeout):
            with self.open(peek=True) as pull:
                return [m.id for m in pull.pending if m.id not in skip]

    # -- planning ----------------------------------------------------------------------------------

    def look(self, vouch: Callable[[list[str]], Any] | None = None) -> Look:
        """Unseen mail now, read under the cursor lock so a pull delivering right now is waited for; with
        nothing unseen, held, pinned or missing, `vouch(files)` of the cursor files under that lock."""
        with self.store.locked(self.lock_timeout):
            with self.open(peek=True) as pull:
                pending, pinned = list(pull.pending), pull.pinned
            state = self.store.load().state
            held = state is not None and any(e.holder is not None for e in state.pending.values())
            files = [str(self.store.path), str(self.store.journal)]
            quiet = vouch is not None and not (pending or pinned or held or state is None)
            return Look(pending, files, vouch(files) if quiet else None)

    def wake(self, hold: int, poll: float) -> KijitoWake:
        """The notify/pending long-poll for this persona, on a connection of its own where one can be made."""
        return KijitoWake(self.notify_client() if self.notify_client else self.client, self.persona,
                          hold=hold, poll=poll)

    def remarks(self, delivered: int) -> list[str]:
        """After a pull that delivered nothing to a cursor that never delivered anything (the one time a
        misspelt persona shows only as silence): the name the account's directory knows in another case,
        or that the directory does not list it at all (one `GET /api/personas`); else nothing."""
        if delivered:
            return []
        state = self.store.load().state
        if state is not None and state.cursor is not None and state.cursor >= 0:
            return []
        try:
            names = [p.persona for p in self.client.personas()]
        except (ApiError, AttributeError):
            return []  # the directory is advisory here; the pull itself succeeded
        found = directory.look_up(self.persona, names)
        if clause := found.variant_clause():
            return [f"warning: {self.persona} {clause}; use --persona {found.variants[0]}"]
        if clause := found.unlisted_clause():
            return [f"warning: {self.persona} {clause}"]
        return []

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
                    message = message_at(self.client, self.persona, ident)
                except ApiError:
                    continue  # tried again next pull
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
