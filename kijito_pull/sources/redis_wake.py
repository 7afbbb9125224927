"""The Redis source's wake: XREAD BLOCK on a persona's stream, which takes nothing from any group.

`RedisWake` is core/source.py's `Wake` for one (persona, group) source (the push watchers and hooks wait on
it through `MailSource.wake`); `wait` blocks on several personas' streams at once (`watch --source`).
Entries given back or claimed back append nothing, so a caller also sweeps now and then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kijito_pull.core.models import ApiError
from kijito_pull.core.wake import BRIEF_HOLD, Wakeup
from kijito_pull.sources.redis_streams import failures

if TYPE_CHECKING:
    from kijito_pull.sources.redis_streams import RedisSource


def wait(sources: dict[str, tuple[RedisSource, str]], timeout: float) -> bool:
    """The wake: block (XREAD BLOCK, which takes nothing from any group) until an entry is appended after
    the given top id of any of `sources` (persona -> (source, top)), or `timeout` seconds pass. True when
    something was appended. All sources share one client."""
    if not sources:
        return False
    first = next(iter(sources.values()))[0]
    with failures(first.where):
        answer = first.client.xread({s.stream: top for s, top in sources.values()}, count=1,
                                    block=max(1, int(timeout * 1000)))
    return bool(answer)


class RedisWake:
    """The wake of one persona's stream: XREAD BLOCK (which takes nothing from any group) after the newest
    entry seen, read when the wake is made, so an entry appended after the caller's first look wakes it.
    Entries given back or claimed back append nothing: a caller sweeps now and then (`covered` is 0)."""

    def __init__(self, source: RedisSource, hold: int):
        self.source = source
        # A blocked read must answer before the client's socket timeout would cut it off.
        limit = source.client.connection_pool.connection_kwargs.get("socket_timeout") or hold + 1
        self.hold = max(0.1, min(float(hold), limit - 0.5))
        self.failures = 0
        try:
            self.after: str | None = source.top()
        except ApiError:
            self.after = None  # read again by the first wait, which reports news (look again)

    def wait(self, brief: bool = False) -> Wakeup:
        s = self.source
        try:
            if self.after is None:
                self.after = s.top()
                return Wakeup(True)
            with failures(s.where):
                answer = s.client.xread({s.stream: self.after}, count=1,
                                        block=int(1000 * min(BRIEF_HOLD, self.hold) if brief else 1000 * self.hold))
        except ApiError as exc:
            self.failures += 1
            return Wakeup(True, pause=min(30.0, 2.0 ** min(self.failures, 5) / 2), failed=exc)
        self.failures = 0
        rows = [sid for _key, entries in (answer or []) for sid, _fields in entries]
        if rows:
            self.after = rows[-1]
        return Wakeup(bool(rows))

    def close(self) -> None:
        pass  # the source's client is the context's, closed with it
