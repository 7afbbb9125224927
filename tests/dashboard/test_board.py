"""The board's own reasoning (dashboard/board.py), on the rows core/overview.py makes: what counts as a
confirmation and as a wake, from two reads of one cursor and the notify answers between them."""

from __future__ import annotations

import json

from kijito_pull.core.models import NotifyResult, PendingCount
from kijito_pull.dashboard.board import Board

BASE = "http://127.0.0.1:9"


def row(cursor, held=(), parked=(), since="2026-12-04T10:00:00Z"):  # noqa: ANN001, ANN201
    return {"api_base": BASE, "persona": "river", "consumer": "agent", "file": "/s/river.json", "status": "ok",
            "cursor": cursor, "delivered_above": 0, "pin": None, "restored": None, "lock": "free",
            "pending": [{"holder": "claude:s1", "ids": list(held), "since": since, "until": 1.0, "handovers": 1}]
            if held else [], "parked": [{"id": i, "since": since, "attempts": 3, "reason": "x", "retry": False}
                                        for i in parked]}


def counts(n: int) -> NotifyResult:
    return NotifyResult((PendingCount("river", n, 0),), "c_1")


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


def snap(board: Board) -> dict:
    return json.loads(board.current()[1])


def test_message_0_handed_over_then_confirmed_is_one_wake_and_one_confirmation():
    clock = Clock()
    board = Board(BASE, clock=clock)
    board.counts(counts(0), True)
    board.cursors([row(None)])
    clock.now += 1
    board.counts(counts(1), True)  # message 0 announced
    clock.now += 0.25
    board.cursors([row(None, held=[0])], {"/s/river.json": clock.now - 0.05})
    clock.now += 5
    board.cursors([row(0)], {"/s/river.json": clock.now})  # confirmed: the cursor moved onto it
    s = snap(board)
    assert [(c["id"], c["holder"]) for c in s["confirmations"]["rows"]] == [(0, "claude:s1")]
    assert s["confirmations"]["recorded"] == "observed"
    [wake] = s["wakes"]["rows"]  # the confirmation moved the cursor: no second wake
    assert wake["how"] == "hand-over" and wake["seconds"] == 0.2


def test_a_hand_over_given_back_or_parked_is_not_a_confirmation():
    board = Board(BASE, clock=Clock())
    board.cursors([row(4, held=[5, 6])])
    board.cursors([row(4, parked=[5])])  # 5 parked, 6 released (the holder gone): neither confirmed
    assert snap(board)["confirmations"]["rows"] == []
    assert snap(board)["parked"][0]["id"] == 5


def test_kijito_down_keeps_the_last_counts_and_says_why():
    board = Board(BASE, clock=Clock())
    board.counts(counts(3), True)
    board.kijito_failed(RuntimeError("/api/notify/pending: connection failed (Connection refused)"))
    s = snap(board)
    assert s["kijito"]["state"] == "down" and "Connection refused" in s["kijito"]["error"]
    assert s["personas"][0]["unread"] == 3


def test_relay_lag_runs_from_kijito_announcing_mail_to_the_stream_holding_it():
    clock = Clock()
    board = Board(BASE, source="redis://127.0.0.1:6379/0", clock=clock)
    board.counts(counts(0), True)
    board.groups([], {"river": "0-0"})
    clock.now += 1
    board.counts(counts(1), True)  # announced; not in the stream yet
    clock.now += 3
    board.groups([], {"river": f"{int((clock.now - 4) * 1000)}-0"})  # an older entry: still behind
    [relay] = snap(board)["redis"]["relay"]
    assert relay["behind_since"] is not None and relay["last_lag"] is None
    board.groups([{"persona": "river", "source": "redis", "group": "ci", "lag": 1, "pending": 0, "holders": {}}],
                 {"river": f"{int((clock.now - 2.5) * 1000)}-0"})  # appended 0.5 s after the announcement
    [relay] = snap(board)["redis"]["relay"]
    assert relay["behind_since"] is None and abs(relay["last_lag"] - 0.5) < 0.01
    assert snap(board)["redis"]["groups"][0]["lag"] == 1
