"""The Kijito API endpoints (docs/server-api.md), as functions from a parsed request to a JSON reply.

No HTTP here: the server module parses the request and serializes what these return, and the fault
layer may rewrite the envelope before it is sent.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Callable

from kijito_pull.sandbox.store import Store
from kijito_pull.sandbox.window import compute_window

#: The server's own cap on `limit` (the real maximum is unknown; this only keeps SQL sane).
MAX_LIMIT = 10_000
#: The server's own cap on a long-poll hold, in seconds.
MAX_WAIT = 60.0

_DIGITS = re.compile(r"[0-9]+")
_CURSOR = re.compile(r"c_(-1|[0-9]+)")  # -1: an account with no message yet

Reply = tuple[int, dict[str, Any]]


class ApiError(Exception):
    """An error answer of the sandbox's API: its HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(message: str) -> dict[str, Any]:
    return {"error": message}


# -- GET /api/inbox --------------------------------------------------------------------------------


def inbox(store: Store, query: Mapping[str, str], window_limit: int, content_budget: int) -> dict[str, Any]:
    persona = query.get("persona")
    if not persona:
        raise ApiError(400, "persona is required")
    before_id: int | None = None
    raw_before = query.get("before_id")
    if raw_before is not None:
        if not _DIGITS.fullmatch(raw_before):
            raise ApiError(400, "before_id must be a non-negative integer")
        before_id = int(raw_before)
    limit = window_limit
    raw_limit = query.get("limit")
    if raw_limit is not None and _DIGITS.fullmatch(raw_limit) and int(raw_limit) > 0:
        limit = min(int(raw_limit), MAX_LIMIT)
    mark_read = query.get("mark_read") != "false"

    def choose(rows, total):
        return compute_window(rows, total, limit, content_budget)

    win, unread_after = store.inbox_page(persona, before_id, limit + 1, choose, mark_read)
    unread_not_shown = 0
    if win.withheld:
        still_unread = 0
        if not mark_read:
            still_unread = sum(1 for r in win.rows if not r["read"] and r["from"] != persona)
        unread_not_shown = max(0, unread_after - still_unread)
    return {
        "result": sorted(win.rows, key=lambda r: r["id"]),
        "truncated": win.truncated,
        "size_dropped": win.size_dropped,
        "size_truncated": win.size_truncated,
        "next_before_id": win.next_before_id,
        "unread_not_shown": unread_not_shown,
    }


# -- GET /api/notify/pending -----------------------------------------------------------------------


def notify_pending(store: Store, query: Mapping[str, str], should_stop: Callable[[], bool]) -> dict[str, Any]:
    cursor_id: int | None = None
    raw_cursor = query.get("cursor")
    if raw_cursor is not None:
        match = _CURSOR.fullmatch(raw_cursor)
        if not match:
            raise ApiError(400, "unrecognized cursor")
        cursor_id = int(match.group(1))
    raw_wait = query.get("wait")
    if raw_wait is None:
        result, _ = store.pending()
        return {"result": result}
    try:
        wait = float(raw_wait)
    except ValueError:
        raise ApiError(400, "wait must be a number of seconds") from None
    if math.isnan(wait):
        raise ApiError(400, "wait must be a number of seconds")
    wait = min(max(wait, 0.0), MAX_WAIT)
    if cursor_id is not None:
        # Any difference counts as news (also a cursor from a newer, since reset, database).
        store.wait_for_change(cursor_id, wait, should_stop)
    result, max_id = store.pending()
    return {"result": result, "cursor": f"c_{max_id}"}


# -- GET /api/personas -----------------------------------------------------------------------------


def personas(store: Store) -> dict[str, Any]:
    return {"result": store.personas()}


# -- POST /api/send --------------------------------------------------------------------------------


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "body must be a JSON object") from None
    if not isinstance(data, dict):
        raise ApiError(400, "body must be a JSON object")
    return data


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from JSON escapes
        return False
    return True


def parse_send(data: Mapping[str, Any], identity: str) -> dict[str, Any]:
    """Validate a send body; unknown fields are ignored (attribution falls back to the identity)."""
    to = data.get("to")
    if not isinstance(to, str) or not to or not _storable(to):
        raise ApiError(400, "'to' must be a non-empty string")
    sender = data.get("from")
    if sender is None:
        sender = identity
    if not isinstance(sender, str) or not sender or not _storable(sender):
        raise ApiError(400, "'from' must be a non-empty string")
    content = data.get("content")
    if not isinstance(content, str) or not _storable(content):
        raise ApiError(400, "'content' must be a string")
    urgent = data.get("urgent", False)
    if urgent is None:
        urgent = False
    if not isinstance(urgent, bool):
        raise ApiError(400, "'urgent' must be a boolean")
    return {"to": to, "sender": sender, "content": content, "urgent": urgent}


def send(store: Store, raw_body: bytes, identity: str) -> dict[str, Any]:
    fields = parse_send(parse_json_object(raw_body), identity)
    mid = store.send(**fields)
    return {"result": {"id": mid, "to": fields["to"]}}


# -- routing ---------------------------------------------------------------------------------------


def route(sandbox: Any, method: str, path: str, query: Mapping[str, str], body: bytes) -> Reply:
    """Answer one authenticated /api request. `sandbox` supplies store, window and identity."""
    try:
        if method == "GET" and path == "/api/inbox":
            limit, budget = sandbox.window()
            return 200, inbox(sandbox.store, query, limit, budget)
        if method == "GET" and path == "/api/notify/pending":
            return 200, notify_pending(sandbox.store, query, sandbox.stopping)
        if method == "GET" and path == "/api/personas":
            return 200, personas(sandbox.store)
        if method == "POST" and path == "/api/send":
            return 200, send(sandbox.store, body, sandbox.identity)
    except ApiError as exc:
        return exc.status, error_body(exc.message)
    return 404, error_body(f"not found: {method} {path}")
