"""The Redis source's wake: XREAD BLOCK on personas' streams, which takes nothing from any group.

`RedisWake` is core/source.py's `Wake` (core/wake.py's `Wakeup` says what one wait saw): for one
(persona, group) source, `RedisSource.wake` (the push watchers and hooks wait on it), or for several
personas' streams at once in one blocked read (`several`: the watch loop of `watch --source`, watch/loop.py,
runs it on a `WakeThread`). Entries given back or claimed back append nothing, so a caller also sweeps now
and then (`covered` is 0).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kijito_pull.core.models import ApiError
from kijito_pull.core.wake import BRIEF_HOLD, Wakeup
from kijito_pull.sources.redis_streams import failures

if TYPE_CHECKING:
    from kijito_pull.sources.redis_streams import RedisSource


class RedisWake:
    """The wake of one or more personas' streams: XREAD BLOCK (which takes nothing from any group) after the
    newest entry seen of each, read when the wake is made, so an entry appended after the caller's first look
    wakes it. After news each stream it named moves on to its newest entry (read before the wait returns, so
    before the caller's next look: nothing appended later is passed over, and a burst wakes the caller once
    rather than once per entry). `client` (default: the first source's) blocks for `hold` seconds at most,
    cut below its socket timeout so a quiet wait is never taken for a failure."""

    def __init__(self, sources: Iterable[RedisSource], hold: float, client: Any = None):
        self.sources = list(sources)
        self.client = client if client is not None else self.sources[0].client
        # A blocked read must answer before the client's socket timeout would cut it off.
        limit = self.client.connection_pool.connection_kwargs.get("socket_timeout") or hold + 1
        self.hold = max(0.1, min(float(hold), limit - 0.5))
        self.where = self.sources[0].where
        self.failures = 0
        self.after: dict[str, str] | None = None
        try:
            self.after = self._tops(self.sources)
        except ApiError:
            pass  # read again by the first wait, which reports news (look again)

    def _tops(self, sources: Iterable[RedisSource]) -> dict[str, str]:
        """Each stream's newest entry id now ("0-0": empty), in one round trip."""
        streams = [s.stream for s in sources]
        with failures(self.where):
            pipe = self.client.pipeline(transaction=False)
            for stream in streams:
                pipe.xrevrange(stream, "+", "-", count=1)
            rows = pipe.execute()
        return {stream: (found[0][0] if found else "0-0") for stream, found in zip(streams, rows)}

    def wait(self, brief: bool = False) -> Wakeup:
        try:
            if self.after is None:
                self.after = self._tops(self.sources)
                return Wakeup(True)
            hold = min(BRIEF_HOLD, self.hold) if brief else self.hold
            with failures(self.where):
                answer = self.client.xread(dict(self.after), count=1, block=max(1, int(1000 * hold)))
            woken = [key for key, entries in (answer or []) if entries]
            if woken:
                self.after.update(self._tops([s for s in self.sources if s.stream in woken]))
        except ApiError as exc:
            self.failures += 1
            self.after = None  # Redis may come back without what it held: the next wait reads afresh
            return Wakeup(True, pause=min(30.0, 2.0 ** min(self.failures, 5) / 2), failed=exc)
        self.failures = 0
        return Wakeup(bool(woken))

    def close(self) -> None:
        pass  # the client is the caller's (the context's), closed with it


def several(sources: Iterable[RedisSource], hold: float, client: Any = None) -> RedisWake:
    """One wake for several personas' streams on one Redis (the watch loop's; `client`: its own connection
    pool, whose socket timeout allows the hold)."""
    return RedisWake(sources, hold, client)
