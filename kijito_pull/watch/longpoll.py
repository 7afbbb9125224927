"""The Kijito watch loop's wake: one account-wide `/api/notify/pending` long-poll at a time (interval polls
only where the server does not long-poll).

Runs in its own thread with its own HTTP session and hands each count answer to the loop's handler on
this thread (or posts it to the loop's queue), so a held long-poll never blocks a delivery, an
acknowledgement or a clean shutdown. It blocks in the request or in the pacing the protocol asks for
(core/longpoll.py), never on a tick of its own.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

from kijito_pull.core.api import KijitoClient
from kijito_pull.core.longpoll import Counts, LongPoll, NotifyFailed
from kijito_pull.core.models import ApiError

# After an answer with news, the next hold is sent once the loop has handled that answer (or after this
# long at most): sent at once, it raced the loop's inbox read for the one interpreter lock and put about
# a millisecond on every wake. Mail arriving meanwhile is not missed: the old cursor is answered at once.
HANDOFF_WAIT = 2.0


class Notifier(threading.Thread):
    """Polls notify/pending forever (until stopped), posting Counts or NotifyFailed to `out`.

    With `handle`, a Counts answer is handled on this thread instead (`handle(item)`, before the next
    request): the wake then costs no hand-off to another thread. NotifyFailed is always posted."""

    def __init__(self, client: KijitoClient, protocol: LongPoll, out: queue.Queue, stop: threading.Event,
                 clock: Callable[[], float] = time.monotonic, handoff_wait: float = HANDOFF_WAIT,
                 handle: Callable[[Counts], None] | None = None):
        super().__init__(name="kijito-notify", daemon=True)
        self.client = client
        self.protocol = protocol
        self.out = out
        self.stop_event = stop
        self.clock = clock
        self.handoff_wait = handoff_wait
        self.handle = handle
        self.kick = threading.Event()  # set to cut an interval sleep short (e.g. after a failed pull)

    def run(self) -> None:
        while not self.stop_event.is_set():
            started = self.clock()
            wait, cursor = self.protocol.request()
            retry_after = None
            try:
                item: Counts | NotifyFailed = self.protocol.on_success(
                    self.client.notify_pending(wait=wait, cursor=cursor))
            except ApiError as exc:
                item = self.protocol.on_failure(exc)
                retry_after = exc.retry_after
            if self.stop_event.is_set():
                return
            if self.handle is not None and isinstance(item, Counts):
                self.handle(item)
            else:
                self.out.put(item)
            if self.handle is None and isinstance(item, Counts) and self.protocol.advanced and self.handoff_wait > 0:
                # Let the loop read the inbox alone; the spacing below still counts from `started`.
                item.handled.wait(self.handoff_wait)
                if self.stop_event.is_set():
                    return
            pause = self.protocol.delay(self.clock() - started, retry_after)
            if pause > 0:
                self.kick.clear()
                self.kick.wait(pause)
