"""Pending hand-overs: mail handed to an agent session that the session has not yet been seen to take.

For an agent harness, "the consumer took it" means the model has it, shown by the harness's own record
(a transcript, the pi session), not by our write (docs/delivery.md, "Pending hand-overs"). So a
hand-over to a session is first *pending*, like an entry of a Redis Streams consumer group's pending
entries list (NATS JetStream's AckWait and MaxDeliver play the same part):

- each message handed over gets an `Entry`: who holds it, since when, until when, how many times it
  was shown to a consumer (written out: a batch written one message at a time counts each message as
  it is written, not when the batch is claimed), and the holder's host process when known;
- while its holder lives and is within its deadline, no other session of the same consumer is handed
  that message, and the cursor does not move past it;
- the holder confirms it (the cursor may then move past it) or releases it; when the holder is gone or
  its deadline passed, it is claimed back: unseen again, its count kept, so the next hand-over raises it;
- an entry whose count reached the limit raises one alert when claimed back; the mail stays unseen,
  never dropped.

Entries live in the cursor's state file and change only under the cursor's lock. Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

DEFAULT_TTL = 15 * 60.0  # seconds a hand-over may stay unconfirmed before it is claimed back
DEFAULT_MAX_HANDOVERS = 5  # failed hand-overs of one message before an alert (it stays unseen)
MAX_ENTRIES = 10_000
_MAX_KEY = 200


@dataclass(frozen=True)
class Holder:
    """Who a hand-over is pending with: one agent session.

    key    "<harness>:<session id>" (or any stable name of the session)
    pid    the session's host process, when known, so a holder that died is seen at once
    start  that process's start time (a reused pid is not mistaken for it)
    ttl    seconds after which an unconfirmed hand-over is claimed back even if the holder lives
    renews the holder renews its hold while it lives (MailSource.renew: `exec`, waiting on its command):
           a source that cannot see the holder's process (Redis, a member on another host) claims its
           hand-overs back once a renewal is overdue, rather than only at `ttl`
    """

    key: str
    pid: int | None = None
    start: str | None = None
    ttl: float = DEFAULT_TTL
    renews: bool = False


@dataclass(frozen=True)
class Entry:
    """One message's hand-over record. `holder` is None once it was released or claimed back."""

    holder: str | None
    count: int
    since: str | None = None  # ISO time of the last hand-over
    until: float | None = None  # epoch seconds after which it is claimed back
    pid: int | None = None
    start: str | None = None

    def held_by(self, key: str | None) -> bool:
        return self.holder is not None and self.holder == key

    def handed(self, holder: Holder, now: float, shown: bool = True) -> Entry:
        """Held by `holder`; `shown`: written out now (counted), else only claimed for a later write."""
        return Entry(holder.key, self.count + (1 if shown else 0), _iso(now), now + holder.ttl, holder.pid,
                     holder.start)

    def shown(self) -> Entry:
        """A claimed entry whose message is being written out now: counted."""
        return replace(self, count=self.count + 1)

    def released(self) -> Entry:
        return replace(self, holder=None, until=None, pid=None, start=None)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"holder": self.holder, "count": self.count}
        for name in ("since", "until", "pid", "start"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


#: Is the holder of an entry still alive? None when it cannot tell (then only the deadline decides).
Liveness = Callable[[Entry], "bool | None"]


def process_alive(entry: Entry) -> bool | None:
    """The default liveness: an entry naming its holder's process is alive while that process runs."""
    if entry.pid is None:
        return None
    from kijito_pull.core import process

    return process.alive(entry.pid, entry.start)


def fresh() -> Entry:
    return Entry(holder=None, count=0)


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def is_live(entry: Entry, now: float, alive: Liveness | None) -> bool:
    """Held, within its deadline, and (where that can be told) by a process that still runs."""
    if entry.holder is None or entry.until is None or now >= entry.until:
        return False
    if alive is None:
        return True
    return alive(entry) is not False


def parse(raw: Any, cursor: int | None) -> dict[int, Entry]:
    """The `pending` object of a state file; ValueError when it is malformed (the state is then corrupt)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or len(raw) > MAX_ENTRIES:
        raise ValueError("the state file's pending hand-overs are malformed")
    out: dict[int, Entry] = {}
    for key, value in raw.items():
        if not (isinstance(key, str) and key.lstrip("-").isdigit() and isinstance(value, Mapping)):
            raise ValueError("the state file's pending hand-overs are malformed")
        ident = int(key)
        holder, count = value.get("holder"), value.get("count")
        since, until = value.get("since"), value.get("until")
        pid, start = value.get("pid"), value.get("start")
        if not (
            (holder is None or (isinstance(holder, str) and 0 < len(holder) <= _MAX_KEY))
            and _is_int(count) and count >= 0
            and (since is None or isinstance(since, str))
            and (until is None or (isinstance(until, (int, float)) and not isinstance(until, bool)))
            and (pid is None or (_is_int(pid) and pid > 0))
            and (start is None or isinstance(start, str))
            and (cursor is None or ident > cursor)
        ):
            raise ValueError(f"the state file's pending hand-over of message {key[:20]} is malformed")
        out[ident] = Entry(holder, count, since, float(until) if until is not None else None, pid, start)
    return out


def dump(entries: Mapping[int, Entry]) -> dict[str, Any]:
    return {str(ident): entries[ident].as_json() for ident in sorted(entries)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
