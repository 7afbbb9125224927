"""Pending hand-overs (kijito_pull/core/pending.py) through the real Engine and StateStore: mail handed to
an agent session is held for it, not handed to another session, never passed by the cursor until
confirmed, and claimed back (unseen again, its count raised) when its holder is gone or late."""

from __future__ import annotations

import time

import pytest

from kijito_pull.core import pending
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.pending import Entry, Holder
from kijito_pull.core.pull import FIRST_CONTACT
from kijito_pull.core.sink import Sink
from kijito_pull.core.state import CursorState
from tests.core.test_engine import FakeInbox, engine, kinds, pull_once, saved

A = Holder("claude:session-a", ttl=600)
B = Holder("claude:session-b", ttl=600)


def hand(eng, holder, n=None):
    """Open a pull as `holder`, hand over the first `n` pending (all by default); returns their ids."""
    with eng.open(holder=holder) as pull:
        chosen = pull.pending if n is None else pull.pending[:n]
        pull.hand_over(chosen)
        return [m.id for m in chosen]


def test_a_hand_over_is_pending_not_acknowledged(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox(range(11, 16)), store, factory)
    assert hand(eng, A, 3) == [11, 12, 13]
    state = saved(store)
    assert state.cursor == 10  # nothing confirmed: the cursor has not moved
    assert sorted(state.pending) == [11, 12, 13]
    assert {e.holder for e in state.pending.values()} == {A.key}
    assert all(e.count == 1 and e.until > time.time() for e in state.pending.values())


def test_pending_mail_is_not_handed_to_another_session_nor_passed_by_the_cursor(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox(range(11, 16)), store, factory)
    hand(eng, A, 3)
    with eng.open(holder=B) as pull:
        assert [m.id for m in pull.pending] == [14, 15] and pull.held == []
        pull.hand_over(pull.pending)
    _, script = pull_once(eng)  # a script of the same consumer: nothing is free
    assert script == []
    assert saved(store).cursor == 10


def test_confirmed_hand_overs_move_the_cursor_the_rest_is_retaken(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox(range(11, 16)), store, factory)
    hand(eng, A, 3)
    with eng.open(holder=A) as pull:
        assert [m.id for m in pull.held] == [11, 12, 13]
        assert [m.id for m in pull.confirm([11, 13])] == [11, 13]
        assert [m.id for m in pull.retake()] == [12]
        assert [m.id for m in pull.pending] == [12, 14, 15]
    state = saved(store)
    assert state.cursor == 11 and state.delivered_above == [13]
    assert [(i, e.holder, e.count) for i, e in state.pending.items()] == [(12, None, 1)]  # unseen, count kept
    assert hand(eng, B) == [12, 14, 15]
    assert saved(store).pending[12].count == 2


def test_a_holder_that_is_gone_loses_its_hand_over_to_the_next_session(store, factory):
    store.save(CursorState(cursor=10))
    dead = Holder("claude:gone", pid=999_999, start="1", ttl=600)
    alive = {dead.key: False}
    eng = engine(FakeInbox(range(11, 13)), store, factory, holder_alive=lambda e: alive.get(e.holder))
    hand(eng, dead)
    assert hand(eng, B) == [11, 12]
    assert {e.holder for e in saved(store).pending.values()} == {B.key}


def test_a_hand_over_past_its_deadline_is_claimed_back(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11]), store, factory)
    hand(eng, Holder("claude:slow", ttl=0.05))
    assert hand(eng, B) == []
    time.sleep(0.1)
    assert hand(eng, B) == [11]


def test_repeated_failed_hand_overs_raise_one_alert_and_the_mail_stays_unseen(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11]), store, factory, max_handovers=3, holder_alive=lambda e: False)
    alerts = []
    for n in range(5):
        with eng.open(holder=Holder(f"claude:s{n}")) as pull:
            alerts.append(kinds(pull).count("alert"))
            assert [m.id for m in pull.pending] == [11]
            pull.hand_over(pull.pending)
    assert alerts == [0, 0, 0, 1, 1]  # claimed back with count 3, then 4: each claim-back past the limit says so
    assert saved(store).cursor == 10 and saved(store).pending[11].count == 5


def test_settle_outside_a_pull_confirms_and_releases_without_a_request(store, factory):
    store.save(CursorState(cursor=10))
    source = FakeInbox(range(11, 14))
    eng = engine(source, store, factory)
    hand(eng, A)
    calls = len(source.calls)
    eng.settle(A.key, confirmed=[11, 13], released=[12])
    assert len(source.calls) == calls
    state = saved(store)
    assert state.cursor == 10 and state.delivered_above == [11, 13]
    assert [(i, e.holder, e.count) for i, e in state.pending.items()] == [(12, None, 1)]
    _, again = pull_once(eng)
    assert again == [12]
    assert saved(store) == CursorState(cursor=13)


def test_settle_releases_only_the_holders_own_entries(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11]), store, factory)
    hand(eng, A)
    eng.settle(B.key, released=[11])
    assert saved(store).pending[11].holder == A.key


def test_pending_entries_survive_a_restart_and_bad_ones_mean_corrupt_state(store, factory):
    store.save(CursorState(cursor=10, pending={11: Entry("pi:1", 2, "2026-12-01T00:00:00Z", 1e12, 42, "7")}))
    assert saved(store).pending[11] == Entry("pi:1", 2, "2026-12-01T00:00:00Z", 1e12, 42, "7")
    text = store.path.read_text()
    for bad in ('"count": 2', '"holder": "pi:1"'):
        store.path.write_text(text.replace(bad, bad.split(":")[0] + ': -1' if "count" in bad else '"holder": 5'))
        assert store.load().corrupt_reason is not None
    store.path.write_text(text.replace('"11"', '"9"'))  # at or below the cursor
    assert "pending" in store.load().corrupt_reason


def test_first_contact_accounts_for_read_mail_it_passes(store, factory):
    """A first contact not all taken leaves the cursor below what it did not take; read mail above it was
    accounted for (announced), so a later pull hands over only unread mail."""
    source = FakeInbox([])
    source.add(1, 2, 4)
    source.add(3, read=True)
    pull, offered = pull_once(engine(source, store, factory), take={1})
    assert pull.mode == FIRST_CONTACT and offered == [1, 2, 4]
    assert saved(store) == CursorState(cursor=1, delivered_above=[3])
    _, later = pull_once(engine(source, store, factory))
    assert later == [2, 4]


@pytest.mark.parametrize("raw", [[], {"x": {}}, {"11": {"holder": None}}, {"11": {"holder": None, "count": True}}])
def test_pending_parser_rejects_malformed_entries(raw):
    with pytest.raises(ValueError):
        pending.parse(raw, 10)


def test_a_hand_over_no_session_ever_confirms_is_parked_at_max_attempts_and_later_mail_flows(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11, 12]), store, factory, max_attempts=3, holder_alive=lambda e: False)
    for n in range(3):
        assert hand(eng, Holder(f"claude:s{n}"), 1) == [11]
    with eng.open(holder=Holder("claude:s3")) as pull:
        assert [m.id for m in pull.pending] == [12]  # 11 is parked: the mail behind it flows
        assert any("parked" in s["reason"] for s in pull.signals if s["event"] == "alert")
        pull.hand_over(pull.pending)
    state = store.load().state
    assert state.cursor == 11 and state.parked[11]["attempts"] == 3 and 11 not in state.pending


def test_max_attempts_0_never_parks_a_refused_message(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11, 12]), store, factory, max_attempts=0)
    for _ in range(50):
        with eng.open() as pull:
            assert pull.refuse(pull.pending[0]) is None  # held: the consumer never sees 12 before 11
    state = store.load().state
    assert state.cursor == 10 and state.parked == {} and state.failures == {11: 50}


def test_a_refused_message_is_parked_at_exactly_max_attempts(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11, 12]), store, factory, max_attempts=3)
    results = []
    for _ in range(3):
        with eng.open() as pull:
            results.append(pull.refuse(pull.pending[0]))
    assert results[:2] == [None, None] and results[2]["event"] == "alert"
    with eng.open() as pull:
        assert [m.id for m in pull.pending] == [12]


class _Killed(BaseException):
    """Stands for a kill -9 of the consumer: nothing after it runs, the state stays as it was saved."""


class _DyingSession(Sink):
    """A holder sink (the pi child's kind): confirms each message it is given, and is killed while the
    message at `die_at` is being written."""

    def __init__(self, holder: Holder, die_at: int | None):
        self.holder = holder
        self.die_at = die_at
        self.shown: list[int] = []

    def deliver(self, event, message):
        self.shown.append(message.id)
        if message.id == self.die_at:
            raise _Killed
        return True


def test_a_batch_written_one_by_one_counts_only_what_was_written(store, factory):
    # Ten sessions killed while writing 12 of 11..15: 12 is the poison (parked); 13..15 were never
    # written, so they must not count against them, and the next session gets them (before the fix
    # each claim counted the whole batch, so 13..15 were parked too and lost to the consumer).
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11, 12, 13, 14, 15]), store, factory, max_attempts=10, holder_alive=lambda e: False)
    for n in range(10):
        session = _DyingSession(Holder(f"pi:s{n}"), die_at=12)
        with pytest.raises(_Killed):
            pull_through(eng, factory, session)
        assert session.shown == ([11, 12] if n == 0 else [12])
    counts = {i: e.count for i, e in store.load().state.pending.items()}
    assert counts == {12: 10, 13: 0, 14: 0, 15: 0}
    last = _DyingSession(Holder("pi:last"), die_at=None)
    report = pull_through(eng, factory, last)
    assert last.shown == [13, 14, 15] and report.delivered == [13, 14, 15]
    state = store.load().state
    assert sorted(state.parked) == [12] and not state.pending


def test_settle_counts_a_claimed_message_only_for_its_holder(store, factory):
    store.save(CursorState(cursor=10))
    eng = engine(FakeInbox([11, 12]), store, factory)
    with eng.open(holder=A) as pull:
        pull.hand_over(pull.pending, shown=[11])
    assert {i: e.count for i, e in store.load().state.pending.items()} == {11: 1, 12: 0}
    eng.settle(B.key, shown=[12])  # not B's
    assert store.load().state.pending[12].count == 0
    eng.settle(A.key, confirmed=[11], shown=[12])
    state = store.load().state
    assert state.pending[12].count == 1 and state.pending[12].held_by(A.key) and 11 not in state.pending
