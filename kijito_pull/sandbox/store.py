"""The sandbox's SQLite model: messages, the persona directory, and a change signal for long-polls.

One connection, shared by every server thread and serialized by one lock, so the HTTP layer never
has to think about SQLite threading. Message ids come from one account-global sequence that starts
at 0, as Kijito's does (a new account's first message is id 0); an id once taken is never reused.

"Unread" everywhere means `read = 0` and not authored by the inbox's own persona: a sender's mail
to itself never counts as unread for it (the contract's rule for notify/pending, applied
consistently to the directory and to `unread_not_shown`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    persona  TEXT    NOT NULL,
    sender   TEXT    NOT NULL,
    content  TEXT    NOT NULL,
    created  TEXT    NOT NULL,
    read     INTEGER NOT NULL DEFAULT 0,
    urgent   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_persona_id ON messages (persona, id);
-- Unread counts (every inbox page states the unread it did not show) read this index alone.
CREATE INDEX IF NOT EXISTS messages_unread ON messages (persona, sender) WHERE read = 0;
-- The next message id: one row, taken and raised under the store's lock (SQLite's AUTOINCREMENT starts at 1).
CREATE TABLE IF NOT EXISTS id_sequence (next_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS personas (
    persona      TEXT    PRIMARY KEY,
    memory_count INTEGER NOT NULL DEFAULT 0
);
"""

#: SQLite integers are signed 64-bit; bigger cursors mean "everything" anyway.
_MAX_ID = 2**62

_UNREAD = "read = 0 AND sender != persona"


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    """Thread-safe SQLite store. `db_path=None` keeps everything in memory."""

    def __init__(self, db_path: str | None = None) -> None:
        self.db_path = db_path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            db_path if db_path else ":memory:", check_same_thread=False, isolation_level=None
        )
        self._conn.executescript(_SCHEMA)
        if self._conn.execute("SELECT COUNT(*) FROM id_sequence").fetchone()[0] == 0:
            # A database from before the sequence table: go on above every id it ever gave out.
            (top,) = self._conn.execute(
                "SELECT MAX(n) FROM (SELECT MAX(id) AS n FROM messages "
                "UNION ALL SELECT seq FROM sqlite_sequence WHERE name = 'messages')").fetchone()
            self._conn.execute("INSERT INTO id_sequence (next_id) VALUES (?)", (0 if top is None else top + 1,))
        self._changed = threading.Condition()
        self._max_id = self._query_max_id()
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
        self.wake_waiters()

    # -- writes ------------------------------------------------------------------------------------

    def send(
        self, to: str, sender: str, content: str, urgent: bool = False, created: str | None = None
    ) -> int:
        with self._lock:
            mid = self._take_id_locked()
            self._conn.execute(
                "INSERT INTO messages (id, persona, sender, content, created, read, urgent) "
                "VALUES (?, ?, ?, ?, ?, 0, ?)",
                (mid, to, sender, content, created or utc_now_iso(), 1 if urgent else 0),
            )
        with self._changed:
            self._max_id = max(self._max_id, mid)
            self._changed.notify_all()
        return mid

    def reserve_id(self) -> int:
        """Take the next id without making a message visible (a transaction that commits late)."""
        with self._lock:
            return self._take_id_locked()

    def send_as(self, mid: int, to: str, sender: str, content: str) -> int:
        """Make message `mid` (from `reserve_id`) visible now, below ids that were visible before it."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO messages (id, persona, sender, content, created, read, urgent) "
                "VALUES (?, ?, ?, ?, ?, 0, 0)", (mid, to, sender, content, utc_now_iso()))
        with self._changed:
            self._changed.notify_all()
        return mid

    def forget_account(self) -> None:
        """A server that lost the account: every message gone, ids start over from 0."""
        with self._lock:
            self._conn.execute("DELETE FROM messages")
            self._conn.execute("UPDATE id_sequence SET next_id = 0")
        with self._changed:
            self._max_id = -1
            self._changed.notify_all()

    def add_persona(self, persona: str, memory_count: int = 0) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO personas (persona, memory_count) VALUES (?, ?) "
                "ON CONFLICT (persona) DO UPDATE SET memory_count = excluded.memory_count",
                (persona, memory_count),
            )

    def mark_read(self, persona: str, ids: Iterable[int] | None = None) -> int:
        """Mark that persona's rows read (all of them, or only `ids`); returns how many changed."""
        with self._lock:
            if ids is None:
                cur = self._conn.execute(
                    "UPDATE messages SET read = 1 WHERE persona = ? AND read = 0", (persona,)
                )
                return cur.rowcount
            changed = 0
            for mid in ids:
                cur = self._conn.execute(
                    "UPDATE messages SET read = 1 WHERE persona = ? AND id = ? AND read = 0",
                    (persona, int(mid)),
                )
                changed += cur.rowcount
            return changed

    # -- reads -------------------------------------------------------------------------------------

    def inbox_page(
        self, persona: str, before_id: int | None, fetch: int, choose, mark_read: bool
    ) -> tuple[Any, int]:
        """Read one inbox window atomically.

        Fetches up to `fetch` newest rows (id < before_id when given) plus the count of all such
        rows, lets `choose(rows, total)` pick the window (rows newest first, as dicts), marks the
        chosen rows read when asked, and returns `(choice, unread_after)` where unread_after is the
        inbox's unread count after that mark. `choose` must return an object with `.ids`.
        """
        bound = _MAX_ID if before_id is None else min(before_id, _MAX_ID)
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                total = self._conn.execute(
                    "SELECT COUNT(*) FROM messages WHERE persona = ? AND id < ?", (persona, bound)
                ).fetchone()[0]
                rows = [
                    {
                        "id": r[0],
                        "from": r[1],
                        "content": r[2],
                        "created": r[3],
                        "read": bool(r[4]),
                    }
                    for r in self._conn.execute(
                        "SELECT id, sender, content, created, read FROM messages "
                        "WHERE persona = ? AND id < ? ORDER BY id DESC LIMIT ?",
                        (persona, bound, fetch),
                    )
                ]
                choice = choose(rows, total)
                if mark_read and choice.ids:
                    self._conn.executemany(
                        "UPDATE messages SET read = 1 WHERE persona = ? AND id = ?",
                        [(persona, mid) for mid in choice.ids],
                    )
                unread_after = self._conn.execute(
                    f"SELECT COUNT(*) FROM messages WHERE persona = ? AND {_UNREAD}", (persona,)
                ).fetchone()[0]
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return choice, unread_after

    def pending(self) -> tuple[list[dict[str, Any]], int]:
        """Per-persona unread counts (only personas with unread > 0) and the max message id."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT persona, COUNT(*), SUM(urgent) FROM messages WHERE {_UNREAD} "
                "GROUP BY persona ORDER BY persona"
            ).fetchall()
            max_id = self._query_max_id_locked()
        return (
            [{"persona": p, "unread": int(n), "unread_urgent": int(u or 0)} for p, n, u in rows],
            max_id,
        )

    def personas(self) -> list[dict[str, Any]]:
        """The directory: added personas plus every recipient ever sent to."""
        with self._lock:
            rows = self._conn.execute(
                f"""
                WITH names AS (
                    SELECT persona FROM personas UNION SELECT persona FROM messages
                )
                SELECT n.persona,
                       COALESCE((SELECT memory_count FROM personas p WHERE p.persona = n.persona), 0),
                       (SELECT COUNT(*) FROM messages m WHERE m.persona = n.persona),
                       (SELECT COUNT(*) FROM messages m WHERE m.persona = n.persona AND {_UNREAD})
                FROM names n ORDER BY n.persona
                """
            ).fetchall()
        return [
            {"persona": p, "memory_count": int(mc), "projects": [], "mail_total": int(t), "unread": int(u)}
            for p, mc, t, u in rows
        ]

    def messages(self, persona: str | None = None) -> list[dict[str, Any]]:
        """Every stored row (optionally one inbox), by id: for assertions in tests."""
        sql = "SELECT id, persona, sender, content, created, read, urgent FROM messages"
        params: tuple[Any, ...] = ()
        if persona is not None:
            sql += " WHERE persona = ?"
            params = (persona,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", params).fetchall()
        return [
            {
                "id": r[0],
                "to": r[1],
                "from": r[2],
                "content": r[3],
                "created": r[4],
                "read": bool(r[5]),
                "urgent": bool(r[6]),
            }
            for r in rows
        ]

    def max_id(self) -> int:
        with self._lock:
            return self._query_max_id_locked()

    # -- change signal -----------------------------------------------------------------------------

    def wait_for_change(self, seen_max_id: int, timeout: float, should_stop) -> int:
        """Block until the account's max id differs from `seen_max_id`, the timeout passes, or
        `should_stop()` turns true. Returns the max id known at wake-up."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._changed:
            while self._max_id == seen_max_id and not should_stop():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                # Woken by notify_all on send/stop; the slice only bounds a missed wake-up.
                self._changed.wait(min(remaining, 5.0))
            return self._max_id

    def wake_waiters(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # -- helpers -----------------------------------------------------------------------------------

    def _query_max_id(self) -> int:
        with self._lock:
            return self._query_max_id_locked()

    def _query_max_id_locked(self) -> int:
        """The newest visible id, -1 while the account has no message (its first is id 0)."""
        row = self._conn.execute("SELECT MAX(id) FROM messages").fetchone()
        return -1 if row[0] is None else int(row[0])

    def _take_id_locked(self) -> int:
        (mid,) = self._conn.execute("SELECT next_id FROM id_sequence").fetchone()
        self._conn.execute("UPDATE id_sequence SET next_id = ?", (mid + 1,))
        return int(mid)
