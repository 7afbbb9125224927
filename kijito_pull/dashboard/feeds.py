"""What feeds the dashboard's board (dashboard/board.py), each on a daemon thread of its own:

- Kijito: ONE account-wide `notify/pending` long-poll, the watch loop's own Notifier (watch/longpoll.py,
  core/longpoll.py's protocol and pacing), whatever the number of personas or of open browsers; its
  answers go to `Board.counts`, its failures to `Board.kijito_failed`. The persona directory is read at
  the start and then every `rediscover_every` seconds, as `watch` reads it.
- This machine's cursors: the cursor directory is looked at every `scan_every` seconds (a stat of each
  state file, its ack journal and its confirmation log, no network), and a file that changed is read
  again through core/overview.cursor_row, the reader behind `status --json`; every `full_every` seconds
  every file is read again (a lock taken or freed changes no file). A
  changed confirmation log is read through its `confirmed_since` (the last hour) into `Board.confirmations`.
- Redis, when a source is set: every `redis_every` seconds each persona's group rows
  (core/overview.group_rows) and its stream's newest entry, through the callables the command gives.

A feed that fails in a way its source's own errors do not cover says so on the page (`Board.problem`) and
tries again at its next round. `Feeds.start()` starts them; they stop when `stop` is set. Imports only
core/, watch/ and the standard library.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from kijito_pull.core import overview
from kijito_pull.core.journey import confirmed_since
from kijito_pull.core.longpoll import LongPoll
from kijito_pull.core.models import ApiError
from kijito_pull.dashboard.board import Board
from kijito_pull.watch.longpoll import Notifier

SCAN_EVERY = 0.25
FULL_EVERY = 10.0
REDIS_EVERY = 2.0
REDISCOVER_EVERY = 600.0  # as `watch` (watch/loop.py's WatchOptions.rediscover_every)


class Feeds:
    """The dashboard's feeds (module docstring). `client` reads the persona directory; `notify_client` holds
    the long-poll (a connection of its own); `groups(persona)` and `top(persona)` read Redis (None: no source)."""

    def __init__(self, board: Board, *, client: Any, notify_client: Any, cursor_dir: Path, stop: threading.Event,
                 wait: int = 50, poll_seconds: float = 60.0,
                 groups: Callable[[str], list[dict]] | None = None, top: Callable[[str], str] | None = None,
                 scan_every: float = SCAN_EVERY, full_every: float = FULL_EVERY, redis_every: float = REDIS_EVERY,
                 rediscover_every: float = REDISCOVER_EVERY):
        self.board = board
        self.client = client
        self.cursor_dir = cursor_dir
        self.stop = stop
        self.group_rows, self.top = groups, top
        self.scan_every, self.full_every = scan_every, full_every
        self.redis_every, self.rediscover_every = redis_every, rediscover_every
        self.notifier = Notifier(notify_client, LongPoll(wait, poll_seconds), board, stop, handoff_wait=0,
                                 handle=lambda counts: board.counts(counts.result, counts.long_polling))
        self._seen: dict[Path, tuple] = {}
        self._rows: dict[Path, dict[str, Any]] = {}

    def start(self) -> None:
        self.notifier.start()
        threading.Thread(target=self._cursors, name="dashboard-cursors", daemon=True).start()
        threading.Thread(target=self._slow, name="dashboard-directory", daemon=True).start()

    # -- the persona directory and Redis -----------------------------------------------------------

    def _slow(self) -> None:
        next_directory = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_directory:
                next_directory = now + self.rediscover_every
                try:
                    self.board.directory([p.persona for p in self.client.personas()])
                except ApiError:
                    next_directory = now + min(60.0, self.rediscover_every)  # the long-poll says Kijito is down
            if self.group_rows is not None:
                try:
                    self.redis_once()
                    self.board.problem("redis", None)
                except Exception as exc:  # noqa: BLE001 - the page says so and the next round tries again
                    self.board.problem("redis", f"reading Redis failed: {exc}")
            self.stop.wait(self.redis_every if self.group_rows is not None else
                           max(1.0, next_directory - time.monotonic()))

    def redis_once(self) -> None:
        """Each persona's groups and stream top, read once; a failure marks Redis down on the board."""
        assert self.group_rows is not None and self.top is not None
        personas = self.board.only or sorted(self.board.known())
        rows: list[dict] = []
        tops: dict[str, str] = {}
        try:
            for persona in personas:
                rows += self.group_rows(persona)
                tops[persona] = self.top(persona)
        except ApiError as exc:
            self.board.redis_failed(exc)
            return
        self.board.groups(rows, tops)

    # -- this machine's cursors ----------------------------------------------------------------------

    def _cursors(self) -> None:
        full_at = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            full = now >= full_at
            if full:
                full_at = now + self.full_every
            try:
                if self.scan(full):
                    self.board.cursors([self._rows[p] for p in sorted(self._rows)], self.written())
                self.board.problem("cursors", None)
            except Exception as exc:  # noqa: BLE001 - the page says so and the next look tries again
                self.board.problem("cursors", f"reading this machine's cursor files failed: {exc}")
            self.stop.wait(self.scan_every)

    def scan(self, full: bool = False) -> bool:
        """Read again each cursor file that changed (every one when `full`); True when any row changed."""
        changed, logged = False, full
        found: set[Path] = set()
        try:
            entries = [e for e in os.scandir(self.cursor_dir) if e.name.endswith(".json")]
        except (FileNotFoundError, NotADirectoryError):
            entries = []  # no cursor yet; a folder that cannot be read is said on the page (`_cursors`)
        for entry in entries:
            path = Path(entry.path)
            found.add(path)
            mark = (_mark(path), _mark(path.with_name(path.name + ".journal")),
                    _mark(path.with_name(path.name + ".confirmed")))
            if not full and self._seen.get(path) == mark:
                continue
            logged = logged or (self._seen.get(path) or (None,) * 3)[2] != mark[2]
            self._seen[path] = mark
            row = overview.cursor_row(path)
            if self._rows.get(path) != row:
                self._rows[path] = row
                changed = True
        for gone in set(self._rows) - found:
            del self._rows[gone]
            self._seen.pop(gone, None)
            changed = True
        if logged:
            self.board.confirmations(confirmed_since(self.cursor_dir, time.time() - 3600))
        return changed

    def written(self) -> dict[str, float]:
        """Each cursor file's last write (its ack journal's, when later), in Unix time."""
        return {str(p): max((m[1] / 1e9 for m in mark if m is not None), default=0.0)
                for p, mark in self._seen.items()}


def _mark(path: Path) -> tuple | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)
