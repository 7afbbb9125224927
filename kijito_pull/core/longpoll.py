"""The long-poll protocol of `GET /api/notify/pending`, sans IO: `LongPoll` (cursor, mode and pacing) and
what one answer says (`Counts`, `NotifyFailed`). The watch loop's Notifier thread (watch/longpoll.py: one
long-poll for the whole account, also the dashboard's) and the Kijito source's wake for one persona
(core/wake.py's `KijitoWake`, which the push watchers and the Claude waker wait on) each drive it with a
client of their own.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kijito_pull.core.models import ApiError, NotifyResult

MIN_SPACING = 0.5  # seconds between request starts when an answer brought nothing new
NEWS_SPACING = 0.05  # ... and after an answer whose cursor advanced (still bounds a server that lies)
MAX_BACKOFF = 60.0


@dataclass(frozen=True)
class Counts:
    """A successful notify answer: unread counts per persona, and whether the account's mail advanced.

    The loop sets `handled` once it has acted on the answer (the Notifier waits for that before its next
    hold after news)."""

    result: NotifyResult
    advanced: bool  # True when the long-poll cursor moved, or when we cannot tell (no long-poll)
    long_polling: bool
    handled: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)


@dataclass(frozen=True)
class NotifyFailed:
    """One failed notify/pending request, as the notifier posts it to the watch loop."""

    error: ApiError
    unavailable: bool  # the endpoint is absent (404): per-persona polling must stand in for it


class LongPoll:
    """The long-poll protocol's client state: cursor, mode and pacing. Pure, so it is tested without HTTP.

    A 2xx without a usable cursor means the server does not long-poll: fall back to interval polling
    and upgrade the moment a cursor appears. A cursor the server rejects (4xx) is dropped, not resent
    forever. On any other failure the previous cursor is kept, so nothing is lost on resume.
    """

    def __init__(self, wait: int, poll_seconds: float, min_spacing: float = MIN_SPACING):
        self.wait = wait
        self.poll_seconds = poll_seconds
        self.min_spacing = min_spacing
        self.cursor: str | None = None
        self.supported = wait > 0  # optimistic until a server answers without a cursor
        self.failures = 0
        self.advanced = False

    def request(self) -> tuple[int | None, str | None]:
        """(wait, cursor) for the next request.

        `wait` is sent even while the server is not long-polling: a server without long-poll ignores it
        and answers at once (and is paced at `poll_seconds`), and one that gains long-poll answers with
        a cursor, which upgrades us without a restart.
        """
        return (self.wait, self.cursor) if self.wait > 0 else (None, None)

    def on_success(self, result: NotifyResult) -> Counts:
        self.failures = 0
        long_polling = self.wait > 0 and result.cursor is not None
        advanced = (not long_polling) or result.cursor != self.cursor
        self.advanced = long_polling and advanced
        if self.wait > 0:
            self.supported = long_polling
        self.cursor = result.cursor if long_polling else None
        return Counts(result, advanced, long_polling)

    def on_failure(self, error: ApiError) -> NotifyFailed:
        self.failures += 1
        if error.status is not None and 400 <= error.status < 500 and self.cursor is not None:
            self.cursor = None  # a rejected cursor: start afresh rather than resend it forever
        return NotifyFailed(error, unavailable=error.status == 404)

    def delay(self, elapsed: float, retry_after: float | None = None) -> float:
        """Seconds to sleep before the next request, given how long the last one took."""
        if retry_after is not None:
            return min(retry_after, MAX_BACKOFF)
        if self.failures:
            return min(MAX_BACKOFF, 2.0 ** min(self.failures, 6) / 2)
        if self.supported and self.wait > 0:
            # An answer with news is followed by the next hold almost at once, or mail arriving in the
            # pause would wait for it; only an early answer with nothing new is spaced out fully.
            spacing = NEWS_SPACING if self.advanced else self.min_spacing
            return max(0.0, spacing - elapsed)
        return max(0.0, self.poll_seconds - elapsed)
