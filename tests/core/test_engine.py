"""Unit tests of the pull engine (kijito_pull/core/engine.py) with an in-test inbox source and a real store.

The fake source implements the server's window rules (kijito-api.md §2.1.1): the newest rows that fit
a count limit, `truncated` + `next_before_id` = oldest returned id when older rows were withheld, and
`before_id` paging. Pages are built with `parse_inbox`, so the engine sees exactly what the client
would hand it.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from kijito_pull.core.engine import Engine
from kijito_pull.core.models import ApiError, InboxPage, Message, Untrustworthy, parse_inbox
from kijito_pull.core.pull import CORRUPT, FIRST_CONTACT, NORMAL
from kijito_pull.core.state import CursorState, StateStore

PERSONA = "testbot"
IDENTITY = {"api_base": "https://api.kijito.test", "persona": PERSONA, "consumer": "agent"}


class FakeInbox:
    """A windowed inbox. `ids` maps id -> (sender, read); every call is recorded as its before_id."""

    def __init__(self, ids, window: int = 50, fail_backward: bool = False):
        self.rows = {i: ("river", False) for i in ids} if not isinstance(ids, dict) else dict(ids)
        self.window = window
        self.fail_backward = fail_backward
        self.calls: list[int | None] = []
        self.newest_override: dict | None = None

    def add(self, *ids, sender="river", read=False):
        for i in ids:
            self.rows[i] = (sender, read)

    def inbox(self, persona, before_id=None, limit=None):
        assert persona == PERSONA
        self.calls.append(before_id)
        if before_id is not None and self.fail_backward:
            raise ApiError("/api/inbox: server error 503", status=503, transient=True)
        if before_id is None and self.newest_override is not None:
            return parse_inbox(self.newest_override, None)
        older = sorted(i for i in self.rows if before_id is None or i < before_id)
        page = older[-self.window:]
        withheld = len(older) > len(page)
        body = {
            "result": [{"id": i, "from": self.rows[i][0], "content": f"m{i}", "created": "2026-08-01T00:00:00Z",
                        "read": self.rows[i][1]} for i in reversed(page)],
            "truncated": withheld, "size_dropped": 0, "size_truncated": False,
            "next_before_id": page[0] if withheld else None,
            "unread_not_shown": 0,
        }
        return parse_inbox(body, before_id)


def engine(source, store, factory, **kw):
    return Engine(source, store, factory, persona=PERSONA, consumer="agent", lock_timeout=1.0, **kw)


def pull_once(eng, *, take=None, peek=False):
    """Open a pull, ack the pending messages whose ids are in `take` (all by default), in order."""
    with eng.open(peek=peek) as pull:
        pending = [m.id for m in pull.pending]
        for m in pull.pending:
            if take is None or m.id in take:
                pull.ack(m)
        return pull, pending


def kinds(pull):
    return [s["event"] for s in pull.signals]


def saved(store, *, recent: bool = False) -> CursorState:
    """The saved state; without its `recent` list unless asked (tests of the cursor's position compare
    whole states; tests of late-visible ids look at `recent`)."""
    loaded = store.load()
    assert loaded.corrupt_reason is None
    return loaded.state if recent else dataclasses.replace(loaded.state, recent={})


# -- steady state and acks ----------------------------------------------------------------------------

def test_complete_window_delivers_only_ids_above_the_cursor(store, factory):
    store.save(CursorState(cursor=10))
    source = FakeInbox(range(5, 14))
    pull, pending = pull_once(engine(source, store, factory))
    assert pending == [11, 12, 13]
    assert pull.mode == NORMAL and not pull.pinned and kinds(pull) == []
    assert saved(store) == CursorState(cursor=13)
    assert source.calls == [None]  # nothing withheld: no walk


def test_acks_move_the_watermark_to_just_below_the_first_unacked_message(store, factory):
    store.save(CursorState(cursor=10))
    source = FakeInbox([3, 11, 15, 20])  # gaps are other personas' ids
    eng = engine(source, store, factory)

    _, pending = pull_once(eng, take={11})
    assert pending == [11, 15, 20]
    assert saved(store) == CursorState(cursor=14)

    _, pending = pull_once(eng, take={20})  # out of order: 15 not taken
    assert pending == [15, 20]
    assert saved(store) == CursorState(cursor=14, delivered_above=[20])

    _, pending = pull_once(eng)
    assert pending == [15]  # 20 is not handed over twice
    assert saved(store) == CursorState(cursor=20)


def test_nothing_taken_leaves_the_cursor_and_the_file_alone(store, factory):
    store.save(CursorState(cursor=10))
    before = store.path.read_bytes()
    _, pending = pull_once(engine(FakeInbox([11, 12]), store, factory), take=set())
    assert pending == [11, 12]
    assert store.path.read_bytes() == before


def test_each_ack_is_durable_before_the_next_message(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11, 12, 13]), store, factory)
    seen = []
    with eng.open() as pull:
        for m in pull.pending:
            pull.ack(m)
            # What another process (or this one after a kill -9) reads now: the file plus its ack journal.
            after_a_kill = StateStore(store.path, store.lock_path, store.identity).load().state
            seen.append(sorted(i for i in (11, 12, 13)
                               if i <= after_a_kill.cursor or i in after_a_kill.delivered_above))
    assert seen == [[11], [11, 12], [11, 12, 13]]
    assert store.load().state.cursor == 13 and not store.journal.exists()  # folded in by the final save


def test_a_journal_from_an_older_state_is_not_replayed(store, factory):
    store.save(CursorState(cursor=10))
    store.load()
    assert store.journal_acks([11, 12])
    store.close_journal()
    stale = store.path.with_name("stale")
    stale.write_bytes(b"journal 2000-01-01T00:00:00+00:00\n11\n12\n")
    stale.rename(store.journal)
    assert store.load().state == CursorState(cursor=10)  # a journal of another state stamp: ignored


def test_own_mail_is_acknowledged_silently(store, factory):
    store.save(CursorState(cursor=10))
    source = FakeInbox([])
    source.add(11, sender=PERSONA)
    source.add(12)
    source.add(13, sender=PERSONA)
    _, pending = pull_once(engine(source, store, factory))
    assert pending == [12]
    assert saved(store).cursor == 13


def test_a_newest_page_failure_raises_and_changes_nothing(store, factory):
    store.save(CursorState(cursor=10))
    before = store.path.read_bytes()

    class Down:
        def inbox(self, persona, before_id=None, limit=None):
            raise ApiError("/api/inbox: connection failed (Connection refused)", transient=True)

    with pytest.raises(ApiError):
        with engine(Down(), store, factory).open():
            pytest.fail("a pull opened without a newest page")
    assert store.path.read_bytes() == before
    assert store.lock_holder() is None


# -- the backward walk --------------------------------------------------------------------------------

def test_a_withheld_span_above_the_cursor_is_walked_and_delivered_in_order(store, factory):
    store.save(CursorState(cursor=10))
    source = FakeInbox(range(1, 31), window=3)
    pull, pending = pull_once(engine(source, store, factory))
    assert pending == list(range(11, 31))
    assert not pull.pinned and pull.coverage.complete and kinds(pull) == []
    assert source.calls[0] is None and source.calls[1:] == [28, 25, 22, 19, 16, 13]
    assert saved(store) == CursorState(cursor=30)


def test_walk_budget_exhaustion_pins_with_one_alert_and_remembers_delivered_ids(store, factory):
    store.save(CursorState(cursor=10))
    source = FakeInbox(range(1, 31), window=3)
    eng = engine(source, store, factory, page_budget=2)

    pull, pending = pull_once(eng)
    assert pending == list(range(22, 31))  # newest page + 2 backward pages, all above the cursor
    assert pull.pinned and "budget" in pull.problem
    assert kinds(pull) == ["alert"]
    assert pull.signals[0]["cursor"] == 10 and "pinned" in pull.signals[0]["reason"]
    after = saved(store)
    assert after.cursor == 10  # never advanced over the unseen span 11..21
    assert after.delivered_above == list(range(22, 31))
    assert after.pin is not None and "budget" in after.pin["reason"]
    pin_since = after.pin["since"]

    # Still pinned: no second alert, nothing re-delivered, the pin keeps its start.
    pull, pending = pull_once(eng)
    assert pending == [] and pull.pinned and kinds(pull) == []
    assert saved(store).pin["since"] == pin_since

    # New mail while pinned is delivered once and remembered above the pin.
    source.add(31)
    pull, pending = pull_once(eng)
    assert pending == [31] and kinds(pull) == []
    assert saved(store) == CursorState(cursor=10, delivered_above=list(range(22, 32)), pin=after.pin)

    # A walk that completes releases the pin: the gap is delivered, nothing twice, one `recovered`.
    pull, pending = pull_once(engine(source, store, factory, page_budget=100))
    assert pending == list(range(11, 22))
    assert kinds(pull) == ["recovered"] and not pull.pinned
    assert saved(store) == CursorState(cursor=31)


def test_pin_is_kept_even_when_the_consumer_takes_nothing(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox(range(1, 31), window=3), store, factory, page_budget=1)
    pull, _ = pull_once(eng, take=set())
    assert kinds(pull) == ["alert"]
    assert saved(store).pin is not None and saved(store).delivered_above == []
    pull, pending = pull_once(eng, take=set())
    assert kinds(pull) == []  # the alert is not repeated on every pull
    assert pending == list(range(25, 31))  # nothing taken: handed over again


def test_partially_taken_pinned_pull_remembers_only_what_was_taken(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox(range(1, 31), window=3), store, factory, page_budget=1)
    _, pending = pull_once(eng, take={25, 26})
    assert pending == list(range(25, 31))
    assert saved(store).delivered_above == [25, 26] and saved(store).cursor == 10
    _, pending = pull_once(eng)
    assert pending == [27, 28, 29, 30]


def test_a_failed_backward_page_pins(store, factory):
    store.save(CursorState(cursor=10))
    source = FakeInbox(range(1, 31), window=3, fail_backward=True)
    eng = engine(source, store, factory)
    pull, pending = pull_once(eng)
    assert source.calls == [None, 28]
    assert pending == [28, 29, 30]
    assert pull.pinned and "backward page failed" in pull.problem
    assert kinds(pull) == ["alert"]
    after = saved(store)
    assert after.cursor == 10 and after.delivered_above == [28, 29, 30]
    assert "backward page failed" in after.pin["reason"]

    pull, pending = pull_once(eng)
    assert pending == [] and kinds(pull) == [] and pull.pinned

    source.fail_backward = False
    pull, pending = pull_once(eng)
    assert pending == list(range(11, 28)) and kinds(pull) == ["recovered"]
    assert saved(store) == CursorState(cursor=30)


@pytest.mark.parametrize("declared", [
    {"truncated": True, "next_before_id": None},  # withheld, but no continuation
    {"truncated": False, "size_dropped": 0, "next_before_id": 20},  # nothing withheld, but a continuation
    {"truncated": True, "next_before_id": 19},  # continuation below the oldest id: would skip 19..20
    {"truncated": True},  # continuation absent: no answer
], ids=["withheld-null", "nothing-withheld-int", "skipping-continuation", "absent"])
def test_a_contradictory_newest_page_pins_and_never_advances(store, factory, declared):
    store.save(CursorState(cursor=10))
    source = FakeInbox(range(1, 31))
    source.newest_override = {
        "result": [{"id": i, "from": "river", "content": "x", "created": "", "read": False} for i in (20, 21)],
        **declared}
    pull, pending = pull_once(engine(source, store, factory))
    assert pull.pinned and "contradicts" in pull.problem
    assert kinds(pull) == ["alert"]
    assert source.calls == [None]  # a lying page is not followed
    assert pending == [20, 21]
    assert saved(store).cursor == 10 and saved(store).delivered_above == [20, 21]


def test_a_backward_page_returning_ids_at_or_above_before_id_pins(store, factory):
    store.save(CursorState(cursor=10))

    class Repeating(FakeInbox):
        def inbox(self, persona, before_id=None, limit=None):
            if before_id is not None:
                self.calls.append(before_id)
                return parse_inbox({"result": [{"id": before_id, "from": "river", "content": "x",
                                                "created": "", "read": False}],
                                    "truncated": True, "next_before_id": before_id}, before_id)
            return super().inbox(persona, before_id, limit)

    source = Repeating(range(1, 31), window=3)
    pull, _ = pull_once(engine(source, store, factory))
    assert pull.pinned and kinds(pull) == ["alert"]
    assert source.calls == [None, 28]  # it does not loop on a non-advancing page
    assert saved(store).cursor == 10


# -- peek ----------------------------------------------------------------------------------------------

def test_peek_writes_nothing(store, factory):
    store.save(CursorState(cursor=10))
    before = (store.path.read_bytes(), os.stat(store.path).st_mtime_ns)
    source = FakeInbox(range(1, 31), window=3)
    pull, pending = pull_once(engine(source, store, factory), peek=True)
    assert pending == list(range(11, 31))
    assert (store.path.read_bytes(), os.stat(store.path).st_mtime_ns) == before
    pull, _ = pull_once(engine(source, store, factory, page_budget=1), peek=True)  # would pin
    assert pull.pinned
    assert (store.path.read_bytes(), os.stat(store.path).st_mtime_ns) == before
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["c.json"]


def test_peek_on_first_contact_leaves_the_state_absent(store, factory):
    _, pending = pull_once(engine(FakeInbox([1, 2, 3]), store, factory), peek=True)
    assert pending == [1, 2, 3]
    assert store.load().absent
    assert not store.path.parent.exists() or list(store.path.parent.iterdir()) == []


# -- first contact and corrupt state ---------------------------------------------------------------------

def test_first_contact_delivers_visible_unread_and_baselines(store, factory):
    source = FakeInbox([])
    source.add(3, 5)
    source.add(4, read=True)
    pull, pending = pull_once(engine(source, store, factory))
    assert pull.mode == FIRST_CONTACT and pending == [3, 5]
    assert "baseline_skipped" in kinds(pull)
    assert saved(store) == CursorState(cursor=5)


def test_first_contact_not_taken_stays_first_contact(store, factory):
    _, pending = pull_once(engine(FakeInbox([1, 2]), store, factory), take=set())
    assert pending == [1, 2]
    assert store.load().absent


def test_first_contact_replay_is_capped_and_announced(store, factory):
    pull, pending = pull_once(engine(FakeInbox(range(1, 11)), store, factory, max_replay=3))
    assert pending == [8, 9, 10]
    capped = [s for s in pull.signals if s["event"] == "replay_capped"]
    assert len(capped) == 1 and capped[0]["dropped"] == 7
    assert saved(store).cursor == 10


def test_corrupt_state_redelivers_what_is_visible_and_repairs(store, factory):
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"schema": 1, "cursor": ')
    source = FakeInbox([])
    source.add(7, read=True)
    source.add(8)
    pull, pending = pull_once(engine(source, store, factory))
    assert pull.mode == CORRUPT and pending == [7, 8]  # fail closed: read mail too
    assert kinds(pull) == ["state_corrupt"]
    assert saved(store) == CursorState(cursor=8)


def test_the_lock_is_held_during_a_pull(store, factory):
    store.save(CursorState(cursor=10))
    with engine(FakeInbox([11]), store, factory).open():
        assert store.lock_holder() == os.getpid()
    assert store.lock_holder() is None


def test_an_empty_inbox_is_recorded_below_every_id(store, factory):
    """An empty inbox must not baseline over a new account's first message (the lowest id the contract
    accepts is 1; the empty cursor, -1, stays below it as it was when id 0 was believed)."""
    source = FakeInbox([])
    eng = engine(source, store, factory)
    pull_once(eng)
    assert saved(store).cursor == -1
    source.add(1, 2)
    _, pending = pull_once(eng)
    assert pending == [1, 2]
    assert saved(store).cursor == 2


def _count_syncs(monkeypatch) -> list[str]:
    import kijito_pull.core.state as state_module

    calls: list[str] = []
    real_fsync, real_datasync = state_module.os.fsync, state_module.os.fdatasync
    monkeypatch.setattr(state_module.os, "fsync", lambda fd: (calls.append("file"), real_fsync(fd))[1])
    monkeypatch.setattr(state_module.os, "fdatasync", lambda fd: (calls.append("ack"), real_datasync(fd))[1])
    monkeypatch.setattr(state_module, "_fsync_dir", lambda p: calls.append("dir"))
    return calls


def test_each_ack_is_one_journal_record_synced_and_the_state_is_written_once(store, factory, monkeypatch):
    """Each ack is durable before the next message (one record appended to the ack journal and
    fdatasynced; the journal's own directory entry synced once when it is made); the state file is
    written, fsynced and its directory synced once, at the last ack of the pull (which needs no record)."""
    store.save(CursorState(cursor=10))
    calls = _count_syncs(monkeypatch)
    pull_once(engine(FakeInbox(range(5, 16)), store, factory))
    assert calls == ["ack", "dir"] + ["ack"] * 4 + ["file", "dir"], repr(calls)
    assert saved(store).cursor == 15 and not store.journal.exists()


def test_a_pull_of_one_message_saves_the_state_once_and_opens_no_journal(store, factory, monkeypatch):
    """A watch's wake: the one ack is the state file written, fsynced and its directory synced, before
    the pull ends; no journal is made (nothing would follow it)."""
    store.save(CursorState(cursor=10))
    made = []
    real_open = store._open_journal
    monkeypatch.setattr(store, "_open_journal", lambda: (made.append(1), real_open())[1])
    calls = _count_syncs(monkeypatch)
    eng = engine(FakeInbox([11]), store, factory)
    with eng.open() as pull:
        [message] = pull.pending
        pull.ack(message)
        assert calls == ["file", "dir"]  # durable at the ack, before anything else is handed over
        assert saved(store).cursor == 11
    assert calls == ["file", "dir"] and not made and not store.journal.exists()
    assert pull_once(eng)[1] == []


# -- what servers do: late-visible ids, resets ------------------------------------------------------------

def test_a_late_visible_id_in_the_trailing_window_is_delivered_once(store, factory):
    source = FakeInbox([1, 2, 4])
    eng = engine(source, store, factory)
    assert pull_once(eng)[1] == [1, 2, 4]
    assert sorted(saved(store, recent=True).recent) == [1, 2, 4]
    source.add(3)  # taken before 4, visible only now
    pull, pending = pull_once(eng)
    assert pending == [3] and saved(store, recent=True).cursor == 4
    assert pull_once(eng)[1] == []


def test_a_late_id_older_than_the_remembered_window_is_not_guessed_at(store, factory, monkeypatch):
    from kijito_pull.core import pull as engine_mod  # Pull._recent keeps the newest RECENT_LIMIT

    monkeypatch.setattr(engine_mod, "RECENT_LIMIT", 2)
    source = FakeInbox([1, 2, 5, 6])
    eng = engine(source, store, factory)
    pull_once(eng)
    assert sorted(saved(store, recent=True).recent) == [5, 6]  # the bound: the newest RECENT_LIMIT ids
    source.add(3)
    assert pull_once(eng)[1] == []  # below the window: documented as out of reach


def test_a_deleted_newest_message_is_not_a_reset(store, factory):
    source = FakeInbox([1, 2, 3])
    eng = engine(source, store, factory)
    pull_once(eng)
    del source.rows[3]
    pull, pending = pull_once(eng)
    assert pending == [] and kinds(pull) == [] and not pull.pinned
    assert saved(store).cursor == 3


def test_a_replayed_journal_is_saved_before_a_new_one_replaces_it(store, factory):
    """A pull that starts from a journal a killed pull left must fold it into the state file before its
    own first ack opens a new journal (which truncates the file): else a second kill forgets the first
    pull's acks and they come again."""
    store.save(CursorState(cursor=10))
    store.load()
    assert store.journal_acks([11, 12])  # the killed pull's acks (it never saved)
    store._journal_fd = None  # killed: nothing closed
    killed_twice = StateStore(store.path, store.lock_path, store.identity)
    eng = engine(FakeInbox(range(11, 15)), killed_twice, factory)
    with eng.open() as pull:
        assert [m.id for m in pull.pending] == [13, 14]
        pull.ack(pull.pending[0])
        fresh = StateStore(store.path, store.lock_path, store.identity).load().state  # a second kill here
        assert {11, 12, 13} <= set(fresh.delivered_above) | set(range(fresh.cursor + 1))


# -- untrustworthy answers deliver nothing (issue 23, items 1-3) ----------------------------------------


def _row(i, content="x"):
    return {"id": i, "from": "river", "content": content, "created": "", "read": False}


@pytest.mark.parametrize("forged", ["another body", "x"], ids=["different-body", "same-body"])
def test_nothing_from_a_backward_page_that_contradicts_itself_is_delivered(store, factory, forged):
    """Issue 23, item 2: the backward page hands back id 22, which the newest page has (and which is not below
    its before_id), and an older id 15. It is rejected as a whole: 22 is delivered with the newest page's
    body, 15 not at all (it comes once a trustworthy walk reaches it)."""
    store.save(CursorState(cursor=10))

    class Contradicting(FakeInbox):
        lying = True

        def inbox(self, persona, before_id=None, limit=None):
            if before_id is not None and self.lying:
                self.calls.append(before_id)
                return parse_inbox({"result": [_row(15), _row(22, forged)], "truncated": True,
                                    "next_before_id": 15}, before_id)
            return super().inbox(persona, before_id, limit)

    source = Contradicting(range(11, 25), window=3)  # newest page: 22, 23, 24
    eng = engine(source, store, factory)
    with eng.open() as pull:
        bodies = {m.id: m.content for m in pull.pending}
        for m in pull.pending:
            pull.ack(m)
    assert bodies == {22: "m22", 23: "m23", 24: "m24"}
    assert pull.pinned and "nothing from it is delivered" in pull.problem and kinds(pull) == ["alert"]
    assert saved(store).cursor == 10 and saved(store).delivered_above == [22, 23, 24]
    source.lying = False
    pull, pending = pull_once(eng)
    assert pending == list(range(11, 22)) and kinds(pull) == ["recovered"]
    assert saved(store).cursor == 24


def test_a_backward_page_that_contradicts_an_earlier_page_is_rejected(store, factory):
    """The same id with another message on two pages of one walk: the later page is not believed."""
    store.save(CursorState(cursor=10))
    newest = {"result": [_row(20, "real"), _row(21)], "truncated": True, "next_before_id": 20}
    pages = {None: newest, 20: {"result": [_row(20, "forged")], "truncated": True, "next_before_id": 20}}
    page = InboxPage(messages=(Message(20, "river", "forged", "", False),), omission=1, continuation=20,
                     size_truncated=False, unread_not_shown=None, before_id=25)
    assert page.contradiction() is None and "differs" in page.contradicts({20: Message(20, "river", "real", "",
                                                                                           False)})
    source = FakeInbox([])
    source.inbox = lambda persona, before_id=None, limit=None: parse_inbox(pages[before_id], before_id)
    pull, pending = pull_once(engine(source, store, factory))
    assert pending == [20, 21] and pull.pinned


@pytest.mark.parametrize("bad", [
    {"result": [_row(11), _row(2**63)], "truncated": False, "next_before_id": None},
    {"result": [_row(11), _row(10**20)], "truncated": False, "next_before_id": None},
    {"result": [{**_row(11), "persona": "mallory"}], "persona": "mallory", "truncated": False,
     "next_before_id": None},
], ids=["id-2**63", "id-10**20", "persona-mallory"])
def test_an_untrustworthy_newest_page_delivers_nothing_pins_once_and_recovers(store, factory, bad):
    """Issue 23, items 1 and 3: nothing from the answer is delivered (not even its believable rows), the
    cursor stays, one alert across pulls; a trustworthy answer later delivers everything, in order."""
    store.save(CursorState(cursor=10))

    class Hostile(FakeInbox):
        hostile = True

        def inbox(self, persona, before_id=None, limit=None):
            if self.hostile:
                self.calls.append(before_id)
                return parse_inbox(bad, before_id, persona)
            return super().inbox(persona, before_id, limit)

    source = Hostile(range(11, 14))
    eng = engine(source, store, factory)
    for alerts in (["alert"], []):
        pull, pending = pull_once(eng)
        assert pending == [] and pull.pinned and kinds(pull) == alerts
        assert "not believed (untrustworthy answer" in pull.problem
        assert saved(store).cursor == 10 and saved(store).delivered_above == []
    source.hostile = False
    pull, pending = pull_once(eng)
    assert pending == [11, 12, 13] and kinds(pull) == ["recovered"]
    assert store.load().corrupt_reason is None and saved(store).cursor == 13


def test_an_untrustworthy_first_answer_fails_the_pull_and_writes_nothing(store, factory):
    """No cursor to pin: the pull fails saying why, and no baseline is written over mail never seen."""
    source = FakeInbox([])
    source.inbox = lambda persona, before_id=None, limit=None: parse_inbox(
        {"result": [_row(5), _row(2**63)], "next_before_id": None}, before_id, persona)
    with pytest.raises(Untrustworthy, match="outside the contract's range"):
        pull_once(engine(source, store, factory))
    assert store.load().absent
