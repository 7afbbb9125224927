"""Kijito's own read flag as a confirmed receipt (opt-in per consumer: `--mark-read`, config `mark_read`).

For runners whose state does not outlive the run (a CI container is always at first contact): once a
hand-over is confirmed, the moment the cursor moves past it, the mail at or below the cursor is marked
read on the server, so a fresh runner's first contact, which delivers only unread mail, finds nothing
to hand over again. `ReadReceipts` wraps a Kijito source (core.engine.Engine) and is itself a
`MailSource` (core/source.py): after every pull and every settle that moved the cursor, it marks.

The server marks every row an inbox window returns (shared/kijito-api.md: `mark_read`), so each mark is
a window shaped so that nothing above the cursor can be in it: `before_id = cursor + 1`, walked backward
with `next_before_id` while the server says it withheld older rows, and stopped early at the first page
whose rows were all read already (earlier marks reached below it) or at the position the last mark
reached. A confirmation outside a pull (SessionEnd's, `exec`'s) is followed by one pull that delivers
nothing, so the cursor moves past it before the run ends. Mail above the cursor (delivered out of order,
or pending with a session) is left unread: a fresh runner may get it again, a duplicate, never a loss.

How far the marks reached is kept beside the cursor file (`<cursor>.marked`, one integer, 0600, written
atomically, read without following links or blocking). A mark that fails (the server is down, an
answer that cannot be trusted) changes nothing there and is simply tried again after the next pull:
it costs at most a duplicate on a fresh runner, never a loss, and never fails the pull itself (the
consumer already has its mail). The last failure is kept in `problem` for `status` and the caller.

Not the default: other tools (people, dashboards) read the same flag. An operator turns receipts on once
per persona (config `[personas.NAME] mark_read = true`), and every entry point of that persona honours it.

A sender can wait for the receipt (`kijito-pull send --wait seen`, core/journey.py). So that it can tell
a recipient that emits none from one that has not confirmed yet, each cursor that emits receipts publishes
a marker beside its file (`<cursor>.receipts`, 0600, written before its first pull with receipts on), and a
cursor pulled with receipts off takes its marker back (`withdraw`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from kijito_pull.core.files import ensure_private_dir, open_regular
from kijito_pull.core.models import ApiError, InboxPage
from kijito_pull.core.pending import Holder
from kijito_pull.core.source import OpenPull
from kijito_pull.core.state import StateError

MAX_MARK_PAGES = 50  # windows one mark walks at most; the rest is reached by the next mark
ENV = "KIJITO_PULL_MARK_READ"
MARKER_SUFFIX = ".receipts"  # beside a cursor file: this cursor emits receipts (module docstring)


def marker_path(cursor_file: Path) -> Path:
    """Where the cursor of `cursor_file` says it emits receipts."""
    return Path(str(cursor_file) + MARKER_SUFFIX)


def publish(cursor_file: Path) -> None:
    """Say that this cursor emits receipts (once; the file's first line is since when). Best effort."""
    path = marker_path(cursor_file)
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()).encode("ascii"))
        finally:
            os.close(fd)


def withdraw(cursor_file: Path) -> None:
    """This cursor is pulled without receipts now: its marker, if any, goes. Best effort."""
    with contextlib.suppress(OSError):
        os.unlink(marker_path(cursor_file))


def published(cursor_file: Path) -> bool:
    """Does the cursor of `cursor_file` say it emits receipts?"""
    return os.path.lexists(marker_path(cursor_file))


class Marker(Protocol):
    """What marks a window read (core.api.KijitoClient.mark_read_below)."""

    def mark_read_below(self, persona: str, before_id: int) -> InboxPage: ...


class ReadReceipts:
    """A Kijito source whose confirmed mail is also marked read on the server (module docstring). Every
    other attribute is the wrapped engine's (`store`, `client`, `lock_timeout`, ...)."""

    def __init__(self, engine: Any, marker: Marker, *, max_pages: int = MAX_MARK_PAGES):
        self.engine = engine
        self.marker = marker
        self.max_pages = max_pages
        self.problem: str | None = None  # why the last mark failed (None: it went through, or none was due)
        self.marked_path = Path(str(engine.store.path) + ".marked")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    # -- the MailSource contract: the engine's, then a mark -----------------------------------------------

    @contextlib.contextmanager
    def open(self, peek: bool = False, holder: Holder | None = None) -> Iterator[OpenPull]:
        if not peek and not published(self.engine.store.path):  # once: one lstat on later pulls
            # the marker before the cursor file: a sender never sees this cursor without it
            store = self.engine.store
            with contextlib.suppress(StateError):
                ensure_private_dir(store.path.parent, store.root)
            publish(store.path)
        with self.engine.open(peek=peek, holder=holder) as pull:
            yield pull
        if not peek:
            self.mark()

    def settle(self, holder: str, confirmed: Iterable[int] = (), released: Iterable[int] = (),
               shown: Iterable[int] = ()) -> None:
        confirmed = list(confirmed)
        self.engine.settle(holder, confirmed=confirmed, released=released, shown=shown)
        if not confirmed:
            return
        # A confirmation outside a pull (SessionEnd, `exec`) does not move the cursor: the next pull does. An
        # ephemeral runner has no next pull, so pull once now (nothing is delivered) to move it, then mark.
        try:
            with self.engine.open():
                pass
        except (ApiError, StateError) as exc:
            self.problem = f"marking mail read failed ({exc}); tried again after the next pull"
            return
        self.mark()

    def held_by(self, holder: str) -> list[int]:
        return self.engine.held_by(holder)

    def unseen(self, exclude: Iterable[int] = ()) -> list[int]:
        return self.engine.unseen(exclude)

    def remarks(self, delivered: int) -> list[str]:
        """The engine's, and why the last mark waits (the mail was delivered; only the receipt waits)."""
        return [*([f"{self.engine.persona}: {self.problem}"] if self.problem else []), *self.engine.remarks(delivered)]

    # -- marking -----------------------------------------------------------------------------------------

    def cursor(self) -> int | None:
        """The confirmed-contiguous watermark now (None: no cursor yet, or a damaged file)."""
        state = self.engine.store.load().state
        return state.cursor if state is not None else None

    def marked(self) -> int | None:
        """How far the marks have reached (None: never, or the record is unreadable: mark again)."""
        try:
            fd = open_regular(self.marked_path, os.O_RDONLY, "the mark-read record")
        except (OSError, StateError):
            return None
        try:
            raw = os.read(fd, 64).decode("ascii", "replace").strip()
        except OSError:
            return None
        finally:
            os.close(fd)
        return int(raw) if raw.isdigit() and len(raw) <= 19 else None

    def _keep(self, upto: int) -> None:
        tmp = self.marked_path.with_name(f".{self.marked_path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, f"{upto}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.marked_path)

    def mark(self) -> bool:
        """Mark the mail at or below the cursor read, if the cursor moved past the last mark. True when
        nothing was due or the mark went through; False (with `problem`) when it must be tried again."""
        try:
            upto = self.cursor()
            done = self.marked()
            if upto is None or upto < 0 or (done is not None and done >= upto):
                return True
            before = upto + 1
            for _ in range(self.max_pages):
                page = self.marker.mark_read_below(self.engine.persona, before)
                if any(row.id > upto for row in page.messages):
                    raise ApiError(f"a mark-read window below {before} returned id "
                                   f"{max(row.id for row in page.messages)}")
                fresh = [row for row in page.messages if not row.read]
                reached_last = done is not None and any(row.id <= done for row in page.messages)
                more = page.continuation
                if not isinstance(more, int) or isinstance(more, bool) or not fresh or reached_last:
                    break  # the chain ends (or makes no claim), or the marks reached below here before
                if more >= before:
                    raise ApiError(f"a mark-read window below {before} continued at {more}")
                before = more
            self._keep(upto)
        except (ApiError, OSError) as exc:
            self.problem = f"marking mail read failed ({exc}); tried again after the next pull"
            return False
        self.problem = None
        return True
