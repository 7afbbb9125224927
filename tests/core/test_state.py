"""Unit tests of the cursor store (kijito_pull/core/state.py): atomic private files, fail-closed loads, the lock.

A state file is absent, trustworthy or corrupt, and corrupt must never be mistaken for absent (that
would re-baseline and skip mail). Loading never raises; saving never leaves a half-written file.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kijito_pull.core import state as state_mod
from kijito_pull.core.models import MAX_ID
from kijito_pull.core.state import CursorState, Loaded, LockTimeout, StateError, StateStore, ensure_private_dir

IDENTITY = {"api_base": "https://api.kijito.ai", "persona": "river", "consumer": "agent"}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "state" / "cursors"
    return StateStore(d / "river.json", d / "river.lock", IDENTITY)


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def write_doc(store: StateStore, **overrides):
    doc = {"schema": 1, "identity": IDENTITY, "cursor": 10, "delivered_above": [], "pin": None}
    doc.update(overrides)
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps(doc))


def assert_corrupt(loaded: Loaded):
    assert isinstance(loaded, Loaded)
    assert loaded.state is None
    assert isinstance(loaded.corrupt_reason, str) and loaded.corrupt_reason
    assert "\n" not in loaded.corrupt_reason
    assert not loaded.absent


# -- round trip -------------------------------------------------------------------------------------

def test_save_load_round_trip(store):
    pin = {"since": "2026-08-01T10:00:00+00:00", "reason": "a backward page failed"}
    saved = CursorState(cursor=1204, delivered_above=[1210, 1300], pin=pin)
    store.save(saved)
    loaded = store.load()
    assert loaded.corrupt_reason is None and not loaded.absent
    assert loaded.state == saved


def test_round_trip_of_the_empty_and_zero_states(store):
    store.save(CursorState())
    assert store.load().state == CursorState()
    store.save(CursorState(cursor=0))
    assert store.load().state == CursorState(cursor=0)


def test_save_overwrites_and_the_file_records_schema_identity_and_writer(store):
    store.save(CursorState(cursor=1))
    store.save(CursorState(cursor=2, delivered_above=[5]))
    doc = json.loads(store.path.read_text())
    assert doc["schema"] == 1 and doc["identity"] == IDENTITY
    assert doc["cursor"] == 2 and doc["delivered_above"] == [5] and doc["pin"] is None
    assert doc["writer"].startswith("kijito-pull/")


def test_delivered_above_is_returned_sorted_and_unique(store):
    write_doc(store, cursor=10, delivered_above=[30, 12, 30, 11])
    assert store.load().state.delivered_above == [11, 12, 30]


# -- permissions ------------------------------------------------------------------------------------

def test_files_are_0600_and_created_directories_0700(store, tmp_path):
    old = os.umask(0o022)
    try:
        store.save(CursorState(cursor=3))
        with store.locked(timeout=1):
            pass
    finally:
        os.umask(old)
    assert mode(store.path) == 0o600
    assert mode(store.lock_path) == 0o600
    assert mode(store.path.parent) == 0o700
    assert mode(tmp_path / "state") == 0o700  # every directory we created, not only the leaf


def test_a_looser_existing_directory_of_ours_is_tightened(store):
    store.path.parent.mkdir(parents=True)
    os.chmod(store.path.parent, 0o755)
    store.save(CursorState(cursor=3))
    assert mode(store.path.parent) == 0o700


def test_the_lock_tightens_a_loose_directory_too(store):
    store.path.parent.mkdir(parents=True)
    os.chmod(store.path.parent, 0o777)
    with store.locked(timeout=1):
        assert mode(store.path.parent) == 0o700


def test_a_loose_existing_state_file_is_replaced_by_a_private_one(store):
    write_doc(store)
    os.chmod(store.path, 0o644)
    store.save(CursorState(cursor=11))
    assert mode(store.path) == 0o600


def test_ensure_private_dir_refuses_a_file_in_the_way(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(StateError):
        ensure_private_dir(tmp_path / "f")


# -- atomicity --------------------------------------------------------------------------------------

def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_no_temp_files_are_left(store):
    for i in range(5):
        store.save(CursorState(cursor=i))
    assert leftovers(store.path.parent) == []
    assert sorted(p.name for p in store.path.parent.iterdir()) == [store.path.name, store.previous.name]
    assert stat.S_IMODE(os.stat(store.previous).st_mode) == 0o600


# -- the last good copy -----------------------------------------------------------------------------------

def test_every_save_keeps_the_state_it_replaces_as_the_last_good_copy(store):
    store.save(CursorState(cursor=1))
    store.save(CursorState(cursor=2))
    assert json.loads(store.previous.read_text())["cursor"] == 1
    assert store.load().state.cursor == 2


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"schema": 1}', b"\x00" * 40])
def test_a_damaged_state_file_falls_back_to_the_last_good_copy(store, damage):
    store.save(CursorState(cursor=1))
    store.save(CursorState(cursor=2, delivered_above=[5]))
    store.path.write_bytes(damage)
    loaded = store.load()
    assert loaded.state == CursorState(cursor=1) and loaded.corrupt_reason is None
    assert loaded.restored  # why: what was wrong with the file
    store.save(CursorState(cursor=3))  # the damaged file is not kept as the "good" copy
    assert json.loads(store.previous.read_text())["cursor"] == 1


def test_a_removed_state_file_is_a_new_start_not_a_restore(store):
    store.save(CursorState(cursor=1))
    store.save(CursorState(cursor=2))
    store.path.unlink()
    assert store.load().absent


def test_both_damaged_is_corrupt(store):
    store.save(CursorState(cursor=1))
    store.save(CursorState(cursor=2))
    store.path.write_text("x")
    store.previous.write_text("y")
    loaded = store.load()
    assert loaded.state is None and loaded.corrupt_reason


def test_a_stale_temp_file_from_a_crashed_writer_is_not_a_problem(store):
    store.path.parent.mkdir(parents=True)
    stale = store.path.parent / f".{store.path.name}.{os.getpid()}.tmp"
    stale.write_text("half a docu")
    store.save(CursorState(cursor=4))
    assert store.load().state.cursor == 4
    assert leftovers(store.path.parent) == []


def test_a_write_that_fails_midway_leaves_the_old_file_intact(store, monkeypatch):
    store.save(CursorState(cursor=7, delivered_above=[9]))
    before = store.path.read_bytes()
    real_write = os.write

    def short_write_then_enospc(fd, data):
        real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(state_mod.os, "write", short_write_then_enospc)
    with pytest.raises(StateError) as info:
        store.save(CursorState(cursor=8))
    monkeypatch.undo()
    assert "No space left" in str(info.value)
    assert store.path.read_bytes() == before
    assert store.load().state == CursorState(cursor=7, delivered_above=[9])
    assert leftovers(store.path.parent) == []


def test_a_failed_fsync_leaves_the_old_file_intact(store, monkeypatch):
    store.save(CursorState(cursor=7))
    before = store.path.read_bytes()

    def failing_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(state_mod.os, "fsync", failing_fsync)
    with pytest.raises(StateError):
        store.save(CursorState(cursor=8))
    monkeypatch.undo()
    assert store.path.read_bytes() == before
    assert leftovers(store.path.parent) == []


def test_a_failed_rename_leaves_no_temp_file_and_raises(store):
    # Tests run as root, so a read-only directory would not stop the write: put a directory where the
    # state file goes, so the final os.replace fails.
    store.path.mkdir(parents=True)
    (store.path / "keep").write_text("x")
    with pytest.raises(StateError) as info:
        store.save(CursorState(cursor=8))
    assert "\n" not in str(info.value)
    assert (store.path / "keep").read_text() == "x"
    assert leftovers(store.path.parent) == []


# -- load: absent vs corrupt ------------------------------------------------------------------------

def test_absent(store):
    loaded = store.load()
    assert loaded.absent and loaded.state is None and loaded.corrupt_reason is None


def test_absent_directory_is_absent_too(tmp_path):
    s = StateStore(tmp_path / "no" / "such" / "x.json", tmp_path / "x.lock", IDENTITY)
    assert s.load().absent


@pytest.mark.parametrize("raw", [b"", b"not json", b"{", b"\xff\xfe{}", b"[1,", b"null x", b"\x00" * 64])
def test_invalid_json_is_corrupt(store, raw):
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(raw)
    assert_corrupt(store.load())


def test_truncated_at_every_offset_is_corrupt_never_absent(store):
    store.save(CursorState(cursor=1204, delivered_above=[1210, 1300],
                           pin={"since": "2026-08-01T10:00:00+00:00", "reason": "gap"}))
    full = store.path.read_bytes()
    assert full.endswith(b"}\n")
    for offset in range(0, len(full) - 1, 7):
        store.path.write_bytes(full[:offset])
        loaded = store.load()
        assert loaded.state is None and loaded.corrupt_reason, offset


@pytest.mark.parametrize("doc", [[], "text", 5, None, True], ids=repr)
def test_not_an_object_is_corrupt(store, doc):
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps(doc))
    assert_corrupt(store.load())


@pytest.mark.parametrize("schema", [0, 2, "1", None, True, 1.0, 1.0001], ids=repr)
def test_wrong_schema_is_corrupt(store, schema):
    write_doc(store, schema=schema)
    assert_corrupt(store.load())


def test_missing_schema_is_corrupt(store):
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({"identity": IDENTITY, "cursor": 1}))
    assert_corrupt(store.load())


@pytest.mark.parametrize("identity", [
    {**IDENTITY, "persona": "River"}, {**IDENTITY, "consumer": "script"},
    {**IDENTITY, "api_base": "http://127.0.0.1:8080"}, {}, None, "river",
    {"api_base": IDENTITY["api_base"], "persona": "river"},
], ids=range(7))
def test_wrong_identity_is_corrupt(store, identity):
    write_doc(store, identity=identity)
    loaded = store.load()
    assert_corrupt(loaded)


@pytest.mark.parametrize("cursor", ["10", True, False, -2, 10.0, 10.5, [10], {}], ids=repr)
def test_wrong_cursor_type_is_corrupt(store, cursor):
    write_doc(store, cursor=cursor)
    assert_corrupt(store.load())


@pytest.mark.parametrize("above", [
    "11,12", {"11": True}, 11, [11, "12"], [11, True], [11, 12.0], [10], [5, 11], [None],
], ids=repr)
def test_malformed_delivered_above_is_corrupt(store, above):
    write_doc(store, cursor=10, delivered_above=above)
    assert_corrupt(store.load())


def test_delivered_above_without_a_cursor_is_corrupt(store):
    write_doc(store, cursor=None, delivered_above=[3])
    assert_corrupt(store.load())


def test_too_many_delivered_above_is_corrupt(store, monkeypatch):
    monkeypatch.setattr(state_mod, "MAX_DELIVERED_ABOVE", 3)
    write_doc(store, cursor=1, delivered_above=[2, 3, 4, 5])
    assert_corrupt(store.load())


@pytest.mark.parametrize("pin", [
    "pinned", True, [], {}, {"since": "t"}, {"reason": "r"}, {"since": 1, "reason": "r"},
    {"since": "t", "reason": None},
], ids=repr)
def test_malformed_pin_is_corrupt(store, pin):
    write_doc(store, pin=pin)
    assert_corrupt(store.load())


def test_a_symlink_at_the_state_path_is_corrupt_even_to_a_valid_file(store, tmp_path):
    good = StateStore(tmp_path / "elsewhere.json", tmp_path / "elsewhere.lock", IDENTITY)
    good.save(CursorState(cursor=5))
    store.path.parent.mkdir(parents=True)
    store.path.symlink_to(good.path)
    loaded = store.load()
    assert_corrupt(loaded)
    assert "symbolic link" in loaded.corrupt_reason


def test_a_dangling_symlink_is_corrupt_not_absent(store, tmp_path):
    store.path.parent.mkdir(parents=True)
    store.path.symlink_to(tmp_path / "nowhere.json")
    assert_corrupt(store.load())


def _load_with_deadline(store: StateStore, seconds: float = 5.0):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("loaded", store.load()), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        # unblock a hung open() so the thread can end, then fail
        fd = os.open(store.path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("load() hung")
    return box["loaded"]


def test_a_fifo_at_the_state_path_is_corrupt_and_does_not_hang(store):
    store.path.parent.mkdir(parents=True)
    os.mkfifo(store.path, 0o600)
    assert_corrupt(_load_with_deadline(store))


def test_a_directory_at_the_state_path_is_corrupt(store):
    store.path.mkdir(parents=True)
    assert_corrupt(store.load())


def test_a_huge_file_is_corrupt_and_not_read(store):
    store.path.parent.mkdir(parents=True)
    with open(store.path, "wb") as f:
        f.truncate(state_mod.MAX_STATE_BYTES + 1)  # sparse: costs no disk and no time
    started = time.monotonic()
    loaded = store.load()
    assert_corrupt(loaded)
    assert "large" in loaded.corrupt_reason
    assert time.monotonic() - started < 1.0


def test_load_never_raises_on_an_unreadable_path(store, monkeypatch):
    write_doc(store)

    def eio(*a, **k):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(state_mod.os, "read", eio)
    assert_corrupt(store.load())


# -- the lock ---------------------------------------------------------------------------------------

def test_lock_holder_reports_the_pid_while_held_and_none_after(store):
    assert store.lock_holder() is None  # no lock file yet
    with store.locked(timeout=1):
        assert store.lock_holder() == os.getpid()
    assert store.lock_holder() is None


def test_two_holders_in_threads_serialize(store):
    timeline = []
    first_in = threading.Event()

    def first():
        with store.locked(timeout=5):
            timeline.append(("first-in", time.monotonic()))
            first_in.set()
            time.sleep(0.3)
            timeline.append(("first-out", time.monotonic()))

    def second():
        first_in.wait(5)
        with store.locked(timeout=5):
            timeline.append(("second-in", time.monotonic()))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [name for name, _ in timeline] == ["first-in", "first-out", "second-in"]


def test_a_second_holder_times_out_naming_the_holder(store):
    held = threading.Event()
    release = threading.Event()

    def holder():
        with store.locked(timeout=1):
            held.set()
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert held.wait(5)
        started = time.monotonic()
        with pytest.raises(LockTimeout) as info:
            with store.locked(timeout=0.2):
                pytest.fail("acquired a held lock")
        waited = time.monotonic() - started
    finally:
        release.set()
        t.join(5)
    assert 0.2 <= waited < 2.0
    assert f"process {os.getpid()}" in str(info.value)
    assert isinstance(info.value, StateError)


HOLD_LOCK = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from kijito_pull.core.state import StateStore
s = StateStore(Path({path!r}), Path({lock!r}), {{}})
with s.locked(timeout=5):
    print("locked", flush=True)
    time.sleep(60)
"""


def _hold_in_child(store: StateStore) -> subprocess.Popen:
    code = HOLD_LOCK.format(repo=str(REPO), path=str(store.path), lock=str(store.lock_path))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    return child


def test_a_holder_in_another_process_blocks_and_is_named(store):
    child = _hold_in_child(store)
    try:
        assert store.lock_holder() == child.pid
        with pytest.raises(LockTimeout) as info:
            with store.locked(timeout=0.1):
                pytest.fail("acquired a lock held by another process")
        assert f"process {child.pid}" in str(info.value)
    finally:
        child.kill()
        child.wait(5)


def test_a_process_killed_holding_the_lock_leaves_no_lock_behind(store):
    child = _hold_in_child(store)
    assert store.lock_holder() == child.pid
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(5) == -signal.SIGKILL
    assert store.lock_holder() is None
    started = time.monotonic()
    with store.locked(timeout=0.5):
        assert store.lock_holder() == os.getpid()
    assert time.monotonic() - started < 0.5


def test_a_symlink_at_the_lock_path_is_refused(store, tmp_path):
    target = tmp_path / "target"
    target.write_text("")
    store.lock_path.parent.mkdir(parents=True)
    store.lock_path.symlink_to(target)
    with pytest.raises(StateError):
        with store.locked(timeout=0.1):
            pytest.fail("locked through a symlink")


def test_a_fifo_at_the_lock_path_is_refused_without_hanging(store):
    store.lock_path.parent.mkdir(parents=True)
    os.mkfifo(store.lock_path, 0o600)
    with pytest.raises(StateError, match="not a regular file"):
        with store.locked(timeout=0.1):
            pytest.fail("locked a FIFO")


def test_the_lock_is_released_when_the_body_raises(store):
    with pytest.raises(RuntimeError):
        with store.locked(timeout=1):
            raise RuntimeError("boom")
    assert store.lock_holder() is None
    with store.locked(timeout=0.1):
        pass


def test_the_empty_inbox_cursor_is_valid(store):
    """An inbox seen empty is recorded below every id: a new account's first message may be id 0."""
    store.save(CursorState(cursor=-1))
    assert store.load().state.cursor == -1


def test_a_killed_writers_temp_files_are_removed_under_the_lock(store):
    store.save(CursorState(cursor=1))
    orphan = store.path.parent / f".{store.path.name}.99999.tmp"
    orphan.write_text("half a state")
    unrelated = store.path.parent / ".other.json.99999.tmp"
    unrelated.write_text("another cursor's")
    with store.locked(1.0):
        pass
    assert not orphan.exists() and unrelated.exists()
    assert store.load().state.cursor == 1


# -- a long-lived store (watch): the lock file kept open, the state's parse kept ---------------------------

def test_the_lock_file_stays_open_between_holds_and_others_still_wait_for_a_hold(store):
    """A watch pulls on every wake: its store keeps one descriptor for the lock file instead of opening it
    each time, but holds the flock only during a hold, so another process can take it in between."""
    with store.locked(timeout=1):
        kept = store._lock_fd
    assert kept is not None and store.lock_holder() is None
    child = _hold_in_child(store)  # between two of our holds: another puller gets the lock at once
    try:
        with pytest.raises(LockTimeout):
            with store.locked(timeout=0.1):
                pytest.fail("acquired a lock held by another process")
    finally:
        child.kill()
        child.wait(5)
    with store.locked(timeout=1):
        assert store._lock_fd == kept and store.lock_holder() == os.getpid()
    store.close()
    with pytest.raises(OSError):
        os.fstat(kept)


def test_a_lock_file_replaced_between_holds_is_the_one_locked(store):
    """If the lock file was removed or replaced since this store opened it, the flock that counts is on the
    file the path names now (others open it by path): the store opens that one."""
    with store.locked(timeout=1):
        pass
    os.unlink(store.lock_path)
    child = _hold_in_child(store)  # creates and locks a new file at the path
    try:
        with pytest.raises(LockTimeout):
            with store.locked(timeout=0.1):
                pytest.fail("locked the removed file while another process holds the current one")
    finally:
        child.kill()
        child.wait(5)
    with store.locked(timeout=1):
        assert os.fstat(store._lock_fd).st_ino == os.stat(store.lock_path).st_ino
        assert store.lock_holder() == os.getpid()


def test_the_pid_is_rewritten_when_another_process_held_the_lock_last(store):
    with store.locked(timeout=1):
        pass
    child = _hold_in_child(store)
    child.kill()
    child.wait(5)
    assert store.lock_path.read_text() == f"{child.pid}\n"
    with store.locked(timeout=1):
        assert store.lock_path.read_text() == f"{os.getpid()}\n"


def test_a_load_of_unchanged_bytes_gives_an_independent_copy(store):
    """The parse of the bytes last read or written is kept; what a load returns is the caller's to change."""
    store.save(CursorState(cursor=10, delivered_above=[12], recent={9: "0123abcd"}, failures={11: 2}))
    with store.locked(timeout=1):
        first = store.load().state
    first.delivered_above.append(99)
    first.recent[8] = "ffffffff"
    first.failures.clear()
    again = store.load().state
    assert again == CursorState(cursor=10, delivered_above=[12], recent={9: "0123abcd"}, failures={11: 2})


def test_a_load_sees_what_another_writer_saved_and_damage_made_in_place(store):
    """The kept parse is used only for the very same bytes: a save by another store (another process),
    and a file damaged in place with its size unchanged, are both read as they are now."""
    store.save(CursorState(cursor=10))
    assert store.load().state.cursor == 10
    other = StateStore(store.path, store.lock_path, IDENTITY)
    other.save(CursorState(cursor=11))
    assert store.load().state.cursor == 11
    raw = store.path.read_bytes()
    damaged = raw.replace(b'"cursor": 11', b'"cursor": -5')
    assert len(damaged) == len(raw)
    with open(store.path, "r+b") as handle:  # in place: same inode
        handle.write(damaged)
    loaded = store.load()
    assert loaded.state is None and "cursor" in loaded.corrupt_reason


def test_the_state_file_holds_every_id_the_contract_accepts(store):
    """Issue 23, item 1: the largest id (2**63 - 1) in every place the state keeps ids loads back as it was
    (an id of 10**20 once made the remembered-ids list unreadable: every later pull was state_corrupt)."""
    top = MAX_ID
    state = CursorState(cursor=top - 3, delivered_above=[top - 1, top],
                        recent={top - 4: "0123abcd", top - 3: "89abcdef"}, failures={top - 2: 1},
                        parked={top - 5: {"since": "t", "attempts": 3, "retry": False}})
    store.save(state)
    loaded = store.load()
    assert loaded.corrupt_reason is None and loaded.state == state


@pytest.mark.parametrize("field, value", [("cursor", 2**63), ("delivered_above", [2**63])])
def test_an_id_past_the_contract_range_in_a_state_file_is_corrupt(store, field, value):
    """A file an older version wrote after believing id 2**63 is not believed either (it is announced and
    fails closed, as any damaged state)."""
    store.save(CursorState(cursor=5))
    doc = json.loads(store.path.read_text())
    doc[field] = value
    store.path.write_text(json.dumps(doc))
    store.previous.unlink(missing_ok=True)
    loaded = store.load()
    assert loaded.state is None and loaded.corrupt_reason, loaded


def test_a_loose_state_root_is_tightened_with_the_cursors_dir(tmp_path):
    root = tmp_path / "state"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    store = StateStore(root / "cursors" / "c.json", root / "cursors" / "c.lock", IDENTITY, root=root)
    store.save(CursorState(cursor=1))
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(root / "cursors").st_mode) == 0o700


def test_a_state_dir_through_a_file_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    store = StateStore(tmp_path / "file" / "cursors" / "c.json", tmp_path / "file" / "cursors" / "c.lock", IDENTITY)
    with pytest.raises(StateError, match="cannot be created .*Not a directory"):
        store.save(CursorState(cursor=1))
    with pytest.raises(StateError, match="cannot be created"):
        with store.locked(0.1):
            pass


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_journal_that_is_not_a_regular_file_is_refused_without_blocking(store, tmp_path, kind):
    """Issue 23, item 5: never opened through a link, never blocked on (a FIFO's open() would wait for a
    writer forever, holding the cursor's lock); the load says why instead."""
    store.save(CursorState(cursor=5))
    if kind == "fifo":
        os.mkfifo(store.journal)
    else:
        target = tmp_path / "elsewhere"
        target.write_text("journal whatever\n6\n7\n")
        store.journal.symlink_to(target)
    loaded = store.load()
    assert loaded.state.cursor == 5 and loaded.state.delivered_above == []
    assert "the ack journal" in loaded.refused and ("regular file" in loaded.refused
                                                   or "symbolic link" in loaded.refused)
