"""The dashboard's data: what the feeds (dashboard/feeds.py) report, kept as one snapshot every page shows.

Inputs, each from one feed: Kijito's notify/pending answers (`counts`, `kijito_failed`), the persona
directory (`directory`), this machine's cursor rows (`cursors`: core/overview.py's rows, the ones
`status --json` prints) and, with a Redis source, each group's rows and each stream's newest entry
(`groups`, `redis_failed`). Every change that alters what a page shows bumps `version` and wakes
`wait_newer`; `text` is the snapshot as JSON, serialised once per change however many browsers read it.

Confirmations come from the confirmation log beside each cursor (core/journey.py's `confirmed_since`,
`confirmations`), which every confirmation writes (core/confirmations.py). Two things no file records are
measured here, from what the board saw change (each said so in the snapshot): the wake
latency of a delivery is the time from the notify answer that announced a persona's new mail to this
machine's state showing it handed over (the write time of the cursor file that shows the new pending
entry or the moved cursor); the relay's lag is the time from that announcement to the persona's stream holding a newer
entry (the entry id's own time). Thread-safe. Imports only core/ and the standard library.
"""

from __future__ import annotations

import collections
import datetime
import json
import threading
import time
from typing import Any, Callable

from kijito_pull.core.models import NotifyResult

HOUR = 3600.0
KEEP_WAKES = 12  # latest wake latencies shown
KEEP_ANNOUNCED = 50  # announcements waiting for a delivery, per persona
ANNOUNCED_FOR = 600.0  # seconds an announcement may wait for its delivery before it is forgotten


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="milliseconds")


def epoch(text: str | None) -> float | None:
    """Unix time of an ISO time the state wrote (None when absent or unreadable)."""
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def _position(row: dict[str, Any]) -> int:
    """A cursor row's position; below every id (ids start at 0) when it has none."""
    cursor = row.get("cursor")
    return -1 if cursor is None else cursor


def _holder_parts(holder: str | None) -> tuple[str | None, str | None]:
    """("claude", "sess-1") of a holder key "claude:sess-1" (harness, session); (None, key) without a colon."""
    if holder is None:
        return None, None
    harness, sep, session = holder.partition(":")
    return (harness, session) if sep else (None, holder)


class Board:
    """The snapshot of one dashboard (module docstring). `api_base` names the account; `personas` limits the
    view to those (None: every persona of the account and of this machine's cursors); `source` is the
    Redis source's password-free address, or None."""

    def __init__(self, api_base: str, personas: list[str] | None = None, consumer: str | None = None,
                 source: str | None = None, clock: Callable[[], float] = time.time):
        self.api_base = api_base
        self.only = list(personas) if personas else None
        self.consumer = consumer
        self.source = source
        self.clock = clock
        self.started = clock()
        self.version = 0
        self.text = "{}"
        self._changed = threading.Condition()
        self._lock = threading.RLock()
        self._kijito: dict[str, Any] = {"state": "starting", "error": None, "since": None, "answered_at": None,
                                        "long_polling": None}
        self._unread: dict[str, tuple[int, int]] = {}  # persona -> (unread, urgent), from the last answer
        self._listed: set[str] = set()
        self._rows: list[dict[str, Any]] = []
        self._redis: dict[str, Any] | None = None if source is None else {
            "source": source, "state": "starting", "error": None, "groups": [], "streams": {}}
        self._announced: dict[str, collections.deque] = {}  # persona -> announcement times awaiting delivery
        self._relay_waiting: dict[str, float] = {}  # persona -> first announcement not yet in its stream
        self._relay_last: dict[str, float] = {}  # persona -> the last relay lag measured (seconds)
        self._wakes: collections.deque = collections.deque(maxlen=KEEP_WAKES)
        self._logged: list[dict[str, Any]] = []
        self._problems: dict[str, str] = {}  # feed -> what went wrong in it (shown until it works again)
        self._key: str | None = None
        self._publish()

    # -- inputs ------------------------------------------------------------------------------------

    def counts(self, result: NotifyResult, long_polling: bool) -> None:
        """A notify/pending answer: every persona's unread count (a rise is an announcement)."""
        now = self.clock()
        with self._lock:
            before = self._unread
            self._unread = {c.persona: (c.unread, c.unread_urgent or 0) for c in result.counts
                            if self._wanted(c.persona)}
            for persona, (unread, _) in self._unread.items():
                if unread > before.get(persona, (0, 0))[0] and self._kijito["state"] == "up":
                    self._announced.setdefault(persona, collections.deque(maxlen=KEEP_ANNOUNCED)).append(now)
                    if self._redis is not None:
                        self._relay_waiting.setdefault(persona, now)
            if self._kijito["state"] != "up":
                self._kijito.update(state="up", error=None, since=iso(now))
            self._kijito.update(answered_at=iso(now), long_polling=long_polling)
        self._publish()

    def kijito_failed(self, error: object) -> None:
        """A failed notify/pending request (NotifyFailed or an exception): Kijito is down for the page."""
        message = str(getattr(error, "error", error))
        now = self.clock()
        with self._lock:
            if self._kijito["state"] != "down":
                self._kijito.update(state="down", since=iso(now))
            self._kijito["error"] = message
        self._publish()

    def put(self, item: object) -> None:
        """The watch Notifier's queue interface: what it posts here is a failed request."""
        self.kijito_failed(item)

    def directory(self, names: list[str]) -> None:
        with self._lock:
            self._listed = {n for n in names if self._wanted(n)}
        self._publish()

    def cursors(self, rows: list[dict[str, Any]], written: dict[str, float] | None = None) -> None:
        """This machine's cursor rows (core/overview.cursor_row), the whole current set; `written`: when each
        file (by its path) was last written, the time a hand-over seen in it was recorded."""
        now = self.clock()
        with self._lock:
            old = {(r.get("persona"), r.get("consumer"), r.get("api_base")): r for r in self._rows}
            for row in rows:
                before = old.get((row.get("persona"), row.get("consumer"), row.get("api_base")))
                if before is not None and row.get("api_base") == self.api_base:
                    self._observe(before, row, (written or {}).get(row.get("file", ""), now) or now)
            self._rows = [r for r in rows if self._wanted(r.get("persona"))]
        self._publish()

    def confirmations(self, rows: list[dict[str, Any]]) -> None:
        """The confirmations this machine's confirmation logs record for the last hour (core/journey.py's
        `confirmed_since` rows: persona, consumer, api_base, id, holder, at), the whole current set."""
        with self._lock:
            self._logged = [r for r in rows if r.get("api_base") == self.api_base and self._wanted(r.get("persona"))
                            and (self.consumer is None or r.get("consumer") == self.consumer)]
        self._publish()

    def groups(self, rows: list[dict[str, Any]], tops: dict[str, str]) -> None:
        """Each group's row (core/overview.group_rows) and each persona's stream top ("ms-seq")."""
        now = self.clock()
        with self._lock:
            assert self._redis is not None
            for persona, top in tops.items():
                at = int(top.split("-")[0]) / 1000 if top and top != "0-0" else None
                waiting = self._relay_waiting.get(persona)
                if waiting is not None and at is not None and at >= waiting - 0.05:
                    self._relay_last[persona] = max(0.0, at - waiting)
                    del self._relay_waiting[persona]
                self._redis["streams"][persona] = {"newest_at": iso(at)}
            self._redis.update(state="up", error=None, groups=rows, checked_at=iso(now))
        self._publish()

    def redis_failed(self, error: object) -> None:
        with self._lock:
            assert self._redis is not None
            self._redis.update(state="down", error=str(error), checked_at=iso(self.clock()))
        self._publish()

    # -- what changed between two reads of a cursor ---------------------------------------------------

    def _observe(self, before: dict[str, Any], after: dict[str, Any], now: float) -> None:
        """What changed in one cursor between two reads; `now`: when the file was written."""
        persona = after["persona"]
        held_before = {i: p for p in before.get("pending") or [] if p["holder"] for i in p["ids"]}
        held_after = {i: p for p in after.get("pending") or [] if p["holder"] for i in p["ids"]}
        fresh = [p for i, p in held_after.items() if i not in held_before]
        # the cursor passed mail that was never held here (a script's consumer took it), not a confirmation
        moved = _position(after) > max([_position(before), *held_before])
        if fresh or moved:
            handed = now  # the file's write: the state's own `since` has whole seconds only
            waiting = self._announced.get(persona)
            while waiting and now - waiting[0] > ANNOUNCED_FOR:
                waiting.popleft()
            if waiting and waiting[0] <= handed + 1.0:
                announced = waiting.popleft()
                self._wakes.appendleft({"persona": persona, "consumer": after["consumer"],
                                        "announced_at": iso(announced), "delivered_at": iso(handed),
                                        "seconds": round(max(0.0, handed - announced), 3),
                                        "how": "hand-over" if fresh else "cursor moved"})

    def problem(self, feed: str, message: str | None) -> None:
        """A feed that failed in a way no other input reports (None: it works again)."""
        with self._lock:
            if self._problems.get(feed) == message:
                return
            if message is None:
                self._problems.pop(feed, None)
            else:
                self._problems[feed] = message
        self._publish()

    def known(self) -> set[str]:
        """Every persona the board knows of: listed, with unread at Kijito, or with a cursor here."""
        with self._lock:
            return set(self._listed) | set(self._unread) | {r["persona"] for r in self._rows if r.get("persona")}

    def _wanted(self, persona: str | None) -> bool:
        return persona is not None and (self.only is None or persona in self.only)

    # -- output ------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        now = self.clock()
        with self._lock:
            rows = [r for r in self._rows if r.get("api_base") == self.api_base
                    and (self.consumer is None or r.get("consumer") == self.consumer)]
            others = [r for r in self._rows if r not in rows]
            names = set(self._listed) | set(self._unread) | {r["persona"] for r in rows} | set(self.only or ())
            by_persona: dict[str, list] = {n: [] for n in names}
            for r in rows:
                by_persona[r["persona"]].append(r)
            personas = [self._persona(n, by_persona[n]) for n in names]
            personas.sort(key=lambda p: (not (p["unread"] or p["pending"] or p["parked"]), p["persona"].casefold()))
            pending, parked = [], []
            for r in rows:
                for p in r.get("pending") or []:
                    harness, session = _holder_parts(p["holder"])
                    pending.append({"persona": r["persona"], "consumer": r["consumer"], "holder": p["holder"],
                                    "harness": harness, "session": session, "ids": p["ids"], "since": p["since"],
                                    "handovers": p["handovers"]})
                parked += [{"persona": r["persona"], "consumer": r["consumer"], **p} for p in r.get("parked") or []]
            confirmed = [{k: v for k, v in c.items() if k != "api_base"} for c in self._logged
                         if (epoch(c.get("at")) or 0) >= now - HOUR]
            confirmed.sort(key=lambda c: c.get("at") or "", reverse=True)
            redis = None
            if self._redis is not None:
                redis = {**self._redis, "relay": [
                    {"persona": p, "newest_at": s.get("newest_at"),
                     "behind_since": iso(self._relay_waiting.get(p)),
                     "last_lag": self._relay_last.get(p)} for p, s in sorted(self._redis["streams"].items())]}
                redis.pop("streams")
            return {
                "version": self.version, "now": iso(now), "started": iso(self.started), "api_base": self.api_base,
                "consumer": self.consumer, "kijito": dict(self._kijito), "personas": personas,
                "cursors": rows, "other_cursors": len(others), "pending": pending, "parked": parked,
                "confirmations": {"last_hour": len(confirmed), "rows": confirmed[:50]},
                "wakes": {"measured": "from the notify answer announcing the mail to this machine's hand-over",
                          "rows": list(self._wakes)},
                "redis": redis, "problems": sorted(self._problems.values()),
            }

    def _persona(self, name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        unread, urgent = self._unread.get(name, (0, 0))
        return {"persona": name, "unread": unread, "urgent": urgent, "listed": name in self._listed,
                "pending": sum(len(p["ids"]) for r in rows for p in r.get("pending") or [] if p["holder"]),
                "parked": sum(len(r.get("parked") or []) for r in rows),
                "cursors": [{"consumer": r["consumer"], "cursor": r.get("cursor"), "status": r["status"],
                             "lock": r.get("lock") if r.get("lock") == "free" else "held"} for r in rows]}

    def _publish(self) -> None:
        """Serialise the snapshot when what it shows changed (`version` and `now` aside), and wake readers."""
        with self._lock:
            snap = self.snapshot()
            same = {k: v for k, v in snap.items() if k not in ("version", "now")}
            key = json.dumps(same, default=str)  # serialised once: the text is this with version and time
            if key == self._key:
                return
            self._key = key
            self.version += 1
            head = json.dumps({"version": self.version, "now": snap["now"]})
            self.text = head[:-1] + ", " + key[1:]
        with self._changed:
            self._changed.notify_all()

    def current(self) -> tuple[int, str]:
        """(version, the snapshot as JSON), read together."""
        with self._lock:
            return self.version, self.text

    def wake(self) -> None:
        """Wake every `wait_newer` now (the server is closing)."""
        with self._changed:
            self._changed.notify_all()

    def wait_newer(self, version: int, timeout: float) -> bool:
        """Block until `version` is outdated (True) or `timeout` passes (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.version != version, timeout)
