"""A mail source's wake (core/source.py's `Wake`): block until one persona's mail may have changed.

`Wakeup` is what one wait says, for whichever source answered it; `KijitoWake` is the Kijito source's:
one `GET /api/notify/pending` long-poll (core/longpoll.py's protocol) on a connection of its own, the
persona's unread and urgent counts telling news from a quiet answer. (The Redis source's is XREAD BLOCK
on the persona's stream: sources/redis_wake.py.) A wait never raises: a failure is news (look again),
with the pause the protocol asks for before the next one. `WakeThread` runs a wake on a thread of its
own, posting each `Wakeup` to a queue: the push watchers (harnesses/session/pushwatch.py), and the
watch loop of a source other than Kijito (watch/loop.py), whose main thread then blocks on that queue.
The thread itself only ever blocks, in the wait or in the pause after it: nothing here ticks.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from kijito_pull.core import urgency
from kijito_pull.core.longpoll import Counts, LongPoll
from kijito_pull.core.models import ApiError

BRIEF_HOLD = 1  # seconds one wait holds at most when the caller asks for a brief one


@dataclass(frozen=True)
class Wakeup:
    """What one wait said. `news`: something may be new (or the wait failed): look again. `urgent`: urgent
    mail announced as arrived (Kijito's count rose; rows carry no flag). `covered`: the seconds this answer
    vouches nothing was new (0: it vouches nothing). `pause`: seconds to wait before the next wait."""

    news: bool
    urgent: int = 0
    covered: float = 0.0
    pause: float = 0.0
    failed: ApiError | None = None


class KijitoWake:
    """The Kijito source's wake for one persona: long-polls `notify/pending` with `client` (its own
    connection, closed by `close`); `hold` seconds asked of the server, `poll` between polls when the
    server does not long-poll. Made before the caller's first look, it asks once (holding at most a
    second) for the server's cursor and counts now, so the first wait holds from a point before that
    look: mail that arrives after it wakes the caller, and the first answer is not news by itself."""

    def __init__(self, client: Any, persona: str, *, hold: int, poll: float):
        self.client = client
        self.persona = persona
        self.poll = poll
        self.protocol = LongPoll(hold, poll)
        self._unread: int | None = None
        self._urgent: int | None = None
        if hold > 0:
            try:
                self._counts(self.protocol.on_success(client.notify_pending(wait=BRIEF_HOLD)))
            except ApiError as exc:
                self.protocol.on_failure(exc)  # the first wait asks afresh; a failure is news there
                self.protocol.failures = 0

    def wait(self, brief: bool = False) -> Wakeup:
        started = time.monotonic()
        hold, cursor = self.protocol.request()
        if brief and hold:
            hold = BRIEF_HOLD
        try:
            counts = self.protocol.on_success(self.client.notify_pending(wait=hold, cursor=cursor))
        except ApiError as exc:
            failed = self.protocol.on_failure(exc)
            pause = self.poll if failed.unavailable else self.protocol.delay(time.monotonic() - started,
                                                                             exc.retry_after)
            return Wakeup(True, pause=pause, failed=exc)
        rose, arrived = self._counts(counts)
        return Wakeup(counts.advanced or rose, urgent=arrived, covered=float(hold or self.poll),
                      pause=self.protocol.delay(time.monotonic() - started))

    def _counts(self, counts: Counts) -> tuple[bool, int]:
        """(this persona's unread count rose, urgent mail announced as arrived), remembering the counts."""
        row = next((c for c in counts.result.counts if c.persona == self.persona), None)
        unread = row.unread if row else 0
        urgent = (row.unread_urgent or 0) if row else 0
        arrived = urgency.rise(self._urgent, urgent)
        rose = (self._unread is not None and unread > self._unread) or arrived > 0
        self._unread, self._urgent = unread, urgent
        return rose, arrived

    def close(self) -> None:
        self.client.close()


class WakeThread(threading.Thread):
    """Waits on `wake` until `stop` is set, posting each Wakeup to `out` and keeping the pause it asks for (cut
    short by `stop`). A daemon: a wait in progress when `stop` is set ends with the process."""

    def __init__(self, wake: Any, out: queue.Queue, stop: threading.Event):
        super().__init__(name="kijito-wake", daemon=True)
        self.wake, self.out, self.stop_event = wake, out, stop

    def run(self) -> None:
        while not self.stop_event.is_set():
            woke = self.wake.wait()
            if self.stop_event.is_set():
                return
            self.out.put(woke)
            if woke.pause > 0 and self.stop_event.wait(woke.pause):
                return
