"""The sandbox server over real HTTP: window semantics, long-poll, directory, send, auth, faults, CLI."""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import requests

from kijito_pull.cli import sandbox_cmd
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.sandbox import Sandbox

TOKEN = "test-token"
UA = "kijito-pull-tests/1"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "User-Agent": UA}
REPO = Path(__file__).resolve().parents[2]


def get(sb, path, params=None, headers=None, timeout=5, **kw):
    return requests.get(sb.url + path, params=params, headers=HEADERS if headers is None else headers,
                        timeout=timeout, allow_redirects=False, **kw)


def inbox(sb, persona="P", **params):
    query = {"persona": persona, "mark_read": "false"}
    query.update({k: v for k, v in params.items() if v is not None})
    r = get(sb, "/api/inbox", query)
    assert r.status_code == 200, r.text
    return r.json()


def fill(sb, n, persona="P", content="m{}", sender="Q"):
    return [sb.send(to=persona, sender=sender, content=content.format(i)) for i in range(n)]


@pytest.fixture
def small():
    """A sandbox with a window of 3 rows and 10 bytes, for window arithmetic."""
    with Sandbox(token=TOKEN, window_limit=3, content_budget=10) as sb:
        yield sb


# -- inbox window ----------------------------------------------------------------------------------


def test_count_window_declares_truncation_and_continuation(small):
    ids = fill(small, 5)
    env = inbox(small)
    assert list(env) == ["result", "truncated", "size_dropped", "size_truncated", "next_before_id",
                         "unread_not_shown"]
    assert [r["id"] for r in env["result"]] == ids[-3:]
    assert env["truncated"] is True and env["size_dropped"] == 0 and env["size_truncated"] is False
    assert env["next_before_id"] == ids[2]
    row = env["result"][0]
    assert list(row) == ["id", "from", "content", "created", "read"]
    assert row["from"] == "Q" and row["content"] == "m2" and row["read"] is False
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", row["created"])


def test_window_that_exhausts_the_mailbox_declares_nothing(small):
    ids = fill(small, 3)
    env = inbox(small)
    assert [r["id"] for r in env["result"]] == ids
    assert env["truncated"] is False and env["size_dropped"] == 0
    assert "next_before_id" in env and env["next_before_id"] is None
    assert inbox(small, persona="nobody") == {"result": [], "truncated": False, "size_dropped": 0,
                                              "size_truncated": False, "next_before_id": None,
                                              "unread_not_shown": 0}


def test_content_budget_counts_utf8_bytes_and_size_dropped_is_exact(sandbox):
    sandbox.set_window(limit=10, content_budget=10)
    ids = fill(sandbox, 5, content="é{}")  # 3 bytes each ("é" is 2 bytes), 2 characters
    env = inbox(sandbox)
    assert [r["id"] for r in env["result"]] == ids[-3:]  # 9 bytes fit, a 4th would be 12
    assert env["size_dropped"] == 2  # both remaining rows, the count limit had room for 7 more
    assert env["truncated"] is False
    assert env["next_before_id"] == ids[2]


def test_size_dropped_is_capped_by_the_count_limit_and_the_rest_is_truncated(sandbox):
    sandbox.set_window(limit=4, content_budget=10)
    ids = fill(sandbox, 8, content="abcd")  # 4 bytes each: two fit
    env = inbox(sandbox)
    assert [r["id"] for r in env["result"]] == ids[-2:]
    assert env["size_dropped"] == 2  # limit 4 - 2 shown
    assert env["truncated"] is True  # 4 more behind those, withheld by count
    assert env["next_before_id"] == ids[-2]
    assert env["size_truncated"] is False


def test_lone_oversized_message_is_clipped_not_withheld(sandbox):
    sandbox.set_window(limit=5, content_budget=5)
    mid = sandbox.send(to="P", sender="Q", content="ééééééé")  # 14 bytes
    env = inbox(sandbox)
    assert [r["id"] for r in env["result"]] == [mid]
    assert env["result"][0]["content"] == "éé"  # clipped at a character boundary within 5 bytes
    assert env["size_truncated"] is True
    assert env["size_dropped"] == 0 and env["truncated"] is False and env["next_before_id"] is None


def test_clipped_newest_row_still_declares_older_rows_withheld(sandbox):
    sandbox.set_window(limit=5, content_budget=5)
    older = sandbox.send(to="P", sender="Q", content="x")
    newest = sandbox.send(to="P", sender="Q", content="y" * 20)
    env = inbox(sandbox)
    assert [r["id"] for r in env["result"]] == [newest]
    assert env["result"][0]["content"] == "yyyyy"
    assert env["size_truncated"] is True and env["size_dropped"] == 1
    assert env["next_before_id"] == newest and older < newest


@pytest.mark.parametrize("n,limit", [(23, 5), (20, 5), (1, 5), (7, 1)])
def test_before_id_paging_reaches_every_row_in_ceil_n_over_limit_pages(sandbox, n, limit):
    fill(sandbox, 3, persona="other")  # interleaved ids of another inbox: gaps are normal
    ids = []
    for i in range(n):
        ids.append(sandbox.send(to="P", sender="Q", content=str(i)))
        if i % 4 == 0:
            sandbox.send(to="other", sender="Q", content="gap")
    seen, pages, before = [], 0, None
    while True:
        env = inbox(sandbox, limit=limit, before_id=before)
        pages += 1
        page_ids = [r["id"] for r in env["result"]]
        assert page_ids == sorted(page_ids) and len(page_ids) <= limit
        if before is not None:
            assert all(i < before for i in page_ids)
        seen = page_ids + seen
        if env["next_before_id"] is None:
            break
        assert env["next_before_id"] == page_ids[0]
        before = env["next_before_id"]
    assert seen == ids
    assert pages == math.ceil(n / limit)


def test_before_id_is_exclusive_and_zero_is_a_real_cursor(small):
    ids = fill(small, 3)
    assert [r["id"] for r in inbox(small, before_id=ids[1])["result"]] == [ids[0]]
    assert inbox(small, before_id=0)["result"] == []
    assert [r["id"] for r in inbox(small, before_id=10**30)["result"]] == ids


@pytest.mark.parametrize("bad", ["abc", "-1", "", "1.5", " 3", "0x10", "+2", "٣"])
def test_malformed_before_id_is_a_hard_400(small, bad):
    fill(small, 5)
    r = get(small, "/api/inbox", {"persona": "P", "mark_read": "false", "before_id": bad})
    assert r.status_code == 400
    assert "error" in r.json()


def test_persona_is_required_and_case_sensitive(sandbox):
    sandbox.send(to="Loom", sender="Q", content="hi")
    assert get(sandbox, "/api/inbox", {"mark_read": "false"}).status_code == 400
    assert get(sandbox, "/api/inbox", {"persona": "", "mark_read": "false"}).status_code == 400
    assert inbox(sandbox, persona="loom")["result"] == []
    assert len(inbox(sandbox, persona="Loom")["result"]) == 1


def test_limit_parameter_overrides_the_default_and_bad_values_fall_back(sandbox):
    fill(sandbox, 25)
    assert len(inbox(sandbox)["result"]) == 20
    assert len(inbox(sandbox, limit=4)["result"]) == 4
    for bad in ("0", "-3", "x"):
        assert len(inbox(sandbox, limit=bad)["result"]) == 20


def test_mark_read_defaults_to_true(sandbox):
    ids = fill(sandbox, 3)
    r = get(sandbox, "/api/inbox", {"persona": "P"})  # no mark_read: the server's default
    assert r.status_code == 200
    assert [row["read"] for row in r.json()["result"]] == [False, False, False]  # state before marking
    assert all(m["read"] for m in sandbox.messages("P"))
    assert [row["read"] for row in inbox(sandbox)["result"]] == [True, True, True]
    assert [m["id"] for m in sandbox.messages("P")] == ids


@pytest.mark.parametrize("value,marks", [("false", False), ("true", True), ("0", True), ("False", True),
                                         ("", True)])
def test_only_literal_false_peeks(sandbox, value, marks):
    fill(sandbox, 2)
    assert get(sandbox, "/api/inbox", {"persona": "P", "mark_read": value}).status_code == 200
    assert [m["read"] for m in sandbox.messages("P")] == [marks, marks]


def test_mark_read_only_marks_the_returned_window(small):
    ids = fill(small, 5)
    get(small, "/api/inbox", {"persona": "P"})
    assert {m["id"]: m["read"] for m in small.messages("P")} == {
        ids[0]: False, ids[1]: False, ids[2]: True, ids[3]: True, ids[4]: True}


def test_unread_not_shown_follows_the_documented_formula(sandbox):
    sandbox.set_window(limit=2)
    ids = fill(sandbox, 5)
    # Nothing read: newest page shows 2 of 5 unread.
    assert inbox(sandbox)["unread_not_shown"] == 3
    sandbox.mark_read("P", ids=[ids[0]])
    assert inbox(sandbox)["unread_not_shown"] == 2
    # A mid-walk page reports whole-inbox unread minus its own unread rows (4 unread - 2 shown).
    mid = inbox(sandbox, before_id=ids[3])
    assert [r["id"] for r in mid["result"]] == ids[1:3] and mid["unread_not_shown"] == 2
    # The terminal walk page withheld nothing: 0 by construction, though unread mail sits above it.
    last = inbox(sandbox, before_id=ids[1])
    assert last["next_before_id"] is None and last["unread_not_shown"] == 0
    # Evaluated after this request's own mark_read effect: the shown rows are no longer unread.
    marked = get(sandbox, "/api/inbox", {"persona": "P"}).json()
    assert marked["unread_not_shown"] == 2  # ids[1], ids[2] still unread; ids[3], ids[4] just marked
    # Self-authored mail is never unread for its author.
    sandbox.send(to="P", sender="P", content="note to self")
    sandbox.send(to="P", sender="P", content="another")
    assert inbox(sandbox)["unread_not_shown"] == 2


def test_unread_not_shown_is_zero_when_nothing_was_withheld(sandbox):
    fill(sandbox, 3)
    env = inbox(sandbox)
    assert env["next_before_id"] is None and env["unread_not_shown"] == 0


def test_content_round_trips_controls_and_unicode(sandbox):
    text = "tab\there\nnew line\x00nul \u202e bidi 🦊 \u2028"
    mid = sandbox.send(to="P", sender="Q", content=text)
    assert inbox(sandbox)["result"] == [
        {"id": mid, "from": "Q", "content": text, "created": sandbox.messages()[0]["created"], "read": False}]


# -- notify/pending --------------------------------------------------------------------------------


def test_notify_pending_counts_unread_and_urgent_per_persona(sandbox):
    sandbox.send(to="A", sender="Q", content="1")
    sandbox.send(to="A", sender="Q", content="2", urgent=True)
    sandbox.send(to="B", sender="Q", content="3")
    sandbox.send(to="C", sender="C", content="self")  # own mail never counts
    read = sandbox.send(to="D", sender="Q", content="read")
    sandbox.mark_read("D", ids=[read])
    r = get(sandbox, "/api/notify/pending")
    assert r.status_code == 200
    assert r.json() == {"result": [{"persona": "A", "unread": 2, "unread_urgent": 1},
                                   {"persona": "B", "unread": 1, "unread_urgent": 0}]}
    # Read-only: nothing was marked.
    assert not any(m["read"] for m in sandbox.messages("A"))
    assert get(sandbox, "/api/notify-pending").status_code == 404


def test_long_poll_returns_a_cursor_at_once_without_one(sandbox):
    sandbox.send(to="A", sender="Q", content="1")
    start = time.monotonic()
    body = get(sandbox, "/api/notify/pending", {"wait": "30"}).json()
    assert time.monotonic() - start < 1
    assert isinstance(body["cursor"], str) and body["cursor"]
    assert body["result"] == [{"persona": "A", "unread": 1, "unread_urgent": 0}]


def test_long_poll_wakes_on_send_from_another_client(sandbox):
    cursor = get(sandbox, "/api/notify/pending", {"wait": "0"}).json()["cursor"]

    def later():
        time.sleep(0.3)
        requests.post(sandbox.url + "/api/send", json={"to": "A", "from": "Q", "content": "wake"},
                      headers=HEADERS, timeout=5)

    sender = threading.Thread(target=later)
    start = time.monotonic()
    sender.start()
    r = get(sandbox, "/api/notify/pending", {"wait": "20", "cursor": cursor}, timeout=30)
    elapsed = time.monotonic() - start
    sender.join()
    assert r.status_code == 200
    assert 0.25 <= elapsed < 1.5
    body = r.json()
    assert body["cursor"] != cursor
    assert body["result"] == [{"persona": "A", "unread": 1, "unread_urgent": 0}]


def test_long_poll_times_out_with_unchanged_state(sandbox):
    sandbox.send(to="A", sender="Q", content="1")
    first = get(sandbox, "/api/notify/pending", {"wait": "0"}).json()
    start = time.monotonic()
    second = get(sandbox, "/api/notify/pending", {"wait": "1", "cursor": first["cursor"]}).json()
    assert 0.9 <= time.monotonic() - start < 3
    assert second == first


def test_long_poll_returns_at_once_when_state_already_moved(sandbox):
    cursor = get(sandbox, "/api/notify/pending", {"wait": "0"}).json()["cursor"]
    sandbox.send(to="A", sender="Q", content="1")
    start = time.monotonic()
    body = get(sandbox, "/api/notify/pending", {"wait": "20", "cursor": cursor}).json()
    assert time.monotonic() - start < 1 and body["cursor"] != cursor


@pytest.mark.parametrize("params", [{"wait": "5", "cursor": "garbage"}, {"wait": "5", "cursor": ""},
                                    {"wait": "soon"}, {"wait": "nan"}])
def test_long_poll_rejects_bad_cursor_or_wait(sandbox, params):
    r = get(sandbox, "/api/notify/pending", params)
    assert r.status_code == 400


def test_stop_ends_a_held_long_poll_promptly():
    sb = Sandbox(token=TOKEN).start()
    cursor = get(sb, "/api/notify/pending", {"wait": "0"}).json()["cursor"]
    holder = threading.Thread(target=lambda: _swallow(lambda: get(
        sb, "/api/notify/pending", {"wait": "60", "cursor": cursor}, timeout=70)))
    holder.start()
    time.sleep(0.2)
    start = time.monotonic()
    sb.stop()
    holder.join(5)
    assert not holder.is_alive()
    assert time.monotonic() - start < 2


def _swallow(fn):
    try:
        fn()
    except requests.RequestException:
        pass


# -- personas and send -----------------------------------------------------------------------------


def test_personas_lists_added_personas_and_every_recipient(sandbox):
    sandbox.add_persona("testbot", memory_count=14)
    sandbox.add_persona("quiet")
    sandbox.send(to="testbot", sender="Q", content="1")
    sandbox.send(to="testbot", sender="Q", content="2")
    sandbox.send(to="all", sender="Q", content="3")
    sandbox.mark_read("testbot", ids=None)
    sandbox.send(to="testbot", sender="Q", content="4")
    r = get(sandbox, "/api/personas")
    assert r.status_code == 200
    by_name = {p["persona"]: p for p in r.json()["result"]}
    assert by_name == {
        "testbot": {"persona": "testbot", "memory_count": 14, "projects": [], "mail_total": 3, "unread": 1},
        "quiet": {"persona": "quiet", "memory_count": 0, "projects": [], "mail_total": 0, "unread": 0},
        "all": {"persona": "all", "memory_count": 0, "projects": [], "mail_total": 1, "unread": 1},
    }


def test_send_assigns_account_global_increasing_ids(sandbox):
    def send(body):
        return requests.post(sandbox.url + "/api/send", json=body, headers=HEADERS, timeout=5)

    r1 = send({"to": "A", "from": "Q", "content": "one", "urgent": False})
    r2 = send({"to": "B", "from": "Q", "content": "two", "urgent": True})
    r3 = send({"to": "A", "content": "three", "persona": "ignored"})  # no `from`: the token identity
    assert r1.status_code == r2.status_code == r3.status_code == 200
    ids = [r.json()["result"]["id"] for r in (r1, r2, r3)]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(set(ids))
    assert r2.json() == {"result": {"id": ids[1], "to": "B"}}
    stored = {m["id"]: m for m in sandbox.messages()}
    assert stored[ids[2]]["from"] == "sandbox"
    assert stored[ids[1]]["urgent"] is True and stored[ids[0]]["urgent"] is False
    assert sandbox.send(to="C", sender="Q", content="py") > ids[2]


@pytest.mark.parametrize("body", [
    {"from": "Q", "content": "no recipient"},
    {"to": "", "content": "x"},
    {"to": 5, "content": "x"},
    {"to": "A", "content": 7},
    {"to": "A"},
    {"to": "A", "content": "x", "urgent": "yes"},
    {"to": "A", "content": "x", "from": ["Q"]},
    {"to": "A", "content": "\ud800"},
    ["not", "an", "object"],
])
def test_send_rejects_bad_bodies(sandbox, body):
    r = requests.post(sandbox.url + "/api/send", data=json.dumps(body), headers=HEADERS, timeout=5)
    assert r.status_code == 400
    assert sandbox.messages() == []


def test_send_rejects_malformed_json(sandbox):
    r = requests.post(sandbox.url + "/api/send", data=b"{not json", headers=HEADERS, timeout=5)
    assert r.status_code == 400


def test_unknown_paths_and_methods_are_json_404(sandbox):
    for method, path in [("GET", "/api/hive/send"), ("POST", "/api/inbox"), ("GET", "/"),
                         ("GET", "/api/inbox/"), ("DELETE", "/api/personas")]:
        r = requests.request(method, sandbox.url + path, headers=HEADERS, timeout=5, allow_redirects=False)
        assert r.status_code == 404, (method, path)
        assert "error" in r.json()


def test_ids_persist_and_continue_in_a_file_database(tmp_path):
    db = str(tmp_path / "kijito.db")
    with Sandbox(token=TOKEN, db_path=db) as sb:
        first = sb.send(to="P", sender="Q", content="kept")
    with Sandbox(token=TOKEN, db_path=db) as sb:
        assert [r["content"] for r in inbox(sb)["result"]] == ["kept"]
        assert sb.send(to="P", sender="Q", content="next") > first


# -- auth, WAF, request log ------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [
    {"User-Agent": UA},
    {"User-Agent": UA, "Authorization": "Bearer wrong"},
    {"User-Agent": UA, "Authorization": TOKEN},
    {"User-Agent": UA, "Authorization": f"Basic {TOKEN}"},
])
def test_missing_or_wrong_token_is_401(sandbox, headers):
    for path in ("/api/inbox?persona=P&mark_read=false", "/api/notify/pending", "/api/personas"):
        r = requests.get(sandbox.url + path, headers=headers, timeout=5)
        assert r.status_code == 401
        assert "error" in r.json()


def test_custom_auth_header_carries_the_raw_token_and_bearer_is_refused():
    with Sandbox(token=TOKEN, auth_header="X-Kijito-Token") as sb:
        ok = get(sb, "/api/personas", headers={"X-Kijito-Token": TOKEN, "User-Agent": UA})
        assert ok.status_code == 200
        assert get(sb, "/api/personas", headers=HEADERS).status_code == 401
        wrong = {"X-Kijito-Token": "nope", "User-Agent": UA}
        assert get(sb, "/api/personas", headers=wrong).status_code == 401


def test_python_urllib_user_agent_is_refused_like_the_real_waf(sandbox):
    request = urllib.request.Request(sandbox.url + "/api/personas",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 403
    assert get(sandbox, "/api/personas").status_code == 200


def test_request_log_records_requests_without_credentials(sandbox):
    fill(sandbox, 1)
    inbox(sandbox)
    get(sandbox, "/api/personas", headers={"User-Agent": UA, "Authorization": "Bearer wrong-secret"})
    requests.get(sandbox.url + "/_sandbox/requests", headers=HEADERS, timeout=5)  # admin: not logged
    log = sandbox.requests
    assert [(e["method"], e["path"], e["status"], e["auth_ok"]) for e in log] == [
        ("GET", "/api/inbox", 200, True), ("GET", "/api/personas", 401, False)]
    assert log[0]["query"] == {"persona": "P", "mark_read": "false"}
    assert log[0]["user_agent"] == UA and isinstance(log[0]["ts"], float)
    assert set(log[0]) >= {"method", "path", "query", "user_agent", "auth_ok", "status", "ts"}
    dumped = json.dumps(log)
    assert TOKEN not in dumped and "wrong-secret" not in dumped and "Bearer" not in dumped
    sandbox.clear_requests()
    assert sandbox.requests == []


# -- faults ----------------------------------------------------------------------------------------


def test_status_fault_with_headers_applies_times_then_recovers(sandbox):
    sandbox.add_fault({"kind": "status", "status": 503, "headers": {"Retry-After": "7"}, "times": 2})
    for _ in range(2):
        r = get(sandbox, "/api/personas")
        assert r.status_code == 503 and r.headers["Retry-After"] == "7"
    assert get(sandbox, "/api/personas").status_code == 200
    assert [e["fault"] for e in sandbox.requests] == ["status", "status", None]


def test_status_fault_can_redirect_and_the_server_never_follows(sandbox):
    sandbox.add_fault({"kind": "status", "status": 302, "headers": {"Location": "http://example.invalid/"}})
    r = get(sandbox, "/api/inbox", {"persona": "P", "mark_read": "false"})
    assert r.status_code == 302 and r.headers["Location"] == "http://example.invalid/"


def test_status_fault_with_raw_body(sandbox):
    sandbox.add_fault({"kind": "status", "status": 500, "body": "<html>oops</html>"})
    r = get(sandbox, "/api/personas")
    assert r.status_code == 500 and r.text == "<html>oops</html>"


def test_fault_filters_persona_path_and_backward(sandbox):
    fill(sandbox, 3, persona="A")
    fill(sandbox, 3, persona="B")
    sandbox.add_fault({"kind": "status", "status": 500, "persona": "A", "backward": True})
    sandbox.add_fault({"kind": "status", "status": 502, "path": "/api/personas"})
    assert get(sandbox, "/api/inbox", {"persona": "A", "mark_read": "false"}).status_code == 200
    back = {"mark_read": "false", "before_id": "9"}
    assert get(sandbox, "/api/inbox", dict(back, persona="A")).status_code == 500
    assert get(sandbox, "/api/inbox", dict(back, persona="B")).status_code == 200
    assert get(sandbox, "/api/personas").status_code == 502
    assert get(sandbox, "/api/notify/pending").status_code == 200
    sandbox.clear_faults()
    assert get(sandbox, "/api/personas").status_code == 200


def test_forward_only_fault_and_first_matching_rule_wins(sandbox):
    sandbox.add_fault({"kind": "status", "status": 500, "backward": False, "times": 1})
    sandbox.add_fault({"kind": "status", "status": 504})
    q = {"persona": "P", "mark_read": "false"}
    assert get(sandbox, "/api/inbox", dict(q, before_id="5")).status_code == 504
    assert get(sandbox, "/api/inbox", q).status_code == 500
    assert get(sandbox, "/api/inbox", q).status_code == 504


def test_body_fault_serves_raw_text(sandbox):
    sandbox.add_fault({"kind": "body", "body": '{"result": [', "times": 1})
    r = get(sandbox, "/api/inbox", {"persona": "P", "mark_read": "false"})
    assert r.status_code == 200 and r.text == '{"result": ['
    with pytest.raises(ValueError):
        r.json()
    assert get(sandbox, "/api/inbox", {"persona": "P", "mark_read": "false"}).json()["result"] == []


def test_hang_fault_outlasts_the_client_without_blocking_others(sandbox):
    sandbox.add_fault({"kind": "hang", "seconds": 20, "persona": "slow"})
    start = time.monotonic()
    with pytest.raises(requests.exceptions.ReadTimeout):
        get(sandbox, "/api/inbox", {"persona": "slow", "mark_read": "false"}, timeout=0.3)
    other = get(sandbox, "/api/inbox", {"persona": "fast", "mark_read": "false"})
    assert other.status_code == 200
    assert time.monotonic() - start < 2


def test_hang_fault_answers_normally_after_a_short_hang(sandbox):
    sandbox.send(to="P", sender="Q", content="late")
    sandbox.add_fault({"kind": "hang", "seconds": 0.4})
    start = time.monotonic()
    env = inbox(sandbox)
    assert time.monotonic() - start >= 0.35
    assert [r["content"] for r in env["result"]] == ["late"]


def test_stop_is_prompt_during_a_hang():
    sb = Sandbox(token=TOKEN).start()
    sb.add_fault({"kind": "hang", "seconds": 60})
    holder = threading.Thread(target=lambda: _swallow(lambda: get(sb, "/api/personas", timeout=70)))
    holder.start()
    time.sleep(0.2)
    start = time.monotonic()
    sb.stop()
    holder.join(5)
    assert not holder.is_alive() and time.monotonic() - start < 2


def _raw_request(sb, path="/api/personas"):
    sock = socket.create_connection(("127.0.0.1", sb.port), timeout=5)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: {UA}\r\n"
                 f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
    return sock


def test_reset_fault_aborts_with_rst(sandbox):
    sandbox.add_fault({"kind": "reset", "times": 1})
    sock = _raw_request(sandbox)
    try:
        with pytest.raises(ConnectionResetError):
            while sock.recv(4096):
                pass
    finally:
        sock.close()
    sandbox.add_fault({"kind": "reset", "times": 1})
    with pytest.raises(requests.exceptions.ConnectionError):
        get(sandbox, "/api/personas")
    assert get(sandbox, "/api/personas").status_code == 200
    assert sandbox.requests[0]["status"] is None and sandbox.requests[0]["fault"] == "reset"


def test_close_fault_ends_cleanly_without_an_answer(sandbox):
    sandbox.add_fault({"kind": "close", "times": 1})
    sock = _raw_request(sandbox)
    try:
        assert sock.recv(4096) == b""  # orderly EOF, no status line
    finally:
        sock.close()
    sandbox.add_fault({"kind": "close", "times": 1})
    with pytest.raises(requests.exceptions.ConnectionError):
        get(sandbox, "/api/personas")
    assert get(sandbox, "/api/personas").status_code == 200


def test_mutate_fault_makes_the_inbox_lie(small):
    ids = fill(small, 5)
    lies = {"truncated": "yes", "size_dropped": "2", "size_truncated": True}
    small.add_fault({"kind": "mutate", "set": lies, "delete": ["next_before_id"], "times": 1})
    lie = inbox(small)
    assert lie["truncated"] == "yes" and lie["size_dropped"] == "2" and lie["size_truncated"] is True
    assert "next_before_id" not in lie
    assert [r["id"] for r in lie["result"]] == ids[-3:]  # the real window underneath
    assert inbox(small)["next_before_id"] == ids[2]  # times spent: honest again


def test_mutate_fault_applies_only_to_the_inbox_by_default(small):
    small.add_fault({"kind": "mutate", "set": {"next_before_id": -1}})
    assert "next_before_id" not in get(small, "/api/notify/pending").json()
    assert inbox(small)["next_before_id"] == -1
    small.clear_faults()
    small.add_fault({"kind": "mutate", "path": "/api/notify/pending", "delete": ["cursor"]})
    assert "cursor" not in get(small, "/api/notify/pending", {"wait": "0"}).json()


@pytest.mark.parametrize("transform,check", [
    ("id_string", lambda rows, ids: rows[0]["id"] == str(ids[2])),
    ("id_bool", lambda rows, ids: rows[0]["id"] is True),
    ("dup_first", lambda rows, ids: [r["id"] for r in rows] == [ids[2], ids[2], ids[3], ids[4]]),
    ("row_not_object", lambda rows, ids: isinstance(rows[0], list) and rows[0][0] == ids[2]),
    ("result_not_list", lambda rows, ids: isinstance(rows, dict) and len(rows) == 3),
    ("drop_oldest", lambda rows, ids: [r["id"] for r in rows] == ids[3:]),
])
def test_mutate_row_transforms(small, transform, check):
    ids = fill(small, 5)
    small.add_fault({"kind": "mutate", "rows": transform})
    env = inbox(small)
    assert check(env["result"], ids)
    assert env["next_before_id"] == ids[2]  # the envelope itself still claims the real window


def test_mutate_drop_oldest_hides_a_row_silently(sandbox):
    ids = fill(sandbox, 3)
    sandbox.add_fault({"kind": "mutate", "rows": "drop_oldest"})
    env = inbox(sandbox)
    assert [r["id"] for r in env["result"]] == ids[1:]
    assert env["truncated"] is False and env["size_dropped"] == 0 and env["next_before_id"] is None


def test_huge_fault_with_a_byte_count(sandbox):
    sandbox.add_fault({"kind": "huge", "bytes": 300_000, "times": 1})
    r = get(sandbox, "/api/inbox", {"persona": "P", "mark_read": "false"})
    assert r.status_code == 200 and len(r.content) == 300_000
    assert get(sandbox, "/api/personas").status_code == 200


def test_huge_fault_streams_until_the_client_leaves(sandbox):
    sandbox.add_fault({"kind": "huge", "times": 1})
    r = get(sandbox, "/api/inbox", {"persona": "P", "mark_read": "false"}, stream=True)
    assert r.status_code == 200 and "Content-Length" not in r.headers
    received = 0
    for chunk in r.iter_content(65536):
        received += len(chunk)
        if received > 3_000_000:
            break
    r.close()
    assert received > 3_000_000
    assert get(sandbox, "/api/personas").status_code == 200
    start = time.monotonic()
    sandbox.stop()
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("rule", [
    {"kind": "explode"},
    {"kind": "status"},
    {"kind": "status", "status": 99},
    {"kind": "status", "status": 503, "times": -1},
    {"kind": "status", "status": 503, "backward": "yes"},
    {"kind": "hang", "seconds": "long"},
    {"kind": "mutate", "rows": "shuffle"},
    {"kind": "body"},
    {"kind": "reset", "status": 500},
    {"kind": "status", "status": 500, "path": "/_sandbox/send"},
])
def test_invalid_fault_rules_are_rejected(sandbox, rule):
    with pytest.raises(ValueError):
        sandbox.add_fault(rule)


# -- admin over HTTP -------------------------------------------------------------------------------


def admin(sb, path, body=None, headers=None):
    h = HEADERS if headers is None else headers
    if body is None:
        return requests.get(sb.url + "/_sandbox/" + path, headers=h, timeout=5)
    return requests.post(sb.url + "/_sandbox/" + path, json=body, headers=h, timeout=5)


def test_admin_endpoints_drive_a_sandbox_from_another_process(sandbox):
    assert admin(sandbox, "send", {"to": "P", "content": "x"}, headers={"User-Agent": UA}).status_code == 401
    sent = admin(sandbox, "send", {"to": "P", "from": "Q", "content": "hello", "urgent": True}).json()
    mid = sent["result"]["id"]
    assert sent == {"result": {"id": mid, "to": "P"}}
    assert admin(sandbox, "personas", {"persona": "P", "memory_count": 3}).status_code == 200
    assert get(sandbox, "/api/personas").json()["result"][0]["memory_count"] == 3
    assert admin(sandbox, "window", {"limit": 7, "content_budget": 99}).json() == {
        "result": {"limit": 7, "content_budget": 99}}
    assert sandbox.window() == (7, 99)
    assert admin(sandbox, "faults", {"kind": "status", "status": 503, "times": 1}).status_code == 200
    assert admin(sandbox, "faults", {"kind": "nonsense"}).status_code == 400
    assert admin(sandbox, "faults").json()["result"][0]["status"] == 503
    assert get(sandbox, "/api/personas").status_code == 503
    admin(sandbox, "faults", {"kind": "status", "status": 500, "path": "/"})
    # Admin requests are neither faulted nor logged.
    log = admin(sandbox, "requests").json()["result"]
    assert [e["path"] for e in log] == ["/api/personas", "/api/personas"]
    assert admin(sandbox, "faults", {"clear": True}).json() == {"result": {"faults": 0}}
    assert admin(sandbox, "mark_read", {"persona": "P", "ids": [mid]}).json() == {"result": {"marked": 1}}
    assert sandbox.messages("P")[0]["read"] is True
    assert admin(sandbox, "requests", {"clear": True}).status_code == 200
    assert sandbox.requests == []
    assert admin(sandbox, "nothing").status_code == 404


def test_set_window_changes_limits_at_run_time(sandbox):
    fill(sandbox, 6, content="abc")
    assert len(inbox(sandbox)["result"]) == 6
    sandbox.set_window(limit=4)
    assert len(inbox(sandbox)["result"]) == 4
    sandbox.set_window(content_budget=6)
    env = inbox(sandbox)
    assert len(env["result"]) == 2 and env["size_dropped"] == 2 and env["truncated"] is True
    with pytest.raises(ValueError):
        sandbox.set_window(limit=0)


def test_concurrent_clients_are_served(sandbox):
    fill(sandbox, 10)
    results, errors = [], []

    def worker():
        try:
            with requests.Session() as s:
                for _ in range(10):
                    r = s.get(sandbox.url + "/api/inbox", params={"persona": "P", "mark_read": "false"},
                              headers=HEADERS, timeout=5)
                    results.append(len(r.json()["result"]))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors and results == [10] * 80


# -- the command -----------------------------------------------------------------------------------


def test_command_registers_a_sandbox_subparser():
    parser = argparse.ArgumentParser()
    sandbox_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sandbox", "--port", "0", "--token", "t", "--limit", "3", "--json"])
    assert args.run is sandbox_cmd.run and args.limit == 3 and args.json and args.db is None


def test_command_runs_in_process_until_stopped():
    parser = argparse.ArgumentParser()
    sandbox_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sandbox", "--token", "tok-123", "--limit", "2"])
    args.stop_event = threading.Event()
    out, err = io.StringIO(), io.StringIO()
    env = Environment(stdout=out, stderr=err, environ={}, cwd=str(REPO))
    codes = []
    runner = threading.Thread(target=lambda: codes.append(sandbox_cmd.run(args, env)))
    runner.start()
    try:
        deadline = time.monotonic() + 5
        while "listening on" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        text = out.getvalue()
        url = re.search(r"Kijito sandbox listening on (http://127\.0\.0\.1:\d+)", text).group(1)
        assert f"export KIJITO_BASE={url}" in text and "export KIJITOMON_TOKEN=tok-123" in text
        h = {"Authorization": "Bearer tok-123", "User-Agent": UA}
        for i in range(3):
            requests.post(url + "/api/send", json={"to": "P", "content": str(i)}, headers=h, timeout=5)
        r = requests.get(url + "/api/inbox", params={"persona": "P", "mark_read": "false"}, headers=h,
                         timeout=5)
        assert len(r.json()["result"]) == 2 and r.json()["truncated"] is True
    finally:
        args.stop_event.set()
        runner.join(5)
    assert codes == [ExitCode.OK]


def test_command_as_a_process_prints_json_and_exits_0_on_sigterm(tmp_path):
    db = tmp_path / "sb.db"
    code = ("import sys; from kijito_pull.cli.sandbox_cmd import main; "
            "raise SystemExit(main(sys.argv[1:]))")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", code, "--json", "--db", str(db)], cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = []
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()))
        reader.start()
        reader.join(10)
        assert lines and lines[0], proc.stderr.read() if proc.poll() is not None else "no output"
        info = json.loads(lines[0])
        assert set(info) == {"url", "token", "db"} and info["db"] == str(db)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", info["url"]) and len(info["token"]) >= 20
        h = {"Authorization": f"Bearer {info['token']}", "User-Agent": UA}
        sent = requests.post(info["url"] + "/api/send", json={"to": "P", "content": "hi"}, headers=h,
                             timeout=5)
        assert sent.status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    with Sandbox(token=TOKEN, db_path=str(db)) as sb:  # the mail was kept in the file
        assert [m["content"] for m in sb.messages("P")] == ["hi"]


def test_command_reports_a_busy_port_as_a_usage_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        err = io.StringIO()
        code = sandbox_cmd.main(["--port", str(port)], Environment(stdout=io.StringIO(), stderr=err, environ={},
                                                                   cwd="."))
    assert code == ExitCode.USAGE and err.getvalue().count("\n") == 1, err.getvalue()
    assert f"cannot listen on 127.0.0.1:{port}" in err.getvalue()


def test_unread_counts_read_the_unread_index_not_the_table():
    # Every inbox page states its unread count; a table scan per page made a 10,000-message catch-up
    # spend most of the sandbox's time counting (docs/benchmarks.md, catch-up).
    from kijito_pull.sandbox.store import _UNREAD, Store

    store = Store()
    plan = store._conn.execute(
        f"EXPLAIN QUERY PLAN SELECT COUNT(*) FROM messages WHERE persona = ? AND {_UNREAD}", ("p",)).fetchall()
    assert any("messages_unread" in str(row) for row in plan), plan
