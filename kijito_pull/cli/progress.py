"""Progress for long work on a terminal, and silence everywhere else (pipes, files, --quiet)."""

from __future__ import annotations

import time
from typing import IO


class WalkProgress:
    """Reports a catch-up walk's pages on one self-overwriting stderr line, once it is worth showing."""

    SHOW_AFTER_PAGES = 3

    def __init__(self, stream: IO[str], persona: str, enabled: bool):
        self.stream = stream
        self.persona = persona
        self.enabled = enabled
        self.shown = False
        self.started = time.monotonic()

    @classmethod
    def for_terminal(cls, stream: IO[str], persona: str, quiet: bool) -> WalkProgress:
        isatty = getattr(stream, "isatty", None)
        return cls(stream, persona, enabled=not quiet and bool(isatty and isatty()))

    def __call__(self, pages: int, messages: int) -> None:
        if not self.enabled or pages < self.SHOW_AFTER_PAGES:
            return
        self.shown = True
        self.stream.write(f"\rkijito-pull: {self.persona}: catching up: {pages} pages back, {messages} new "
                          f"messages found ({time.monotonic() - self.started:.1f} s)")
        self.stream.flush()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
