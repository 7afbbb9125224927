"""SIGTERM and SIGINT as a request to stop a long-running command (`watch`, `relay`, `sandbox`).

`StopSignals(stop)` is a context manager: inside it, SIGTERM and SIGINT set the `threading.Event` the
command's loop waits on (`received` keeps the first one, for a command whose exit status depends on
which), optional extra handlers (SIGHUP for `watch`) run as given, and on leaving the handlers that were
there before come back. Each command enters it first thing in its `run`, before any connection, so a
stop during its own start-up (a slow connect, a cursor seed) ends it cleanly too; before that,
`cli.early` covers the imports. Off the main thread, where Python cannot install handlers, it installs
nothing: the caller stops the loop through the event.
"""

from __future__ import annotations

import signal
import threading
from typing import Callable


class StopSignals:
    """SIGTERM/SIGINT set `stop` while the block runs; `received` is the first of them, or None."""

    def __init__(self, stop: threading.Event, also: dict[int, Callable[[], None]] | None = None):
        self.stop = stop
        self.also = also or {}
        self.received: int | None = None
        self.saved: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.saved[sig] = signal.signal(sig, self._end)
        for sig, call in self.also.items():
            self.saved[sig] = signal.signal(sig, lambda *_, call=call: call())
        return self

    def _end(self, signum: int, frame: object) -> None:  # noqa: ARG002 - a signal handler's signature
        if self.received is None:
            self.received = signum
        self.stop.set()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self.saved.clear()
