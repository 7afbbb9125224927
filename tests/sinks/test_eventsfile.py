"""The events file: durable before acknowledged, private, rotated so that `tail -F` loses no line."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kijito_pull.core.events import EventFactory, to_ndjson
from kijito_pull.core.models import Message
from kijito_pull.sinks import eventsfile
from kijito_pull.sinks.eventsfile import EventsFile, EventsFileSink, safe_name, template_path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# -- rotation under a real reader ----------------------------------------------------------------

@pytest.fixture
def fast_dir(tmp_path):
    """A tmpfs directory when there is one: this test is about renames and reopening, not disks, and
    20,000 fsyncs on a busy disk would take most of the suite's time budget."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="kijito-evtest-", dir=shm))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path


class _Reader:
    """`tail -F -n +1 PATH` with its output drained continuously into memory."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen(["tail", "-F", "-n", "+1", "-s", "0.05", str(path)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.data = bytearray()
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            with self.cond:
                self.data.extend(chunk)
                self.cond.notify_all()

    def wait_for_lines(self, count: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.data.count(b"\n") >= count, timeout)

    def stop(self) -> list[str]:
        self.proc.kill()
        self.proc.wait()
        self.thread.join(5)
        return self.data.decode().splitlines()


@pytest.mark.skipif(shutil.which("tail") is None, reason="needs tail")
def test_a_tail_F_reader_sees_every_line_exactly_once_across_rotations(fast_dir):
    path = fast_dir / "events.ndjson"
    total, per_file, burst = 20_000, 3_300, 2_500
    line_bytes = len("line 000000\n")
    reader = _Reader(path)
    events = EventsFile(path, max_bytes=per_file * line_bytes, keep=10)
    try:
        for i in range(total):
            assert events.write_line(f"line {i:06d}"), events.problem
            # tail -F follows one rename at a time: a reader a whole file behind loses that file under
            # any rename-based rotation. So the reader may catch up between bursts, each shorter than
            # a file, and most bursts straddle a rotation with unread lines on both sides of it.
            if (i + 1) % burst == 0:
                assert reader.wait_for_lines(i + 1, timeout=5), f"reader stuck before line {i + 1}"
        assert reader.wait_for_lines(total, timeout=5)
    finally:
        events.close()
        seen = reader.stop()
    expected = [f"line {i:06d}" for i in range(total)]
    assert seen == expected
    archives = sorted(fast_dir.glob("events.ndjson.*"), key=lambda p: -int(p.suffix[1:]))
    assert len(archives) == 6  # 20,000 lines in files of 3,300: six rotations happened
    on_disk = [line for p in [*archives, path] for line in _lines(p)]
    assert on_disk == expected
    assert all(p.stat().st_size <= per_file * line_bytes for p in [*archives, path])


def test_rotation_keeps_only_keep_archives_oldest_last(tmp_path):
    path = tmp_path / "e.ndjson"
    events = EventsFile(path, max_bytes=30, keep=2)  # "n NN\n" is 5 bytes: six lines per file
    for i in range(40):
        assert events.write_line(f"n {i:02d}")
    events.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.ndjson", "e.ndjson.1", "e.ndjson.2"]
    assert _lines(path.with_name("e.ndjson.2")) == [f"n {i:02d}" for i in range(24, 30)]
    assert _lines(path.with_name("e.ndjson.1")) == [f"n {i:02d}" for i in range(30, 36)]
    assert _lines(path) == [f"n {i:02d}" for i in range(36, 40)]


def test_max_bytes_zero_never_rotates_and_an_oversized_line_goes_in_alone(tmp_path):
    unbounded = EventsFile(tmp_path / "u.ndjson", max_bytes=0)
    for _ in range(50):
        assert unbounded.write_line("x" * 100)
    assert len(_lines(tmp_path / "u.ndjson")) == 50
    assert not (tmp_path / "u.ndjson.1").exists()

    small = EventsFile(tmp_path / "s.ndjson", max_bytes=10)
    assert small.write_line("short")
    assert small.write_line("y" * 50)
    assert small.write_line("z" * 50)
    assert _lines(tmp_path / "s.ndjson") == ["z" * 50]
    assert _lines(tmp_path / "s.ndjson.1") == ["y" * 50]
    assert _lines(tmp_path / "s.ndjson.2") == ["short"]


def test_a_rotation_that_fails_does_not_hold_mail_back(tmp_path, monkeypatch):
    path = tmp_path / "e.ndjson"
    events = EventsFile(path, max_bytes=10)
    assert events.write_line("aaaa")

    def refuse(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(eventsfile.os, "replace", refuse)
    assert events.write_line("bbbb")
    assert events.write_line("cccc")
    assert _lines(path) == ["aaaa", "bbbb", "cccc"]
    assert "cannot rotate" in events.rotation_problem
    monkeypatch.undo()
    assert events.write_line("dddd")
    assert events.rotation_problem is None
    assert _lines(path) == ["dddd"]
    assert _lines(tmp_path / "e.ndjson.1") == ["aaaa", "bbbb", "cccc"]


# -- durability ----------------------------------------------------------------------------------

def test_a_line_is_in_the_file_for_another_process_as_soon_as_write_line_returns(tmp_path):
    path = tmp_path / "e.ndjson"
    events = EventsFile(path)
    for i in range(3):
        assert events.write_line(f'{{"n": {i}}}')
        last = subprocess.run(["tail", "-n", "1", str(path)], capture_output=True, text=True, check=True)
        assert last.stdout == f'{{"n": {i}}}\n'


def test_the_file_and_on_create_or_rotation_its_directory_are_fsynced_before_returning(tmp_path, monkeypatch):
    path = tmp_path / "e.ndjson"
    calls: list[tuple[str, int]] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        st = os.fstat(fd)
        calls.append(("dir", 0) if stat.S_ISDIR(st.st_mode) else ("file", st.st_size))
        real_fsync(fd)

    monkeypatch.setattr(eventsfile.os, "fsync", spy)
    events = EventsFile(path, max_bytes=12)
    assert events.write_line("aaaaa")  # creates the file: bytes, then the new name
    assert calls == [("file", 6), ("dir", 0)]
    calls.clear()
    assert events.write_line("bbbbb")  # plain append: the bytes only, already including the line
    assert calls == [("file", 12)]
    calls.clear()
    assert events.write_line("ccccc")  # rotates: the new file's bytes, then the renamed entries
    assert calls == [("file", 6), ("dir", 0)]


def test_a_failed_write_leaves_no_half_line_and_the_retry_is_clean(tmp_path, monkeypatch):
    path = tmp_path / "e.ndjson"
    events = EventsFile(path)
    assert events.write_line("first")
    real_write = os.write

    def half_then_full(fd, data):
        monkeypatch.setattr(eventsfile.os, "write", failing)
        return real_write(fd, bytes(data[: len(data) // 2]))

    def failing(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(eventsfile.os, "write", half_then_full)
    assert events.write_line("second-line") is False
    assert "No space left" in events.problem
    monkeypatch.setattr(eventsfile.os, "write", real_write)
    assert events.write_line("second-line")
    assert _lines(path) == ["first", "second-line"]
    assert events.problem is None


def test_an_os_error_is_a_false_return_never_an_exception(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    events = EventsFile(blocker / "e.ndjson")
    assert events.write_line("x") is False
    assert events.problem and "e.ndjson" in events.problem
    blocker.unlink()
    assert events.write_line("x")  # the directory can now be made: it recovers by itself
    assert _lines(blocker / "e.ndjson") == ["x"]


# -- privacy -------------------------------------------------------------------------------------

def test_created_private_with_missing_parents_0700(tmp_path):
    path = tmp_path / "a" / "b" / "e.ndjson"
    old = os.umask(0o022)
    try:
        assert EventsFile(path).write_line("x")
    finally:
        os.umask(old)
    assert _mode(path) == 0o600
    assert _mode(tmp_path / "a") == 0o700
    assert _mode(tmp_path / "a" / "b") == 0o700


def test_a_looser_file_of_ours_is_tightened_and_kept(tmp_path):
    path = tmp_path / "e.ndjson"
    path.write_text("old\n")
    path.chmod(0o644)
    assert EventsFile(path).write_line("new")
    assert _mode(path) == 0o600
    assert _lines(path) == ["old", "new"]


def test_refuses_a_symlink_even_a_dangling_one(tmp_path):
    target = tmp_path / "target"
    target.write_text("")
    link = tmp_path / "e.ndjson"
    link.symlink_to(target)
    events = EventsFile(link)
    assert events.write_line("mail") is False
    assert "symbolic link" in events.problem
    assert target.read_text() == ""

    dangling = tmp_path / "d.ndjson"
    dangling.symlink_to(tmp_path / "would-be-created")
    events = EventsFile(dangling)
    assert events.write_line("mail") is False
    assert not (tmp_path / "would-be-created").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_refuses_a_file_owned_by_another_user(tmp_path):
    path = tmp_path / "e.ndjson"
    path.write_text("theirs\n")
    path.chmod(0o600)
    os.chown(path, 65534, 65534)
    events = EventsFile(path)
    assert events.write_line("mail") is False
    assert "owned by uid 65534" in events.problem
    assert path.read_text() == "theirs\n"


@pytest.mark.parametrize("with_reader", [False, True])
def test_refuses_a_fifo_without_hanging(tmp_path, with_reader):
    path = tmp_path / "e.ndjson"
    os.mkfifo(path, 0o600)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK) if with_reader else None
    try:
        started = time.monotonic()
        events = EventsFile(path)
        assert events.write_line("mail") is False
        assert time.monotonic() - started < 2
        assert "not a regular file" in events.problem
        if reader is not None:
            assert os.read(reader, 100) == b""  # nothing was written into it (and no writer is left)
    finally:
        if reader is not None:
            os.close(reader)


def test_refuses_a_hard_linked_file(tmp_path):
    other = tmp_path / "other"
    other.write_text("")
    path = tmp_path / "e.ndjson"
    os.link(other, path)
    events = EventsFile(path)
    assert events.write_line("mail") is False
    assert "hard links" in events.problem
    assert other.read_text() == ""


# -- reopening by name ---------------------------------------------------------------------------

def test_reopens_by_name_after_the_file_is_removed(tmp_path):
    path = tmp_path / "e.ndjson"
    events = EventsFile(path)
    assert events.write_line("one")
    path.unlink()
    assert events.write_line("two")
    assert _lines(path) == ["two"]
    assert _mode(path) == 0o600


def test_follows_an_external_rotation_instead_of_writing_into_the_archive(tmp_path):
    path = tmp_path / "e.ndjson"
    events = EventsFile(path)
    assert events.write_line("one")
    path.rename(tmp_path / "e.ndjson.old")  # a logrotate-style rename, then a fresh file
    path.write_text("")
    assert events.write_line("two")
    assert _lines(tmp_path / "e.ndjson.old") == ["one"]
    assert _lines(path) == ["two"]


def test_a_symlink_swapped_in_behind_our_back_is_refused(tmp_path):
    path = tmp_path / "e.ndjson"
    target = tmp_path / "elsewhere"
    target.write_text("")
    events = EventsFile(path)
    assert events.write_line("one")
    path.unlink()
    path.symlink_to(target)
    assert events.write_line("two") is False
    assert target.read_text() == ""


def test_reopen_takes_effect_at_the_next_write(tmp_path):
    path = tmp_path / "e.ndjson"
    events = EventsFile(path)
    assert events.write_line("one")
    path.chmod(0o644)  # only an open checks (and tightens) the mode, so this shows when one happened
    assert events.write_line("two")
    assert _mode(path) == 0o644
    events.reopen()
    assert _mode(path) == 0o644  # nothing happens inside reopen(): safe in a signal handler
    assert events.write_line("three")
    assert _mode(path) == 0o600
    assert _lines(path) == ["one", "two", "three"]


# -- per-persona file names ----------------------------------------------------------------------

def test_template_path_substitutes_a_safe_name_and_needs_the_placeholder(tmp_path):
    assert template_path(f"{tmp_path}/{{persona}}.ndjson", "river") == tmp_path / "river.ndjson"
    assert template_path(f"{tmp_path}/x-{{persona}}/{{persona}}.ndjson", "a.b@c+d-e_f") == \
        tmp_path / "x-a.b@c+d-e_f" / "a.b@c+d-e_f.ndjson"
    with pytest.raises(ValueError):
        template_path(f"{tmp_path}/events.ndjson", "river")


@pytest.mark.parametrize("persona", ["..", ".", "", "../../etc/passwd", "a/b", "a b", "a\x00b", "é", "x" * 300])
def test_template_path_never_leaves_its_directory(tmp_path, persona):
    path = template_path(f"{tmp_path}/{{persona}}", persona)
    assert path.parent == tmp_path
    assert path.name not in ("", ".", "..")
    assert len(path.name) <= 80
    assert "/" not in path.name and "\x00" not in path.name


def test_names_that_differ_only_in_case_or_in_unsafe_characters_get_different_files():
    names = ["river", "River", "RIVER", "a/b", "a_b", "a:b", "a b"]
    safe = [safe_name(n) for n in names]
    assert len({s.lower() for s in safe}) == len(names)  # distinct even on a case-insensitive disk
    assert safe[0] == "river" and safe[4] == "a_b"      # already-safe lowercase names stay readable
    assert safe_name("River") == safe_name("River")     # and the mapping is stable across runs


def _event(persona: str, message_id: int, content: str = "hi") -> tuple[dict, Message]:
    message = Message(id=message_id, sender="river", content=content, created="2026-11-30T10:00:00Z", read=False)
    return EventFactory().new(persona, message), message


def test_sink_writes_each_persona_to_its_own_file_as_ndjson(tmp_path):
    sink = EventsFileSink(lambda p: template_path(f"{tmp_path}/{{persona}}.ndjson", p))
    first, m1 = _event("alpha", 1)
    second, m2 = _event("beta", 2)
    assert sink.deliver(first, m1)
    assert sink.deliver(second, m2)
    alert = EventFactory().signal("alert", "alpha", reason="source down")
    sink.signal(alert)
    assert (tmp_path / "alpha.ndjson").read_text() == to_ndjson(first) + to_ndjson(alert)
    assert [json.loads(line)["id"] for line in _lines(tmp_path / "beta.ndjson")] == [2]
    sink.close()


def test_sink_deliver_is_false_when_the_file_is_refused_and_says_why(tmp_path):
    (tmp_path / "e.ndjson").symlink_to(tmp_path / "x")
    sink = EventsFileSink(lambda p: tmp_path / "e.ndjson")
    event, message = _event("alpha", 1)
    assert sink.deliver(event, message) is False
    assert "symbolic link" in sink.problem


def test_sink_reopen_reaches_every_file(tmp_path):
    sink = EventsFileSink(lambda p: tmp_path / f"{p}.ndjson")
    for n, persona in enumerate(["a", "b"]):
        assert sink.deliver(*_event(persona, n))
        (tmp_path / f"{persona}.ndjson").chmod(0o644)
    sink.reopen()
    for n, persona in enumerate(["a", "b"]):
        assert sink.deliver(*_event(persona, n + 10))
        assert _mode(tmp_path / f"{persona}.ndjson") == 0o600
