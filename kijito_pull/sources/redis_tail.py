"""Has Redis lost what this relay appended? One round trip a check; every remembered id only when it may have.

Redis loses writes as a suffix of the order it ran them in: a restart replays its AOF up to its last
fsync, a promoted replica holds what had reached it, FLUSHALL takes everything. So a write that is still
there proves that every write Redis ran before it is still there. The relay's canary,
`kijito:relay:TOKEN:canary` (TOKEN new for each relay process, so relays never share one), is that
write. A check runs, in one pipeline (one round trip, in this order on one connection):

    GET the canary          is it still what the previous check wrote?
    HMGET kijito:{P}:ids    the messages appended since the previous check, by Kijito id
    SET the canary          a new value, with an expiry of CANARY_TTL (or 10 checks, if longer)

The canary as last written proves everything before that write survived, so only the messages appended
since then need a look, and in an idle fleet a check is those two commands whatever the number of
personas. A canary that is gone or holds another value (a restart, a failover, a flush) sends the check
over every id the relay remembers (up to KNOWN per persona, the newest), in pipelines of CHUNK fields;
so does a check every FULL_EVERY seconds, since a key evicted or deleted on its own is not a suffix loss.

A check that fails (a Redis error: ApiError) changes nothing: what it was to look at is looked at by the
next one, and the canary it may have written counts as unknown. Thread-safe: the relay's watch loop notes
what it appended (`held`) while its guard thread checks.
"""

from __future__ import annotations

import collections
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kijito_pull.sources.redis_streams import failures, ids_key

KNOWN = 1000  # the newest ids per persona a relay remembers, to check that Redis still holds them
CHUNK = 10_000  # HMGET fields per pipeline in a check of every remembered id
FULL_EVERY = 60.0  # seconds between checks of every remembered id, whatever the canary says
CANARY_TTL = 3600  # seconds; the canary of a relay that stopped goes away on its own


@dataclass
class Look:
    """What one check looks at: by persona, the ids to look up (all remembered ones, if `full`)."""

    ids: dict[str, list[int]]
    full: bool
    recent: dict[str, set[int]] = field(default_factory=dict)  # given back if the check fails


class TailCheck:
    """The ids this relay appended and a way to ask Redis, cheaply, whether it still holds them (module
    docstring)."""

    def __init__(self, client, where: str, interval: float, clock: Callable[[], float] = time.monotonic):  # noqa: ANN001
        self.client = client
        self.where = where
        self.clock = clock
        self.canary = f"kijito:relay:{secrets.token_hex(8)}:canary"
        self.ttl = max(CANARY_TTL, int(10 * interval) + 1)
        self.written: str | None = None  # the canary's value as last written, None: unknown (check all)
        self.last_full = clock()
        self.known: dict[str, collections.OrderedDict[int, None]] = {}
        self.recent: dict[str, set[int]] = {}
        self.checks = self.full_checks = 0
        self._lock = threading.Lock()
        self._sequence = 0

    def held(self, persona: str, kid: int) -> None:
        """Redis holds message `kid` of `persona` now (appended, by this relay or one before)."""
        with self._lock:
            known = self.known.setdefault(persona, collections.OrderedDict())
            known[kid] = None
            known.move_to_end(kid)
            while len(known) > KNOWN:
                known.popitem(last=False)
            self.recent.setdefault(persona, set()).add(kid)

    def forget(self, persona: str, kid: int) -> None:
        """Stop checking message `kid` (gone from Kijito too: it cannot be appended again)."""
        with self._lock:
            self.known.get(persona, {}).pop(kid, None)
            self.recent.get(persona, set()).discard(kid)

    def recheck(self, persona: str, kids: list[int]) -> None:
        """Look at these ids again at the next check (their refill failed part way)."""
        with self._lock:
            self.recent.setdefault(persona, set()).update(k for k in kids if k in self.known.get(persona, {}))

    def lost(self) -> dict[str, list[int]]:
        """By persona, the ids Redis held and no longer holds, in id order ({}: none). ApiError when Redis
        fails; then what this check was to look at waits for the next one."""
        found = self._check(self._take())
        if found is None:  # the canary was not as written: everything remembered gets a look
            found = self._check(self._take(full=True))
        assert found is not None  # a full look never asks for another
        return found

    def _check(self, look: Look) -> dict[str, list[int]] | None:
        try:
            with failures(self.where):
                found = self._ask(look)
        except BaseException:
            self._give_back(look)
            raise
        if found is None:
            self._give_back(look)  # the full look that follows takes these again
        return found

    def _take(self, full: bool = False) -> Look:
        with self._lock:
            full = full or self.written is None or self.clock() - self.last_full >= FULL_EVERY
            recent, self.recent = self.recent, {}
            source = self.known if full else recent
            ids = {p: sorted(kids) for p, kids in source.items() if kids}
        return Look(ids, full, recent)

    def _give_back(self, look: Look) -> None:
        with self._lock:
            for persona, kids in look.recent.items():
                self.recent.setdefault(persona, set()).update(kids)
            self.written = None  # a SET may have run before the failure: its value is not known here

    def _ask(self, look: Look) -> dict[str, list[int]] | None:
        """One check's round trips: {persona: lost ids}, or None when the canary says to look at all."""
        self._sequence += 1
        value = f"{self._sequence}"
        pairs = [(p, kid) for p, kids in look.ids.items() for kid in kids]
        chunks = [pairs[at:at + CHUNK] for at in range(0, len(pairs), CHUNK)] or [[]]
        lost: dict[str, list[int]] = {}
        for n, chunk in enumerate(chunks):
            pipe = self.client.pipeline(transaction=False)
            first, last = n == 0, n == len(chunks) - 1
            if first:
                pipe.get(self.canary)
            by_persona: dict[str, list[int]] = {}
            for persona, kid in chunk:
                by_persona.setdefault(persona, []).append(kid)
            for persona, kids in by_persona.items():
                pipe.hmget(ids_key(persona), [str(k) for k in kids])
            if last:
                pipe.set(self.canary, value, ex=self.ttl)
            replies = pipe.execute()
            if first:
                canary, replies = replies[0], replies[1:]
                if not look.full and canary != self.written:
                    return None
            for (persona, kids), values in zip(by_persona.items(), replies):
                lost.setdefault(persona, []).extend(k for k, v in zip(kids, values) if not v)
        with self._lock:
            self.written = value
            self.checks += 1
            if look.full:
                self.full_checks += 1
                self.last_full = self.clock()
        return {p: sorted(kids) for p, kids in lost.items() if kids}
