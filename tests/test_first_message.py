"""A new account's first message is id 0 (Kijito's ids start at 0), and every entry point delivers it once.

The regression: ids were checked against 1..2**63-1, so the page holding id 0 was "not believed", the cursor
pinned and the first message (and everything after it on that page) was never delivered. Each test starts on
a new sandbox account (its first message is id 0, as Kijito's), makes first contact on the empty inbox (its
cursor then sits below 0, at -1), sends ids 0 and 1 and checks the entry point hands both over exactly once.
The Redis relay's test is in tests/redis/test_first_message_redis.py.
"""

from __future__ import annotations

import json

import pytest

from kijito_pull.core.models import ApiError, Untrustworthy, parse_inbox
from kijito_pull.core.state import EMPTY_CURSOR
from tests.clirunner import Cli
from tests.entrypoints import STOP, System, hook_ids
from tests.watchrunner import WatchProc

TOKEN = "first-message-token-5c1e"
PERSONA = "newbie"


def cursor_of(cli: Cli, persona: str = PERSONA) -> int | None:
    rows = [json.loads(line) for line in cli("status", "--json", "--persona", persona).stdout.splitlines() if line]
    assert len(rows) == 1, rows
    return rows[0]["cursor"]


def test_the_sandbox_numbers_a_new_accounts_first_message_0_as_kijito_does(sb, cli):
    sent = cli("send", "--to", PERSONA, "--from", "loom", "hello")
    assert sent.code == 0, sent.stderr
    assert "sent message 0" in sent.stdout
    assert sb.send(PERSONA, "loom", "second") == 1


def test_once_delivers_message_0_once_after_first_contact_on_an_empty_inbox(sb, cli):
    empty = cli("--once", "--json", "--persona", PERSONA)
    assert empty.code == 0 and empty.new_ids == [], empty.stderr
    assert cursor_of(cli) == EMPTY_CURSOR == -1  # below 0: the first message is above it
    first, second = sb.send(PERSONA, "loom", "first ever"), sb.send(PERSONA, "loom", "second")
    assert (first, second) == (0, 1)
    got = cli("--once", "--json", "--persona", PERSONA)
    assert got.code == 0, got.stderr
    assert got.new_ids == [0, 1]
    assert got.of_kind("alert") == []
    assert cursor_of(cli) == 1
    again = cli("--once", "--json", "--persona", PERSONA)
    assert again.code == 0 and again.new_ids == []


def test_first_contact_with_message_0_already_waiting_delivers_it(sb, cli):
    assert sb.send(PERSONA, "loom", "waiting") == 0
    got = cli("--once", "--json", "--persona", PERSONA)
    assert got.code == 0, got.stderr
    assert got.new_ids == [0]
    assert cursor_of(cli) == 0
    assert cli("--once", "--json", "--persona", PERSONA).new_ids == []


def test_watch_delivers_message_0_once(sb, cli):
    w = WatchProc(cli, "--persona", PERSONA)
    try:
        armed = w.wait_for(lambda e: e["event"] == "armed", timeout=20)
        assert armed["cursor"] is None
        sb.send(PERSONA, "loom", "first ever")
        sb.send(PERSONA, "loom", "second")
        w.new("second", timeout=20)
        w.drain(1.0)
        assert w.stop() == 0
    finally:
        w.kill()
    assert [e["id"] for e in w.events if e["event"] == "new"] == [0, 1]
    assert [e for e in w.events if e["event"] == "alert"] == []


def test_claude_stop_hook_hands_message_0_over_once(sb, tmp_path):
    system = System(sb.url, sb.token, tmp_path, PERSONA)
    empty = system.run_hook(STOP)
    assert empty.code == 0 and hook_ids(empty.stdout) == [], empty.stderr
    sb.send(PERSONA, "loom", "first ever")
    sb.send(PERSONA, "loom", "second")
    blocked = system.run_hook(STOP)
    assert blocked.code == 0, blocked.stderr
    assert hook_ids(blocked.stdout, [0, 1]) == [0, 1]
    # the same session's next stop: the hand-over is pending for it, not handed over a second time
    again = system.run_hook(STOP)
    assert again.code == 0 and hook_ids(again.stdout, [0, 1]) == [], again.stdout


def test_mark_read_marks_message_0_read_so_a_fresh_runner_is_not_handed_it(sb, tmp_path):
    runner = Cli(sb.url, sb.token, tmp_path / "runner-1")
    assert runner("--once", "--json", "--mark-read", "--persona", PERSONA).new_ids == []
    sb.send(PERSONA, "loom", "first ever")
    got = runner("--once", "--json", "--mark-read", "--persona", PERSONA)
    assert got.code == 0, got.stderr
    assert got.new_ids == [0]
    assert [m["read"] for m in sb.store.messages(PERSONA)] == [True]
    fresh = Cli(sb.url, sb.token, tmp_path / "runner-2")  # a new CI container: no cursor
    assert fresh("--once", "--json", "--mark-read", "--persona", PERSONA).new_ids == []


def _page(mid: object) -> dict:
    return {"result": [{"id": mid, "from": "a", "content": "x", "created": "2026-12-04T00:00:00Z", "read": False}],
            "truncated": False, "size_dropped": 0, "next_before_id": None, "unread_not_shown": 0}


def test_id_0_is_in_the_contract_and_ids_outside_0_to_2_63_minus_1_are_still_refused():
    assert [m.id for m in parse_inbox(_page(0)).messages] == [0]
    assert [m.id for m in parse_inbox(_page(2**63 - 1)).messages] == [2**63 - 1]
    for bad in (-1, 2**63):
        with pytest.raises(Untrustworthy, match="outside the contract's range 0.."):
            parse_inbox(_page(bad))
    with pytest.raises(ApiError, match="not an integer"):
        parse_inbox(_page(True))
