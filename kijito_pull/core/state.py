"""The durable cursor store: one file per (API base, persona, consumer), atomic, locked, private.

A state file is either absent (first contact), trustworthy, or corrupt. Corrupt is never confused
with absent: the engine fails closed on it (re-delivers what is visible) instead of re-baselining.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import threading
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kijito_pull import __version__
from kijito_pull.core import lock as filelock
from kijito_pull.core import pending as pending_mod
from kijito_pull.core.cursorfields import (
    parse_failures,
    parse_parked,
    parse_recent,
)
from kijito_pull.core.files import StateError, ensure_private_dir, open_regular
from kijito_pull.core.models import MAX_ID

SCHEMA = 1
MAX_STATE_BYTES = 8 * 1024 * 1024
MAX_DELIVERED_ABOVE = 200_000
#: The cursor of an inbox seen empty: below every id the contract accepts (0..MAX_ID), so a new account's
#: first message, id 0, is above it.
EMPTY_CURSOR = -1


class LockTimeout(StateError):
    """The cursor's lock was not had within the wait asked for (another puller holds it)."""


@dataclass
class CursorState:
    """Everything at or below `cursor` was delivered (or, at first contact, accounted for and announced);
    ids in `delivered_above` were too, above a pin or a message still pending. `pending` holds the
    hand-overs to agent sessions not yet confirmed (core/pending.py)."""

    cursor: int | None = None
    delivered_above: list[int] = field(default_factory=list)
    pin: dict[str, str] | None = None  # {"since": iso time, "reason": text} while a gap is unproven
    pending: dict[int, pending_mod.Entry] = field(default_factory=dict)
    #: the newest ids at or below the cursor that were accounted for (delivered or announced), at most
    #: RECENT_LIMIT, each with a fingerprint of its message (`fingerprint`): a visible id between the
    #: oldest of them and the cursor that is not here came late; visible ids that all differ from these
    #: show a server whose ids started over
    recent: dict[int, str] = field(default_factory=dict)
    #: how many times the consumer refused each message not yet taken (poison mail is parked at a limit)
    failures: dict[int, int] = field(default_factory=dict)
    #: parked mail: refused too often, announced, the cursor moved on; {"since", "attempts", "retry"}
    parked: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Loaded:
    """The outcome of reading a state file: exactly one of absent / corrupt / state. `restored` says why
    the state came from the last good copy (the file itself was damaged)."""

    state: CursorState | None
    corrupt_reason: str | None = None
    restored: str | None = None
    refused: str | None = None  # why the ack journal was not read (a FIFO, a link): a pull refuses to go on

    @property
    def absent(self) -> bool:
        return self.state is None and self.corrupt_reason is None


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def _copy_state(state: CursorState) -> CursorState:
    """A copy whose lists and dicts the caller may change without touching the store's (entries are frozen)."""
    return CursorState(cursor=state.cursor, delivered_above=list(state.delivered_above),
                       pin=dict(state.pin) if state.pin is not None else None, pending=dict(state.pending),
                       recent=dict(state.recent), failures=dict(state.failures),
                       parked={k: dict(v) for k, v in state.parked.items()})


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class StateStore:
    """Reads and writes one cursor's state under its lock."""

    def __init__(self, state_path: Path, lock_path: Path, identity: dict[str, str], *, root: Path | None = None):
        self.path = state_path
        self.root = root  # the state directory the cursors' one lies in: kept private too
        #: The last good copy: every save first keeps the file it replaces here (a hard link), when that
        #: file is known to be good, so damage to the state file falls back to it (`load`).
        self.previous = state_path.with_name(state_path.name + ".prev")
        self._good_on_disk = False
        #: The ack journal: within one pull, each acknowledgement is one small record appended and
        #: fdatasynced here (a few times cheaper than rewriting the state file per message); the pull's
        #: final save folds them in and the journal is dropped. `load` replays a journal left by a kill.
        self.journal = state_path.with_name(state_path.name + ".journal")
        self._generation: str | None = None  # the `updated` stamp of the state file last read or written
        self._journal_fd: int | None = None
        self._journal_at = 0
        self._journal_room = 0
        self._unfolded = False  # a journal was replayed: save it into the state file before a new one
        #: The state file's bytes as last read or written, with what `_validate` made of them (None until
        #: parsed) and their `updated` stamp: a load that reads the same bytes again skips the parse.
        self._parsed: tuple[bytes, CursorState | None, str | None] | None = None
        self.lock_path = lock_path
        #: The lock file stays open between pulls (`locked`), so a watch that pulls on every wake does not
        #: reopen it each time; `_lock_busy` gives it to one holder of this store at a time (another thread
        #: opens its own, and so waits on the flock as a separate process would).
        self._lock_fd: int | None = None
        self._lock_busy = threading.Lock()
        self._lock_closer: weakref.finalize | None = None
        self.identity = dict(identity)

    @classmethod
    def existing(cls, state_file: Path) -> StateStore:
        """The store of a state file found on disk (`status`, `doctor`), with the identity the file claims,
        read through the same careful reader as `load` (never follows a link, never blocks on a FIFO,
        never reads a giant file). StateError when it is unreadable or names no identity."""
        store = cls(state_file, state_file.with_suffix(".lock"), {})
        identity = None
        for path in (store.path, store.previous):  # a damaged file still names its cursor in the last good copy
            try:
                identity = json.loads(store._read_raw(path).decode("utf-8")).get("identity")
            except (OSError, ValueError, AttributeError, RecursionError, StateError):
                continue
            if identity is not None:
                break
        if not (isinstance(identity, dict) and all(isinstance(identity.get(k), str)
                                                   for k in ("api_base", "persona", "consumer"))):
            raise StateError("unreadable or without identity")
        store.identity = dict(identity)
        return store

    # -- locking -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, timeout: float) -> Iterator[None]:
        """Hold the cursor's lock: pull, deliver and ack happen inside it, so concurrent pullers serialize."""
        keep = self._lock_busy.acquire(blocking=False)  # False: another thread of ours holds the kept fd
        fd = None
        try:
            fd = self._acquire(timeout, keep)
            holder = f"{os.getpid()}\n".encode()
            try:
                if os.pread(fd, 32, 0) != holder:  # a watch finds its own pid there: nothing to write
                    os.pwrite(fd, holder, 0)  # the pid first, then cut what a longer one left: one
                    os.ftruncate(fd, len(holder))  # metadata change (truncating to 0 first cost ~0.17 ms)
            except OSError as exc:
                raise StateError(f"cannot write the lock file {self.lock_path}: {exc.strerror}") from None
            try:
                yield
            finally:
                # After the pull's work (off a watch's wake path), still under the lock.
                self._remove_stale_temp_files()
                self._parse_saved()
        finally:
            if fd is not None:
                self._release(fd)
            if keep:
                self._lock_busy.release()

    def _acquire(self, timeout: float, keep: bool) -> int:
        """The lock file's descriptor with the flock taken (the kept one when `keep`), on the file the lock
        path names now: one removed or replaced since it was opened is opened afresh."""
        for _ in range(3):
            fd = self._lock_fd if keep and self._lock_fd is not None else self._open_lock_file()
            try:
                taken = filelock.acquire(fd, timeout)
            except OSError as exc:
                self._drop_lock_fd(fd)
                raise StateError(f"cannot lock {self.lock_path}: {exc.strerror}") from None
            if not taken:
                self._release(fd, locked=False)
                holder = self.lock_holder()
                who = f" by process {holder}" if holder else ""
                raise LockTimeout(
                    f"the cursor for this persona and consumer is held{who}; gave up after {timeout:g} s "
                    f"(another kijito-pull is delivering; retry, or raise --lock-timeout)"
                )
            try:
                here = os.stat(self.lock_path, follow_symlinks=False)
                mine = os.fstat(fd)
                current = (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)
            except FileNotFoundError:
                current = False
            if current:
                if keep and self._lock_fd is None:
                    self._lock_fd = fd
                    self._lock_closer = weakref.finalize(self, _close_quietly, fd)
                return fd
            self._drop_lock_fd(fd)  # locked a file nobody else will lock again
        raise StateError(f"lock file {self.lock_path} keeps being replaced")

    def _open_lock_file(self) -> int:
        ensure_private_dir(self.lock_path.parent, self.root)  # (the kept descriptor skips this: ~0.09 ms)
        try:
            return open_regular(self.lock_path, os.O_RDWR | os.O_CREAT, "lock file")
        except FileNotFoundError:  # the directory vanished between the two calls
            raise StateError(f"cannot open lock file {self.lock_path}: it vanished") from None

    def _release(self, fd: int, locked: bool = True) -> None:
        """Give the flock back: the kept descriptor stays open for the next pull; any other is closed
        (closing releases the flock; a killed process releases it too)."""
        if fd != self._lock_fd:
            _close_quietly(fd)
            return
        if locked:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                self._drop_lock_fd(fd)

    def _drop_lock_fd(self, fd: int) -> None:
        if fd == self._lock_fd:
            self.close()
        else:
            _close_quietly(fd)

    def close(self) -> None:
        """Close the kept lock file descriptor (it is also closed when the store is collected or the
        process ends). Not while a pull holds the lock."""
        if self._lock_closer is not None:
            self._lock_closer()
        self._lock_fd = self._lock_closer = None

    def _remove_stale_temp_files(self) -> None:
        """Temp files of a writer killed mid-save; only the lock holder writes them, so under the lock
        every one that exists is an orphan."""
        for orphan in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            with contextlib.suppress(OSError):
                orphan.unlink()

    def lock_holder(self) -> int | None:
        """The pid holding the lock now, 0 if held by an unknown process, None if free."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                return int(text) if text.isdigit() else 0
            return None
        finally:
            os.close(fd)

    # -- reading -----------------------------------------------------------------------------------

    def load(self) -> Loaded:
        """The state; when the file is damaged (not absent: a removed file is a new start), the last good
        copy, announced through `Loaded.restored`; else corrupt."""
        loaded = self._load(self.path)
        self._good_on_disk = loaded.state is not None
        if loaded.corrupt_reason is None:
            return self._replay(loaded)
        previous = self._load(self.previous)
        if previous.state is not None:
            return self._replay(Loaded(previous.state, None, restored=loaded.corrupt_reason))
        return loaded

    def _replay(self, loaded: Loaded) -> Loaded:
        """Fold in the acks a killed pull journaled against exactly this state (same `updated` stamp): each
        is a fact ("delivered"), so it joins `delivered_above`; the next pull moves the cursor past it."""
        state = loaded.state
        if state is None or state.cursor is None or self._generation is None:
            return loaded
        try:
            fd = open_regular(self.journal, os.O_RDONLY, "the ack journal")
        except FileNotFoundError:
            return loaded
        except StateError as exc:  # never read through a link, never blocked on a FIFO
            return dataclasses.replace(loaded, refused=str(exc))
        try:
            raw = os.read(fd, MAX_STATE_BYTES)
        except OSError:
            return loaded
        finally:
            os.close(fd)
        head, _, body = raw.partition(b"\n")
        if head != f"journal {self._generation}".encode():
            return loaded  # from an older state, already folded into this one by its final save
        acked = set()
        for line in body.split(b"\n"):
            if not line.strip(b"\0") or not line.isdigit():
                break  # the preallocated zeros after the last record, or a torn one
            acked.add(int(line))
        acked = {i for i in acked if i > state.cursor}
        if not acked:
            return loaded
        # Its facts live only in that journal until a save folds them in: a new journal (which truncates
        # the file) must wait for that save, or a kill in between would forget them.
        self._unfolded = True
        return Loaded(dataclasses.replace(
            state, delivered_above=sorted(set(state.delivered_above) | acked),
            pending={i: e for i, e in state.pending.items() if i not in acked},
            failures={i: n for i, n in state.failures.items() if i not in acked}),
            loaded.corrupt_reason, loaded.restored)

    # -- the ack journal -------------------------------------------------------------------------------

    _JOURNAL_CHUNK = 64 * 1024

    def journal_acks(self, ids: Iterable[int]) -> bool:
        """Record acks durably in the journal (opened on first use against the state on disk). False when
        there is no state on disk to journal against: the caller saves the state instead."""
        if self._journal_fd is None:
            if self._generation is None or not self._good_on_disk or self._unfolded:
                return False
            try:
                self._open_journal()
            except OSError:
                return False
        record = "".join(f"{i}\n" for i in ids).encode("ascii")
        try:
            if self._journal_at + len(record) > self._journal_room:
                self._journal_room += max(self._JOURNAL_CHUNK, len(record))
                os.posix_fallocate(self._journal_fd, 0, self._journal_room)
            os.pwrite(self._journal_fd, record, self._journal_at)
            os.fdatasync(self._journal_fd)
        except OSError as exc:
            raise StateError(f"cannot write the ack journal {self.journal}: {exc.strerror}") from None
        self._journal_at += len(record)
        return True

    def _open_journal(self) -> None:
        try:
            fd = open_regular(self.journal, os.O_RDWR | os.O_CREAT | os.O_TRUNC, "the ack journal")
        except StateError as exc:
            raise OSError(str(exc)) from None  # journal_acks saves the whole state instead
        try:
            header = f"journal {self._generation}\n".encode("ascii")
            os.posix_fallocate(fd, 0, self._JOURNAL_CHUNK)
            os.pwrite(fd, header, 0)
            os.fdatasync(fd)
            _fsync_dir(self.journal.parent)  # the journal's own entry is durable before it is relied on
        except BaseException:
            os.close(fd)
            raise
        self._journal_fd, self._journal_at, self._journal_room = fd, len(header), self._JOURNAL_CHUNK

    def close_journal(self) -> None:
        """After a save that holds every journaled ack: the journal is obsolete (its stamp no longer
        matches the state file), so it is closed and removed; a removal lost to a crash is harmless."""
        if self._journal_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._journal_fd)
            self._journal_fd = None
            with contextlib.suppress(OSError):
                os.unlink(self.journal)

    def _load(self, path: Path) -> Loaded:
        try:
            raw = self._read_raw(path)
        except FileNotFoundError:
            return Loaded(None)
        except StateError as exc:
            return Loaded(None, str(exc))
        parsed = self._parsed if path == self.path else None
        if parsed is not None and parsed[1] is not None and parsed[0] == raw:
            # The very bytes already validated (a watch re-reads the file it wrote on its last wake).
            self._generation = parsed[2]
            return Loaded(_copy_state(parsed[1]))
        loaded, generation = self._parse(raw)
        if loaded.state is not None:
            self._generation = generation
            if path == self.path:
                self._parsed = (raw, _copy_state(loaded.state), generation)
        return loaded

    def _parse(self, raw: bytes) -> tuple[Loaded, str | None]:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            return Loaded(None, "the state file is not valid JSON (truncated or overwritten?)"), None
        try:
            loaded = Loaded(self._validate(data))
        except ValueError as exc:
            return Loaded(None, str(exc)), None
        updated = data.get("updated")
        return loaded, updated if isinstance(updated, str) and len(updated) < 64 else None

    def _parse_saved(self) -> None:
        """Parse what this store last wrote while the lock is still held, after the pull's work, so the next
        load of the same bytes finds it ready instead of parsing them then."""
        if self._parsed is not None and self._parsed[1] is None:
            raw, _, generation = self._parsed
            loaded, _ = self._parse(raw)
            self._parsed = (raw, loaded.state, generation) if loaded.state is not None else None

    def _read_raw(self, path: Path | None = None) -> bytes:
        fd = open_regular(path or self.path, os.O_RDONLY, "the state file")
        try:
            st = os.fstat(fd)
            if st.st_size > MAX_STATE_BYTES:
                raise StateError("the state file is implausibly large")
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError as exc:
            raise StateError(f"the state file cannot be read ({exc.strerror})") from None
        finally:
            os.close(fd)

    def _validate(self, data: Any) -> CursorState:
        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        if not isinstance(data, dict):
            raise ValueError("the state file does not hold an object")
        if not is_int(data.get("schema")) or data["schema"] != SCHEMA:  # true == 1 and 1.0 == 1 in Python
            raise ValueError(f"the state file has schema {data.get('schema')!r}, expected {SCHEMA}")
        if data.get("identity") != self.identity:
            raise ValueError("the state file belongs to another API base, persona or consumer")
        cursor = data.get("cursor")
        if cursor is not None and not (is_int(cursor) and EMPTY_CURSOR <= cursor <= MAX_ID):
            raise ValueError(f"the state file's cursor is not an integer from -1 to {MAX_ID}")
        above = data.get("delivered_above", [])
        if not isinstance(above, list) or len(above) > MAX_DELIVERED_ABOVE or not all(
            is_int(i) and (cursor is None or i > cursor) and i <= MAX_ID for i in above
        ):
            raise ValueError("the state file's delivered_above list is malformed")
        if cursor is None and above:
            raise ValueError("the state file lists delivered ids without a cursor")
        pin = data.get("pin")
        if pin is not None and not (
            isinstance(pin, dict) and isinstance(pin.get("since"), str) and isinstance(pin.get("reason"), str)
        ):
            raise ValueError("the state file's pin is malformed")
        if cursor is None and data.get("pending"):
            raise ValueError("the state file lists pending hand-overs without a cursor")
        recent = parse_recent(data.get("recent", ""), cursor)
        if recent is None:
            raise ValueError("the state file's recent list is malformed")
        return CursorState(cursor=cursor, delivered_above=sorted(set(above)),
                           pin={"since": pin["since"], "reason": pin["reason"]} if pin else None,
                           pending=pending_mod.parse(data.get("pending"), cursor),
                           recent=recent, failures=parse_failures(data.get("failures")),
                           parked=parse_parked(data.get("parked")))

    # -- writing -----------------------------------------------------------------------------------

    def _keep_previous(self, directory: Path) -> None:
        """The file about to be replaced becomes the last good copy: linked (no copy, no fsync), then
        renamed into place, so `previous` is always a whole good state. Best effort: a file system
        without hard links keeps no copy."""
        link = directory / f".{self.path.name}.{os.getpid()}.prev.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(link)
            os.link(self.path, link)
            os.replace(link, self.previous)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(link)

    def sync(self) -> None:
        """Make the last save's rename durable (see `save(sync_dir=False)`)."""
        try:
            _fsync_dir(self.path.parent)
        except OSError as exc:
            raise StateError(f"cannot sync state directory {self.path.parent}: {exc.strerror}") from None

    def save(self, state: CursorState, *, sync_dir: bool = True, keep_previous: bool = True) -> None:
        """Write atomically: temp file, fsync, rename, then (unless `sync_dir` is False) directory fsync.

        The file's data is always fsynced before the rename, so the state is never torn. Skipping the
        directory fsync (the per-message acks of one pull) only risks the *previous* state coming back
        after a power loss, which repeats mail but never skips it; the pull's final save syncs it.
        """
        document = {
            "schema": SCHEMA,
            "identity": self.identity,
            "cursor": state.cursor,
            "delivered_above": state.delivered_above,
            "pin": state.pin,
            **({"pending": pending_mod.dump(state.pending)} if state.pending else {}),
            # One string ("id:fingerprint ..."): a per-message save of a long catch-up encodes it cheaply.
            **({"recent": " ".join(map(":".join, zip(map(str, state.recent), state.recent.values())))}
               if state.recent else {}),
            **({"failures": {str(k): v for k, v in state.failures.items()}} if state.failures else {}),
            **({"parked": {str(k): v for k, v in state.parked.items()}} if state.parked else {}),
            "updated": (generation := _now()),
            "writer": f"kijito-pull/{__version__}",
        }
        payload = (json.dumps(document) + "\n").encode("utf-8")
        directory = self.path.parent
        ensure_private_dir(directory, self.root)
        tmp = directory / f".{self.path.name}.{os.getpid()}.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if keep_previous and self._good_on_disk:
                self._keep_previous(directory)
            self._parsed = None
            os.replace(tmp, self.path)
            self._parsed = (payload, None, generation)  # parsed after the pull (`_parse_saved`)
            self._good_on_disk = True
            self._generation = generation
            self._unfolded = False
            if sync_dir:
                _fsync_dir(directory)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StateError(f"cannot save state {self.path}: {exc.strerror}") from None
