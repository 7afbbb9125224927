"""The events file: an NDJSON file we own, rotated by size, that `tail -F path` can follow forever.

The watch loop saves a cursor only after `write_line` returned True, so a True must mean the line is
durable: written, the file fsynced, and the directory fsynced whenever its entries changed (the file
was created or rotated). The file carries message bodies, so it is private (0600, ours, a regular
file) and we refuse to write mail into anything else: a symlink, a FIFO, another user's file.

The fd is owned here rather than by a supervisor's StandardOutPath, because a supervisor never
reopens its fd when the file is renamed under it: the writer would keep appending to an archive while
`tail -F` readers watch an empty file. Here rotation renames and reopens by name, and a file removed
or replaced behind our back is noticed before the next write and reopened by name too.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from kijito_pull.core.events import to_ndjson
from kijito_pull.core.models import Message
from kijito_pull.core.sink import Sink

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700

# O_NONBLOCK: opening a FIFO for writing would otherwise block until a reader appears, hanging the
# loop; with it the open fails (ENXIO) or succeeds and the regular-file check refuses it. It changes
# nothing for a regular file.
_OPEN_FLAGS = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_private_dirs(path: Path) -> None:
    """Create `path` and any missing parents as 0700, each made durable in its parent.

    An existing directory is left as it is: the user chose it, and it may be shared on purpose.
    """
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, PRIVATE_DIR)
        except FileExistsError:
            continue
        os.chmod(d, PRIVATE_DIR)  # the umask may have narrowed it; never widened, 0700 is exact
        _fsync_dir(d.parent)


class _Refused(Exception):
    """The path exists but is not something mail may be written into."""


class EventsFile:
    """One size-rotated, private NDJSON file. Not for use by two processes at once.

    `write_line` never raises; on False, `problem` holds a one-line reason for the caller to report.
    A rotation that fails does not fail the write (the file grows instead); `rotation_problem` says why.
    `reopen()` only sets a flag (the reopen happens before the next write), so a signal handler may
    call it at any moment, even in the middle of a write.
    """

    def __init__(self, path: Path, max_bytes: int = 5_000_000, keep: int = 5):
        self.path = Path(path).expanduser().absolute()
        self.max_bytes = max_bytes
        self.keep = max(1, keep)  # at least one archive: rotation is a rename, never a deletion of news
        self.problem: str | None = None            # why the last write_line returned False
        self.rotation_problem: str | None = None   # why the last rotation failed (writes go on)
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._dir_dirty = False
        self._reopen_requested = False
        self._lock = threading.Lock()

    # -- public --------------------------------------------------------------------------------

    def write_line(self, line: str) -> bool:
        """Append one line (a newline is added if missing); True only once it is durable."""
        data = line if line.endswith("\n") else line + "\n"
        payload = data.encode("utf-8", "replace")
        with self._lock:
            try:
                self._prepare(len(payload))
                self._append(payload)
                os.fsync(self._fd)  # type: ignore[arg-type]
                if self._dir_dirty:
                    _fsync_dir(self.path.parent)
                    self._dir_dirty = False
            except _Refused as exc:
                self._close_fd()
                self.problem = str(exc)
                return False
            except OSError as exc:
                # After a failed write or fsync the fd's state is unknown (Linux may drop the dirty
                # pages and report the next fsync clean), so start over from a fresh open.
                self._close_fd()
                self.problem = f"events file {self.path}: {_describe(exc)}"
                return False
            self.problem = None
            return True

    def reopen(self) -> None:
        """Reopen by name before the next write (SIGHUP: an external rotator moved the file)."""
        self._reopen_requested = True

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    # -- internals -----------------------------------------------------------------------------

    def _prepare(self, incoming: int) -> None:
        """Make self._fd the file now named self.path, rotated if this write would overflow it."""
        if self._reopen_requested:
            self._reopen_requested = False
            self._close_fd()
        if self._fd is not None and not self._still_named():
            self._close_fd()
        if self._fd is None:
            self._open()
        if self.max_bytes > 0:
            size = os.fstat(self._fd).st_size  # type: ignore[arg-type]
            # A line larger than max_bytes still goes in, alone in a fresh file.
            if size > 0 and size + incoming > self.max_bytes:
                try:
                    self._rotate()
                    self.rotation_problem = None
                except OSError as exc:
                    # A file we cannot rotate (its directory is read-only, say) still takes mail:
                    # growing past max_bytes is better than holding every later message back.
                    self.rotation_problem = (f"events file {self.path}: cannot rotate it "
                                             f"({_describe(exc)}); appending past max_bytes")
                    if self._fd is None:
                        self._open()

    def _still_named(self) -> bool:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def _open(self) -> None:
        if not self.path.parent.is_dir():
            _make_private_dirs(self.path.parent)
        try:
            fd = os.open(self.path, _OPEN_FLAGS, PRIVATE_FILE)
        except OSError:
            self._refuse_what_is_there()
            raise
        try:
            self._check_private(fd)
        except BaseException:
            os.close(fd)
            raise
        st = os.fstat(fd)
        self._fd = fd
        self._identity = (st.st_dev, st.st_ino)
        # The file may have just been created: its name is durable only once the directory is synced.
        # Syncing on every open (rare: start, rotation, reopen) is simpler than proving creation.
        self._dir_dirty = True

    def _refuse_what_is_there(self) -> None:
        """After a failed open: name the refusal when the path is a symlink (ELOOP) or a FIFO (ENXIO)."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise _Refused(f"events file {self.path} is a symbolic link; refusing to follow it")
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(f"events file {self.path} is not a regular file; refusing to write mail into it")

    def _check_private(self, fd: int) -> None:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(f"events file {self.path} is not a regular file; refusing to write mail into it")
        if st.st_uid != os.geteuid():
            raise _Refused(f"events file {self.path} is owned by uid {st.st_uid}, not by us "
                           f"(uid {os.geteuid()}); refusing to write mail into it")
        if st.st_nlink > 1:
            raise _Refused(f"events file {self.path} has {st.st_nlink} hard links (it is also another file); "
                           f"refusing to write mail into it")
        if stat.S_IMODE(st.st_mode) != PRIVATE_FILE:
            os.fchmod(fd, PRIVATE_FILE)

    def _append(self, payload: bytes) -> None:
        fd = self._fd
        assert fd is not None
        start = os.fstat(fd).st_size
        view = memoryview(payload)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError:
            # Do not leave half a line for the retry to be glued onto (a full disk, say).
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise

    def _rotate(self) -> None:
        """path -> path.1, path.1 -> path.2, ... (the oldest beyond `keep` is overwritten), then reopen.

        Every byte in the old file was fsynced when it was written, so a reader holding it open (tail)
        can finish it; the renames and the new file become durable with the directory fsync that
        follows the next write.
        """
        self._close_fd()
        base = str(self.path)
        for n in range(self.keep - 1, 0, -1):
            try:
                os.replace(f"{base}.{n}", f"{base}.{n + 1}")
            except FileNotFoundError:
                pass
        os.replace(base, f"{base}.1")
        self._dir_dirty = True
        self._open()

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd, self._identity = self._fd, None, None
            try:
                os.close(fd)
            except OSError:
                pass


_SAFE = re.compile(r"[^A-Za-z0-9._@+-]")
_MAX_SAFE_CHARS = 64


def safe_name(persona: str) -> str:
    """A file-name-safe form of a persona name that two personas can never share.

    Names made only of [a-z0-9._@+-] (and not only dots) are kept as they are. Any other name is
    rewritten and gets "~" plus a hash of the exact name: "~" never appears in a kept name, the hash
    tells rewritten names apart, and names with uppercase are hashed too, so two personas differing
    only in case still get two files on a case-insensitive file system.
    """
    safe = _SAFE.sub("_", persona)
    if not safe.strip("."):
        safe = safe.replace(".", "_") or "_"  # "", "." and ".." must not become a path component
    if len(safe) > _MAX_SAFE_CHARS:
        safe = safe[:_MAX_SAFE_CHARS]
    if safe == persona and persona.lower() == persona:
        return safe
    digest = hashlib.sha256(persona.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe}~{digest}"


def template_path(template: str, persona: str) -> Path:
    """`template` with every `{persona}` replaced by the persona's file-name-safe form."""
    if "{persona}" not in template:
        raise ValueError("the events file template must contain {persona}")
    return Path(template.replace("{persona}", safe_name(persona))).expanduser()


class EventsFileSink(Sink):
    """Events as NDJSON lines in one file per `path_for(persona)`; delivered means durable."""

    parks = True  # a line that can never be written (one persona's file): parked, docs/delivery.md

    def __init__(self, path_for: Callable[[str], Path], max_bytes: int = 5_000_000, keep: int = 5):
        self.path_for = path_for
        self.max_bytes = max_bytes
        self.keep = keep
        self.files: dict[Path, EventsFile] = {}
        self.problem: str | None = None

    def _file(self, persona: str) -> EventsFile:
        path = Path(self.path_for(persona)).expanduser().absolute()
        events_file = self.files.get(path)
        if events_file is None:
            events_file = self.files[path] = EventsFile(path, self.max_bytes, self.keep)
        return events_file

    def _write(self, event: dict) -> bool:
        try:
            events_file = self._file(str(event.get("persona") or ""))
        except (OSError, ValueError) as exc:
            self.problem = f"events file for persona {event.get('persona')!r}: {exc}"
            return False
        ok = events_file.write_line(to_ndjson(event))
        self.problem = events_file.problem
        return ok

    def signal(self, event: dict) -> None:
        self._write(event)

    def deliver(self, event: dict, message: Message) -> bool:
        return self._write(event)

    def reopen(self) -> None:
        for events_file in self.files.values():
            events_file.reopen()

    def close(self) -> None:
        for events_file in self.files.values():
            events_file.close()
