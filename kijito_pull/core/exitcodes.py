"""The one exit-code enum every command returns, so scripts can branch on meaning, not on text."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """The exit status of every command (README, "Exit codes"); cli/main.py maps failures onto it."""

    #: The command did its job, with or without mail.
    OK = 0
    #: The source failed: the server was unreachable, answered something we cannot trust, or mail could
    #: not be handed over. Nothing was skipped; the cursor did not move past anything undelivered.
    SOURCE_FAILED = 1
    #: Usage or configuration error (bad flag, missing token, unsafe token file, bad persona...).
    #: Detected before any request is sent.
    USAGE = 2
    #: Interrupted by Ctrl-C (SIGINT), as shells report it (128 + 2); whatever was handed over is kept.
    INTERRUPTED = 130
