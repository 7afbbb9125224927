"""A plain fake Kijito server for benchmarks: the three read endpoints a watcher calls, nothing else.

`bench_watch.py --server plain` runs the tools against this instead of kijito_pull/sandbox, so a latency
measurement is of the clients and not of the sandbox (which logs every request with its headers, runs
fault rules, keeps its rows in SQLite and serialises on one store lock). Here the rows live in a dict,
an answer is one `json.dumps` of at most `window_limit` rows, and a held long-poll is woken by the
`send` itself through one `threading.Condition`, so the server's share of a wake is a few dozen
microseconds of Python.

What it answers (docs: /work/shared/kijito-api.md), with `Authorization: Bearer <token>` required:
    GET /api/inbox?persona=P[&before_id=N][&limit=N][&mark_read=false]
        the newest rows of P's inbox that fit `limit` (default: the window limit), oldest first, in the
        full envelope (`truncated`, `size_dropped` 0, `size_truncated` false, `next_before_id` = the
        oldest id returned when older rows were withheld else null, `unread_not_shown`). Rows are marked
        read unless `mark_read=false` (the server default is true; both watchers always peek).
    GET /api/notify/pending[?wait=S[&cursor=c_N]]
        per-persona unread counts (`unread`, `unread_urgent` 0; personas with none left out). With `wait`
        the answer carries `cursor` = c_<max id>; with a cursor equal to the current one it is held up to
        `wait` s (clamped to 60) or until a message is sent. A malformed cursor is a 400.
    GET /api/personas
        the directory: added personas and every recipient, with memory_count, mail_total and unread.
Anything else is a 404 (and is counted, so a tool's unexpected call shows in the request log).

The HTTP layer is stdlib `http.server` (threaded, HTTP/1.1 keep-alive, Nagle off); every request is
logged as {"path", "query", "status", "arrived"} (status None while it is held), which is what the
bench counts requests per wake with. Interface (the subset of `Sandbox` the benches use): `start()`,
`stop()`, context manager, `url`, `add_persona`, `send`, `requests`, `clear_requests`.
"""

from __future__ import annotations

import datetime
import http.server
import json
import re
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

MAX_WAIT = 60.0
_CURSOR = re.compile(r"c_(\d+)")
_DIGITS = re.compile(r"\d+")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client that keeps its connection reuses it
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        plain: PlainServer = self.server.plain
        split = urlsplit(self.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        entry = plain.log_open(split.path, query)
        if self.headers.get("Authorization") != f"Bearer {plain.token}":
            status, payload = 401, {"error": "missing or invalid token"}
        else:
            status, payload = plain.route(split.path, query)
        body = json.dumps(payload).encode()
        # Head and body in one write (one segment, one read on the client's side).
        self.wfile.write(f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        entry["status"] = status

    do_POST = do_GET  # answered 404 by route(): nothing posts on a watch's path


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    plain: PlainServer


class PlainServer:
    """In-memory inbox rows behind a minimal HTTP server (see the module docstring)."""

    def __init__(self, token: str, window_limit: int = 20, host: str = "127.0.0.1"):
        self.token = token
        self.window_limit = window_limit
        self._host = host
        self._cond = threading.Condition()
        self._rows: dict[str, list[dict[str, Any]]] = {}  # persona -> its inbox rows, id ascending
        self._memory: dict[str, int] = {}
        self._max_id = 0
        self._log: list[dict[str, Any]] = []
        self._stopping = False
        self._httpd: _Server | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> PlainServer:
        self._httpd = _Server((self._host, 0), _Handler)
        self._httpd.plain = self
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.5},
                         name="plainserver", daemon=True).start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> PlainServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- the bench's side --------------------------------------------------------------------------

    def add_persona(self, persona: str, memory_count: int = 0) -> None:
        with self._cond:
            self._memory[persona] = memory_count
            self._rows.setdefault(persona, [])

    def send(self, to: str, sender: str, content: str) -> int:
        """Store a message for `to` and wake every held long-poll. Returns its id."""
        created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        with self._cond:
            self._max_id += 1
            self._rows.setdefault(to, []).append({"id": self._max_id, "from": sender, "content": content,
                                                  "created": created, "read": sender == to})
            self._cond.notify_all()
            return self._max_id

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._cond:
            return [dict(e) for e in self._log]

    def clear_requests(self) -> None:
        with self._cond:
            self._log = []

    def log_open(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        entry = {"path": path, "query": query, "status": None, "arrived": time.monotonic()}
        with self._cond:
            self._log.append(entry)
        return entry

    # -- the API -----------------------------------------------------------------------------------

    def route(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if path == "/api/inbox":
            return self._inbox(query)
        if path == "/api/notify/pending":
            return self._notify(query)
        if path == "/api/personas":
            with self._cond:
                names = sorted(set(self._memory) | set(self._rows))
                return 200, {"result": [
                    {"persona": p, "memory_count": self._memory.get(p, 0), "mail_total": len(self._rows.get(p, ())),
                     "unread": sum(1 for r in self._rows.get(p, ()) if not r["read"])} for p in names]}
        return 404, {"error": "not found"}

    def _inbox(self, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        persona = query.get("persona")
        if not persona:
            return 400, {"error": "persona is required"}
        before = query.get("before_id")
        if before is not None and not _DIGITS.fullmatch(before):
            return 400, {"error": "before_id must be a non-negative integer"}
        limit = self.window_limit
        if _DIGITS.fullmatch(query.get("limit", "")) and int(query["limit"]) > 0:
            limit = min(int(query["limit"]), 200)
        with self._cond:
            rows = self._rows.get(persona, [])
            if before is not None:
                rows = [r for r in rows if r["id"] < int(before)]
            page, withheld = rows[-limit:], len(rows) > limit
            if query.get("mark_read") != "false":
                for r in page:
                    r["read"] = True
            shown = [dict(r) for r in page]
            unread = sum(1 for r in self._rows.get(persona, ()) if not r["read"])
        not_shown = max(0, unread - sum(1 for r in shown if not r["read"])) if withheld else 0
        return 200, {"result": shown, "truncated": withheld, "size_dropped": 0, "size_truncated": False,
                     "next_before_id": shown[0]["id"] if withheld and shown else None,
                     "unread_not_shown": not_shown}

    def _notify(self, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        cursor = query.get("cursor")
        match = _CURSOR.fullmatch(cursor) if cursor is not None else None
        if cursor is not None and match is None:
            return 400, {"error": "unrecognized cursor"}
        wait = None
        if "wait" in query:
            try:
                wait = min(max(float(query["wait"]), 0.0), MAX_WAIT)
            except ValueError:
                return 400, {"error": "wait must be a number of seconds"}
        with self._cond:
            if wait is not None and match is not None:
                seen, deadline = int(match.group(1)), time.monotonic() + wait
                while self._max_id == seen and not self._stopping:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
            result = [{"persona": p, "unread": n, "unread_urgent": 0} for p, rows in sorted(self._rows.items())
                      if (n := sum(1 for r in rows if not r["read"]))]
            max_id = self._max_id
        return 200, {"result": result, **({"cursor": f"c_{max_id}"} if wait is not None else {})}
