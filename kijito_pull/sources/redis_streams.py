"""The Redis Streams mail source: core/source.py's contract mapped onto a stream and its consumer groups.

Keys per persona (the hash tag `{persona}` keeps them in one Redis Cluster slot):

    kijito:{P}:mail   the stream; one entry per Kijito message: kid, from, created, content, urgent
    kijito:{P}:ids    hash Kijito id -> stream entry id: the relay's idempotence record (`append`)
    kijito:{P}:dead   the dead-letter stream: parked poison mail (kid, ..., group, attempts, reason)
    kijito:{P}:holders:{G}  hash stream id -> the holder of a hand-over in group G: its key, deadline
                      (now + the longer of claim_after and Holder.ttl), host, pid and start time
    kijito:{P}:acks   capped stream (ACKS_KEPT): one entry per acknowledgement, sid, group and holder;
                      its entry id's time is when (`track`, the dashboard: sources/redis_journey.py)

A consumer (`--consumer NAME`) is a consumer group of the stream, created at `0` (a new group gets all
the stream holds). A member of the group is a Redis consumer name: the holder's key for an agent
session, else a per-process name (`host:pid`). The contract, call by call:

    open()            claim back (XAUTOCLAIM's rule, done with XPENDING + XCLAIM so the holder's own
                      deadline counts): entries given back, a hand-over past its holder's deadline or
                      whose holder process on this host is gone, an entry with no holder record idle
                      past `claim_after` (a script member that died); then this member's own pending
                      entries (XPENDING + XRANGE: read without counting), then XREADGROUP '>' for new
                      entries. Entries whose count reached `max_attempts` are parked (XADD to the dead
                      stream, then XACK).
    pending           what this pull read for itself, not held, sorted by Kijito id
    ack / confirm     XACK
    hand_over         the entries stay pending with the holder (their consumer name is the holder's
                      key, so XPENDING names the holder); one retaken before is XCLAIMed again (counted,
                      its deadline restarted)
    retake / release  given back: XCLAIM to the pool member `~free` with an idle time so large that the
                      next XAUTOCLAIM of any member takes it at once, and RETRYCOUNT keeping its count
    refuse            the delivery count (XPENDING) is the attempt count; at `max_attempts` parked
    close             everything read but neither acknowledged nor handed over is given back, with the
                      count it had before this pull (mail a sink never reached does not count)
    settle / held_by  the same, outside a pull, through the `ids` hash and XPENDING of the holder
    renew             a holder that renews (`exec`): its records' deadlines moved to now + claim_after
                      (never past now + its ttl at the hand-over), atomically (RENEW_LUA), so a holder
                      that died on another host is claimed back once claim_after passes unrenewed
    unseen            a peek: entries after the group's last-delivered id, and pending entries that are
                      claimable now; nothing changes
    retry_parked      `kijito-pull parked --retry ID`: the parked entry is put back into this group's
                      pending list only (XCLAIM ... FORCE of its own stream entry to `~free`, given back,
                      its delivery count 0) and its dead-letter rows of this group deleted, in one Lua
                      script (RETRY_LUA): the next pull of any member hands it over once, no other group
                      sees it again, and a crash leaves it either parked or retried, never both or neither

The delivery count counts hand-overs: XREADGROUP and a claim raise it, a give-back restores it. A
holder's liveness is known only on its own host; elsewhere its deadline claims it back.
Every Redis failure raises `core.models.ApiError` (one line, never the URL's password); nothing is
acknowledged then. Imports only the core and the optional `redis` client (pip install kijito-pull[redis]).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kijito_pull.core import process
from kijito_pull.core.errors import MissingExtra
from kijito_pull.core.models import ApiError, Message, first_line
from kijito_pull.core.pending import DEFAULT_TTL, Holder
from kijito_pull.core.source import HoldingPull, Look
from kijito_pull.sources.redis_scripts import APPEND_LUA, RENEW_LUA, RETRY_LUA

SCHEMES = ("redis", "rediss")
FREE = "~free"  # the pool member given-back entries wait with (a holder key never starts with "~")
GIVEN_BACK_IDLE_MS = 10**12  # idle time of a given-back entry: past any member's claim_after
DEFAULT_MAX_ATTEMPTS = 10
READ_COUNT = 1000  # entries one pull reads at most (the rest come with the next pull)
_SCAN = 10_000
ACKS_KEPT = 10_000  # acknowledgements the acks stream keeps (about; trimmed with MAXLEN ~)

def stream_key(persona: str) -> str:
    return f"kijito:{{{persona}}}:mail"


def ids_key(persona: str) -> str:
    return f"kijito:{{{persona}}}:ids"


def dead_key(persona: str) -> str:
    return f"kijito:{{{persona}}}:dead"


def acks_key(persona: str) -> str:
    return f"kijito:{{{persona}}}:acks"


def holders_key(persona: str, group: str) -> str:
    return f"kijito:{{{persona}}}:holders:{group}"


def _record(raw: str | None) -> dict[str, Any] | None:
    """A holder record, or None when absent or unreadable (then only claim_after decides)."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("until"), (int, float)):
        return None
    return value


def default_member() -> str:
    """A per-process member name: unique among processes of all machines that share the group."""
    return f"{socket.gethostname()}:{os.getpid()}"


def safe_url(url: str) -> str:
    """The URL as it may be shown: scheme, host, port and db, never a user or password."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def check_url(url: str) -> str:
    """ValueError (one line) unless `url` is a redis:// or rediss:// URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError as exc:
        raise ValueError(f"the Redis URL is malformed ({exc})") from None
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ValueError(f"a Redis source is redis://HOST:PORT/DB (or rediss://), not {safe_url(url)[:60]!r}")
    return url


def connect(url: str, timeout: float = 5.0) -> Any:
    """A redis client for `url` (checked). MissingExtra (a usage error, exit 2: nothing was read) when the
    `redis` package is not installed."""
    check_url(url)
    try:
        import redis
    except ImportError:
        raise MissingExtra("a Redis source", "redis", "redis") from None
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=timeout, socket_connect_timeout=timeout)


@contextlib.contextmanager
def failures(where: str) -> Iterator[None]:
    """Turn any Redis error into one ApiError line naming `where` (a safe URL), never a traceback."""
    import redis

    try:
        yield
    except redis.RedisError as exc:
        raise ApiError(f"Redis at {where} failed: {first_line(exc)}", transient=True) from None


def fields_of(message: Message) -> list[str]:
    """The APPEND_LUA arguments of one message."""
    urgent = "" if message.urgent is None else ("1" if message.urgent else "0")
    return [str(message.id), message.sender, message.created, message.content, urgent]


def message_of(fields: dict[str, str]) -> Message:
    urgent = fields.get("urgent", "")
    return Message(id=int(fields["kid"]), sender=fields.get("from", ""), content=fields.get("content", ""),
                   created=fields.get("created", ""), read=False,
                   urgent=None if urgent == "" else urgent == "1")


class Appender:
    """The relay's writer: appends each Kijito message to its persona's stream once (APPEND_LUA)."""

    def __init__(self, client: Any, where: str):
        self.client = client
        self.where = where
        self._script = client.register_script(APPEND_LUA)

    def append(self, persona: str, message: Message) -> bool:
        """True when appended now, False when some relay appended it before. ApiError on failure."""
        with failures(self.where):
            added, _sid = self._script(keys=[stream_key(persona), ids_key(persona)], args=fields_of(message))
        return bool(int(added))


@dataclass
class _Read:
    """One entry this pull read: its stream id, message, and the count it had before this pull."""

    sid: str
    message: Message
    before: int
    count: int
    fresh: bool = True  # read anew or claimed back by this pull (else: this member held it before)
    handed: bool = False
    done: bool = False  # acknowledged or parked
    refused: bool = False


class RedisPull(HoldingPull):
    """One open pull of one group member (core/source.py's OpenPull over Redis; the module docstring)."""

    pinned = False
    problem = None
    hidden_unread = None

    def __init__(self, source: RedisSource, member: str, holder: Holder | None, peek: bool):
        self.persona = source.persona
        self._source = source
        self._member = member
        self._holder = holder
        self._peek = peek
        self._reads: dict[int, _Read] = {}
        self.pending: list[Message] = []
        self.held: list[Message] = []
        self.signals: list[dict] = []

    # -- reading -----------------------------------------------------------------------------------

    def _load(self) -> None:
        s = self._source
        if self._peek:
            self.pending = [m for _sid, m in s.peek()]
            return
        s.ensure_group()
        claimed = s.autoclaim(self._member)
        own = s.pending_of(self._member)
        for sid, count in own.items():
            message = s.entry(sid)
            if message is None:  # trimmed from the stream: nothing left to hand over
                s.xack([sid])
                continue
            before = count - 1 if sid in claimed else count
            self._reads[message.id] = _Read(sid, message, before, count, fresh=sid in claimed)
        for sid, message in s.read_new(self._member):
            self._reads[message.id] = _Read(sid, message, 0, 1)
        for read in sorted(self._reads.values(), key=lambda r: r.message.id):
            limit = s.max_attempts
            if limit and read.before >= limit:
                self.signals.append(self._park(read, f"handed over {read.before} times, never confirmed"))
                continue
            mine = self._holder is not None and not read.fresh
            read.handed = mine  # what this holder holds stays with it unless retaken or released
            (self.held if mine else self.pending).append(read.message)

    def _park(self, read: _Read, reason: str) -> dict:
        self._source.park(read.sid, read.message, read.before or read.count, reason)
        read.done = True
        return self._source.factory.signal(
            "alert", self.persona, id=read.message.id, attempts=read.before or read.count,
            consumer=self._source.consumer,
            reason=f"message {read.message.id} was {reason}; it is parked in {dead_key(self.persona)} so later "
                   f"mail flows (`kijito-pull parked` lists it)")

    # -- the contract ------------------------------------------------------------------------------

    def ack_all(self, messages: Iterable[Message]) -> None:
        reads = [self._reads[m.id] for m in messages if m.id in self._reads and not self._reads[m.id].done]
        if self._peek or not reads:
            return
        self._source.xack([r.sid for r in reads])
        for r in reads:
            r.done = True

    def refuse(self, message: Message, reason: str = "the consumer did not take it") -> dict | None:
        read = self._reads.get(message.id)
        if read is None or self._peek:
            return None
        limit = self._source.max_attempts
        if limit and read.count >= limit:
            self.pending = [m for m in self.pending if m.id != message.id]
            read.before = read.count
            return self._park(read, f"refused {read.count} times ({reason[:200]})")
        read.refused = True
        return None

    def hand_over(self, messages: Iterable[Message], shown: Iterable[int] | None = None) -> None:
        assert self._holder is not None, "hand_over needs a pull opened with a holder"
        messages = [m for m in messages if m.id in self._reads]
        counted = {m.id for m in messages} if shown is None else set(shown)
        for m in messages:
            read = self._reads[m.id]
            if m.id in counted:
                if read.count == read.before:  # retaken (not counted by this pull's read): count it now
                    read.count = self._source.claim(self._member, read.sid, read.before + 1)
            elif read.count != read.before:
                read.count = self._source.claim(self._member, read.sid, read.before)  # counted when written
            read.handed = True
        self._source.record(self._holder, [self._reads[m.id].sid for m in messages])
        self._hold(messages)

    def _unhold(self, messages: list[Message], given_back: bool) -> None:
        for m in messages:
            read = self._reads[m.id]
            read.handed = False
            read.before = read.count  # its hand-over counted; handed again, it counts again
            if given_back:
                self._source.give_back(read.sid, read.count)
                read.done = True  # given back now: another member may take it at once

    def close(self) -> None:
        """Give back what this pull read and neither acknowledged nor handed over."""
        if self._peek:
            return
        for read in self._reads.values():
            if not (read.done or read.handed):
                self._source.give_back(read.sid, read.count if read.refused else read.before)


class RedisSource:
    """The Redis Streams mail source for one (persona, consumer group) (core/source.py's MailSource).

    `client` is a redis client (`connect`); `member` the consumer name of a pull with no holder (default
    `host:pid`); `claim_after` seconds idle before another member claims an entry back (XAUTOCLAIM);
    `max_attempts` hand-overs or refusals before a message is parked (0: never)."""

    def __init__(self, client: Any, signals: Any, *, persona: str, consumer: str, where: str = "redis",
                 member: str | None = None, claim_after: float = DEFAULT_TTL,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS):
        self.client = client
        self.factory = signals
        self.persona = persona
        self.consumer = consumer
        self.where = where
        self.member = member or default_member()
        self.claim_after = claim_after
        self.max_attempts = max_attempts
        self.stream = stream_key(persona)
        self._group_ready = False

    @contextlib.contextmanager
    def open(self, peek: bool = False, holder: Holder | None = None) -> Iterator[RedisPull]:
        pull = RedisPull(self, holder.key if holder is not None else self.member, holder, peek)
        with failures(self.where):
            pull._load()
        try:
            yield pull
        finally:
            with failures(self.where):
                pull.close()

    def settle(self, holder: str, confirmed: Iterable[int] = (), released: Iterable[int] = (),
               shown: Iterable[int] = ()) -> None:
        confirmed, released = set(confirmed), set(released) - set(confirmed)
        shown = set(shown) - confirmed - released
        if not (confirmed or released or shown):
            return
        with failures(self.where):
            mine = self.pending_of(holder)
            sids = self._sids(confirmed | released | shown)
            acks = [sids[i] for i in confirmed if i in sids]
            if acks:
                self.xack(acks)  # whoever holds it now: the model has the message either way
            for i in released:
                if sids.get(i) in mine:
                    self.give_back(sids[i], mine[sids[i]])
            for i in shown:
                if sids.get(i) in mine:
                    self.claim(holder, sids[i], mine[sids[i]] + 1)

    def held_by(self, holder: str) -> list[int]:
        with failures(self.where):
            self.ensure_group()
            out = []
            for sid in self.pending_of(holder):
                message = self.entry(sid)
                if message is not None:
                    out.append(message.id)
        return sorted(out)

    def renew(self, holder: Holder) -> float | None:
        """Move the deadlines of what `holder` holds to now + claim_after (module docstring); the seconds
        until the next renewal is due (a third of claim_after)."""
        with failures(self.where):
            self.client.eval(RENEW_LUA, 1, holders_key(self.persona, self.consumer), holder.key, repr(time.time()),
                             repr(float(self.claim_after)))
        return max(0.2, self.claim_after / 3)

    def unseen(self, exclude: Iterable[int] = ()) -> list[int]:
        skip = set(exclude)
        with failures(self.where):
            return sorted(m.id for _sid, m in self.peek() if m.id not in skip)

    def look(self, vouch: Any = None) -> Look:
        """What the next pull would take (`peek`); no files, so it vouches nothing (hooks read Redis)."""
        with failures(self.where):
            return Look([m for _sid, m in self.peek()], [])

    def wake(self, hold: int, poll: float) -> Any:
        """The stream's wake (sources/redis_wake.py's RedisWake: XREAD BLOCK); `poll` is not needed."""
        from kijito_pull.sources.redis_wake import RedisWake

        return RedisWake([self], hold)

    def remarks(self, delivered: int) -> list[str]:
        return []

    # -- Redis operations (callers wrap them in `failures`) ----------------------------------------

    def ensure_group(self) -> None:
        if self._group_ready:
            return
        import redis

        try:
            self.client.xgroup_create(self.stream, self.consumer, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def autoclaim(self, member: str) -> set[str]:
        """Claim for `member` what is due back; the stream ids claimed. XAUTOCLAIM's rule, with the
        holder's own deadline where a hand-over recorded one (`holders_key`): an entry given back, one
        whose holder's deadline passed or whose holder process on this host is gone, and one with no
        record idle past claim_after. Each is taken with XCLAIM guarded by the idle time it was seen
        with, so of two members claiming at once only one gets it; the claim counts it."""
        claimed: set[str] = set()
        for sid, idle in self.due(member):
            if self.client.xclaim(self.stream, self.consumer, member, idle, [sid]):
                claimed.add(sid)  # not JUSTID: that would not count it
        if claimed:
            self.client.hdel(holders_key(self.persona, self.consumer), *claimed)
        return claimed

    def due(self, member: str | None) -> list[tuple[str, int]]:
        """(stream id, idle ms) of the group's pending entries due back now, not held by `member`."""
        records = self.client.hgetall(holders_key(self.persona, self.consumer))
        rows = self.client.xpending_range(self.stream, self.consumer, "-", "+", READ_COUNT)
        now, host = time.time(), socket.gethostname()
        out = []
        for row in rows:
            sid, owner, idle = row["message_id"], row["consumer"], int(row["time_since_delivered"])
            if owner == member:
                continue
            record = _record(records.get(sid))
            if owner == FREE:
                due = True
            elif record is not None:
                due = now >= record["until"] or (record.get("host") == host and record.get("pid") is not None
                                                  and not process.alive(record["pid"], record.get("start")))
            else:
                due = idle >= self.claim_after * 1000
            if due:
                out.append((sid, idle))
        return out

    def record(self, holder: Holder, sids: list[str]) -> None:
        """Who holds `sids` and until when (its ttl), so the claim-back keeps the holder's deadline."""
        if not sids:
            return
        now, longest = time.time(), max(self.claim_after, holder.ttl)  # an exec run's hours are not cut
        # A holder that renews keeps its hold a claim_after at a time (`renew`), up to its ttl.
        until = now + (self.claim_after if holder.renews else longest)
        value = json.dumps({"holder": holder.key, "until": until, "expires": now + longest,
                            "host": socket.gethostname(), "pid": holder.pid, "start": holder.start})
        self.client.hset(holders_key(self.persona, self.consumer), mapping={sid: value for sid in sids})

    def pending_of(self, member: str) -> dict[str, int]:
        """Stream id -> delivery count of `member`'s pending entries."""
        rows = self.client.xpending_range(self.stream, self.consumer, "-", "+", _SCAN, consumername=member)
        return {row["message_id"]: int(row["times_delivered"]) for row in rows}

    def entry(self, sid: str) -> Message | None:
        rows = self.client.xrange(self.stream, sid, sid, count=1)
        return message_of(rows[0][1]) if rows else None

    def read_new(self, member: str) -> list[tuple[str, Message]]:
        answer = self.client.xreadgroup(self.consumer, member, {self.stream: ">"}, count=READ_COUNT)
        return [(sid, message_of(fields)) for _key, rows in (answer or []) for sid, fields in rows]

    def xack(self, sids: list[str]) -> None:
        records = self.client.hmget(holders_key(self.persona, self.consumer), sids)
        self.client.xack(self.stream, self.consumer, *sids)
        self.client.hdel(holders_key(self.persona, self.consumer), *sids)
        for sid, raw in zip(sids, records):  # when, and whose record confirmed it (a record, not state)
            holder = (_record(raw) or {}).get("holder") or ""
            self.client.xadd(acks_key(self.persona), {"sid": sid, "group": self.consumer, "holder": holder},
                             maxlen=ACKS_KEPT, approximate=True)

    def claim(self, member: str, sid: str, count: int) -> int:
        """Hold `sid` for `member` now (its deadline restarts), with delivery count `count`."""
        self.client.xclaim(self.stream, self.consumer, member, 0, [sid], retrycount=count, justid=True)
        return count

    def give_back(self, sid: str, count: int) -> None:
        """Deliverable again at once to any member's next pull, its count kept at `count`."""
        self.client.xclaim(self.stream, self.consumer, FREE, 0, [sid], idle=GIVEN_BACK_IDLE_MS,
                           retrycount=count, justid=True)
        self.client.hdel(holders_key(self.persona, self.consumer), sid)

    def park(self, sid: str, message: Message, attempts: int, reason: str) -> None:
        """Poison mail: copied to the dead-letter stream, then acknowledged (a crash between the two
        leaves a duplicate in the dead stream, never a loss)."""
        kid, sender, created, content, urgent = fields_of(message)
        self.client.xadd(dead_key(self.persona), {
            "kid": kid, "from": sender, "created": created, "content": content, "urgent": urgent,
            "group": self.consumer, "attempts": str(attempts), "reason": reason[:200], "sid": sid,
            "since": datetime.datetime.now(datetime.timezone.utc).isoformat()})
        self.xack([sid])

    def parked(self, every_group: bool = False) -> list[dict[str, str]]:
        """This group's (or every group's) parked mail, oldest first (`kijito-pull parked`)."""
        with failures(self.where):
            rows = self.client.xrange(dead_key(self.persona), "-", "+", count=_SCAN)
        return [fields for _sid, fields in rows if every_group or fields.get("group") == self.consumer]

    def retry_parked(self, kid: int) -> str:
        """Hand parked message `kid` over again, to this group only (RETRY_LUA): "retried", "not parked"
        (this group has no dead-letter row for it) or "trimmed" (the stream no longer holds its entry; it
        stays parked). ApiError on a Redis failure (then nothing changed)."""
        with failures(self.where):
            rows = [(did, f) for did, f in self.client.xrange(dead_key(self.persona), "-", "+", count=_SCAN)
                    if f.get("group") == self.consumer and f.get("kid") == str(kid)]
            if not rows:
                return "not parked"
            sid = next((f["sid"] for _did, f in rows if f.get("sid")), None) or \
                self.client.hget(ids_key(self.persona), str(kid))
            if not sid:
                return "trimmed"
            done = self.client.eval(RETRY_LUA, 3, self.stream, dead_key(self.persona),
                                    holders_key(self.persona, self.consumer), self.consumer, sid,
                                    GIVEN_BACK_IDLE_MS, *[did for did, _f in rows])
        return "trimmed" if int(done) < 0 else "retried"

    def peek(self) -> list[tuple[str, Message]]:
        """What the next pull of a new member would take, without changing anything."""
        groups = {g["name"]: g for g in self.client.xinfo_groups(self.stream)} if self.client.exists(self.stream) \
            else {}
        group = groups.get(self.consumer)
        last = group["last-delivered-id"] if group is not None else "0-0"
        out = [(sid, message_of(fields)) for sid, fields in self.client.xrange(self.stream, f"({last}", "+",
                                                                               count=_SCAN)] if last != "0-0" else \
            [(sid, message_of(fields)) for sid, fields in self.client.xrange(self.stream, "-", "+", count=_SCAN)]
        if group is not None:
            for sid, _idle in self.due(None):
                message = self.entry(sid)
                if message is not None:
                    out.append((sid, message))
        return sorted(out, key=lambda pair: pair[1].id)

    def top(self) -> str:
        """The stream's newest entry id now ("0-0": empty), the point `wait` wakes after."""
        with failures(self.where):
            rows = self.client.xrevrange(self.stream, "+", "-", count=1)
        return rows[0][0] if rows else "0-0"

    def lag(self) -> list[dict[str, Any]]:
        """Each group of this persona's stream: its lag, pending count and their holders (`status`)."""
        with failures(self.where):
            if not self.client.exists(self.stream):
                return []
            out = []
            for group in self.client.xinfo_groups(self.stream):
                summary = self.client.xpending(self.stream, group["name"])
                holders = {c["name"]: int(c["pending"]) for c in summary.get("consumers", [])}
                out.append({"group": group["name"], "lag": group.get("lag"), "pending": int(group["pending"]),
                            "holders": holders})
        return out

    def _sids(self, kids: Iterable[int]) -> dict[int, str]:
        kids = sorted(set(kids))
        if not kids:
            return {}
        values = self.client.hmget(ids_key(self.persona), [str(k) for k in kids])
        return {k: v for k, v in zip(kids, values) if v}
