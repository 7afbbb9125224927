"""The board's own reasoning (dashboard/board.py), on the rows core/overview.py makes: what counts as a wake,
from two reads of one cursor and the notify answers between them, and which logged confirmations it shows."""

from __future__ import annotations

import json

from kijito_pull.core.models import NotifyResult, PendingCount
from kijito_pull.dashboard.board import Board, iso

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


def test_message_0_handed_over_then_confirmed_is_one_wake():
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
    [wake] = snap(board)["wakes"]["rows"]  # the confirmation moved the cursor: no second wake
    assert wake["how"] == "hand-over" and wake["seconds"] == 0.2


def logged(ident, at, api_base=BASE, consumer="agent"):  # noqa: ANN001, ANN201
    return {"persona": "river", "consumer": consumer, "api_base": api_base, "id": ident, "holder": "claude:s1",
            "at": iso(at)}


def test_confirmations_are_the_logs_of_this_account_and_consumer_in_the_last_hour_never_a_guess():
    clock = Clock()
    board = Board(BASE, consumer="agent", clock=clock)
    board.cursors([row(4, held=[5, 6])])
    board.cursors([row(6)])  # 5 and 6 left the pending list, the cursor passed them: no log says confirmed
    assert snap(board)["confirmations"] == {"last_hour": 0, "rows": []}
    board.confirmations([logged(5, clock.now - 10), logged(6, clock.now - 5), logged(7, clock.now - 4000),
                         logged(8, clock.now, api_base="http://elsewhere"), logged(9, clock.now, consumer="ci")])
    s = snap(board)["confirmations"]
    assert [(c["id"], c["holder"]) for c in s["rows"]] == [(6, "claude:s1"), (5, "claude:s1")]  # newest first
    assert s["last_hour"] == 2 and "api_base" not in s["rows"][0]


def test_a_parked_hand_over_is_shown_parked():
    board = Board(BASE, clock=Clock())
    board.cursors([row(4, held=[5, 6])])
    board.cursors([row(4, parked=[5])])  # 5 parked, 6 released (the holder gone)
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
