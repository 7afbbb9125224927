"""State damage through the real CLI against the sandbox (issue 6, item 5).

The cursor file (and the lock beside it, and the directory holding both) is damaged in every way a
disk, an editor, a backup tool or an attacker can: truncated at every byte offset, filled with
garbage, replaced by a symlink, a FIFO or a directory, made unreadable, its directory made
read-only. For each: the damage is announced (`state_corrupt`, or one line on stderr), the run fails
closed (what is visible is delivered again rather than skipped), nothing is lost (every message sent
is delivered by some run, at the latest once the damage is repaired), nothing crashes (no
traceback), `watch` keeps running without spinning, and nothing is written outside the state dir.

Root note: the suite runs as root, which ignores permission bits. A read-only directory is made with
`chattr +i` (immutable: even root cannot create, rename or delete in it); unreadability is simulated
by failing the state file's open() with EACCES, and the real chmod 000 case runs only as non-root.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kijito_pull.core import paths
from kijito_pull.core.state import MAX_STATE_BYTES
from kijito_pull.sandbox import Sandbox
from tests.clirunner import Cli, Result, unprivileged
from tests.watchrunner import WatchProc

TOKEN = "damage-token-3c1d"
P = "P"


@pytest.fixture
def sb():
    with Sandbox(token=TOKEN, window_limit=20).start() as sandbox:
        yield sandbox


@pytest.fixture
def world(sb, tmp_path):
    return World(sb, tmp_path)


class World:
    """A sandbox, a CLI with a private state dir, a decoy directory outside it, and the mail ledger."""

    def __init__(self, sb: Sandbox, tmp: Path):
        self.sb = sb
        self.tmp = tmp
        self.state_dir = tmp / "state"
        self.outside = tmp / "outside"
        self.outside.mkdir()
        (self.outside / "precious.json").write_text('{"untouched": true}\n')
        self.cli = Cli(sb.url, TOKEN, self.state_dir)
        self.state_file, self.lock_file = paths.cursor_paths(self.cli.environ, sb.url, P, "agent")
        self.cursors = self.state_file.parent
        self.journal = self.state_file.with_name(self.state_file.name + ".journal")
        self.sent: list[int] = []
        self.delivered: list[int] = []
        self._immutable: list[Path] = []

    def send(self, n: int = 1, content: str = "m{}") -> list[int]:
        ids = [self.sb.send(to=P, sender="Q", content=content.format(len(self.sent) + i)) for i in range(n)]
        self.sent.extend(ids)
        return ids

    def once(self, *extra: str) -> Result:
        result = self.cli("--once", "--json", "--persona", P, *extra)
        self._check(result)
        return result

    def once_subprocess(self, *extra: str, timeout: float = 30, prefix: list[str] | None = None) -> Result:
        # Run from the decoy directory, so a stray relative write would land where the snapshot sees it.
        proc = self.cli.spawn("--once", "--json", "--persona", P, *extra, cwd=str(self.outside),
                              prefix=prefix or [])
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"--once did not finish within {timeout} s")
        result = Result(proc.returncode, out, err)
        self._check(result)
        return result

    def status_subprocess(self, timeout: float = 20) -> Result:
        proc = self.cli.spawn("status", "--json", cwd=str(self.outside))
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"status did not finish within {timeout} s")
        return Result(proc.returncode, out, err)

    def _check(self, result: Result) -> None:
        assert "Traceback" not in result.stderr, result.stderr
        for line in result.stdout.splitlines():
            json.loads(line)  # every stdout line is one whole event
        self.delivered.extend(result.new_ids)

    def establish(self) -> None:
        self.send(1)
        first = self.once()
        assert first.code == 0 and first.new_ids == self.sent, first.stderr
        assert self.state_file.is_file()

    def snapshot_outside(self) -> dict[str, tuple[int, int, bytes]]:
        """Every path under tmp outside the state dir, with its mode, mtime and content."""
        seen = {}
        for root, dirs, files in os.walk(self.tmp):
            if Path(root) == self.tmp:
                dirs[:] = [d for d in dirs if d not in ("state", "scratch")]  # scratch: the test's own
            for name in dirs + files:
                p = Path(root) / name
                st = os.lstat(p)
                data = p.read_bytes() if stat.S_ISREG(st.st_mode) else b""
                seen[str(p)] = (st.st_mode, st.st_mtime_ns, data)
        return seen

    def immutable(self, path: Path) -> None:
        if shutil.which("chattr") is None:
            pytest.skip("chattr is not available, so a directory cannot be made read-only for root")
        proc = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"chattr +i is not supported here ({proc.stderr.strip()})")
        self._immutable.append(path)

    def mutable(self, path: Path) -> None:
        subprocess.run(["chattr", "-i", str(path)], check=True)
        self._immutable.remove(path)

    def cleanup(self) -> None:
        for path in list(self._immutable):
            self.mutable(path)

    def assert_state_sound(self) -> None:
        st = os.lstat(self.state_file)
        assert stat.S_ISREG(st.st_mode), "the state path is not a regular file after repair"
        assert stat.S_IMODE(st.st_mode) == 0o600
        doc = json.loads(self.state_file.read_text())
        assert doc["identity"]["persona"] == P and isinstance(doc["cursor"], int)


@pytest.fixture(autouse=True)
def _undo_immutable(request):
    yield
    world = request.node.funcargs.get("world")
    if world is not None:
        world.cleanup()


def one_line_error(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kijito-pull: "), result.stderr
    return lines[0]


# -- truncation at every byte offset ------------------------------------------------------------------


def test_truncation_at_every_byte_offset_is_announced_and_loses_nothing(world):
    world.sb.set_window(limit=4)  # fail closed re-delivers the window each time: keep it small and fast
    world.establish()
    good = world.state_file.read_bytes()
    offsets = len(good)
    assert 150 < offsets < 600  # a small file: every offset is tried
    outside = world.snapshot_outside()
    for cut in range(offsets):
        good = world.state_file.read_bytes()
        [mid] = world.send(1)
        world.state_file.write_bytes(good[:cut])
        had_good_copy = world.state_file.with_name(world.state_file.name + ".prev").exists()
        try:
            still_valid = json.loads(good[:cut]) == json.loads(good)
        except ValueError:
            still_valid = False
        result = world.once()
        assert result.code == 0, (cut, result.stderr)
        assert mid in result.new_ids, cut
        assert result.new_ids == sorted(result.new_ids)
        corrupt = result.of_kind("state_corrupt")
        if still_valid:  # only the trailing newline was cut: the same state, nothing to announce
            assert corrupt == [] and result.new_ids == [mid], cut
        else:
            assert len(corrupt) == 1 and corrupt[0]["reason"], cut
            if had_good_copy:
                # The last good copy (the state before the last save) stands in: nothing is skipped, and
                # at most what that last save acknowledged comes again.
                assert corrupt[0]["restored"] == "the last good copy", cut
                assert result.new_ids[-1] == mid and len(result.new_ids) <= 2, (cut, result.new_ids)
            else:
                # No good copy yet: fail closed, everything visible (the window's 4 newest rows) again.
                visible = [m["id"] for m in world.sb.messages(P)][-4:]
                assert result.new_ids == visible, cut
    world.assert_state_sound()
    assert world.once().new_ids == []
    assert set(world.sent) <= set(world.delivered)
    assert world.snapshot_outside() == outside


# -- the catalogue of damage --------------------------------------------------------------------------


@dataclass
class Damage:
    apply: Callable[[World], None]
    repair: Callable[[World], None] | None = None  # None: the pulling run itself replaces the damage
    subprocess: bool = False  # run it as a real process, bounded by a timeout (a FIFO could block)


def _write(data: bytes) -> Callable[[World], None]:
    return lambda w: w.state_file.write_bytes(data)


def _symlink_to_valid_state_outside(w: World) -> None:
    # The link target is a *valid* state for this very cursor, ahead of all mail: following it would
    # silently skip everything. It must not be read, and must not be written through.
    target = w.outside / "stolen.json"
    doc = json.loads(w.state_file.read_text())
    doc["cursor"] = 10**9
    target.write_text(json.dumps(doc))
    w.state_file.unlink()
    w.state_file.symlink_to(target)


def _dangling_symlink(w: World) -> None:
    w.state_file.unlink()
    w.state_file.symlink_to(w.outside / "created-through-link.json")


def _fifo(path_of: Callable[[World], Path]) -> Callable[[World], None]:
    def apply(w: World) -> None:
        path = path_of(w)
        path.unlink(missing_ok=True)
        os.mkfifo(path, 0o600)
    return apply


def _directory(path_of: Callable[[World], Path], with_file: bool = False) -> Callable[[World], None]:
    def apply(w: World) -> None:
        path = path_of(w)
        path.unlink(missing_ok=True)
        path.mkdir()
        if with_file:
            (path / "inside").write_text("x")
    return apply


def _remove_dir(path_of: Callable[[World], Path]) -> Callable[[World], None]:
    return lambda w: shutil.rmtree(path_of(w))


def _lock_symlink(w: World) -> None:
    w.lock_file.unlink(missing_ok=True)
    w.lock_file.symlink_to(w.outside / "precious.json")


def _cursors_dir_is_a_file(w: World) -> None:
    backup = w.tmp / "scratch" / "cursors-backup"
    shutil.copytree(w.cursors, backup)
    shutil.rmtree(w.cursors)
    w.cursors.write_text("not a directory")


def _restore_cursors_dir(w: World) -> None:
    w.cursors.unlink()
    shutil.copytree(w.tmp / "scratch" / "cursors-backup", w.cursors)


def _journal_symlink(w: World) -> None:
    # A journal naming the state's own generation, outside the state dir: read through the link, its
    # ids would count as acknowledged although they were never handed over (issue 23, item 5).
    generation = json.loads(w.state_file.read_text())["updated"]
    target = w.outside / "journal"
    target.write_text(f"journal {generation}\n" + "".join(f"{i}\n" for i in range(1, 100)))
    w.journal.symlink_to(target)


def _cursors_dir_links_to_a_file(w: World) -> None:
    (w.tmp / "scratch").mkdir(exist_ok=True)
    shutil.move(w.cursors, w.tmp / "scratch" / "cursors-backup")
    w.cursors.symlink_to(w.outside / "precious.json")


def _restore_cursors_dir_from_link(w: World) -> None:
    w.cursors.unlink()
    shutil.move(w.tmp / "scratch" / "cursors-backup", w.cursors)


def _read_only_dir(mode: int) -> Callable[[World], None]:
    def apply(w: World) -> None:
        os.chmod(w.cursors, mode)
        w.immutable(w.cursors)
    return apply


def _writable_dir(w: World) -> None:
    w.mutable(w.cursors)


DAMAGES = {
    # Healed by the next run: announced as state_corrupt, visible mail re-delivered, file rewritten.
    "empty": Damage(_write(b"")),
    "nul bytes": Damage(_write(b"\x00" * 64)),
    "random binary": Damage(_write(bytes(range(256)) * 3)),
    "invalid utf-8 inside json": Damage(_write(b'{"schema": 1, "cursor": "\xff\xfe"}')),
    "json but a list": Damage(_write(b"[1, 2, 3]")),
    "json but a number": Damage(_write(b"123456789")),
    "cursor far ahead, wrong identity": Damage(lambda w: w.state_file.write_text(json.dumps(
        {"schema": 1, "identity": {"api_base": "https://elsewhere", "persona": P, "consumer": "agent"},
         "cursor": 10**9, "delivered_above": [], "pin": None}))),
    "cursor below -1": Damage(lambda w: w.state_file.write_text(
        json.dumps({**json.loads(w.state_file.read_text()), "cursor": -7}))),
    "cursor a float": Damage(lambda w: w.state_file.write_text(
        json.dumps({**json.loads(w.state_file.read_text()), "cursor": 1.5}))),
    "delivered_above not ints": Damage(lambda w: w.state_file.write_text(
        json.dumps({**json.loads(w.state_file.read_text()), "delivered_above": ["x"]}))),
    "deeply nested": Damage(_write(b"[" * 100_000 + b"]" * 100_000)),
    "larger than the size cap": Damage(lambda w: w.state_file.write_bytes(b" " * (MAX_STATE_BYTES + 1))),
    "symlink to a valid state outside": Damage(_symlink_to_valid_state_outside),
    "dangling symlink out of the state dir": Damage(_dangling_symlink),
    "fifo": Damage(_fifo(lambda w: w.state_file), subprocess=True),
    # Persistent until repaired: every run fails with one line (after at most re-delivering the first
    # visible message, which it cannot acknowledge), and a repaired state loses nothing.
    "state path is an empty directory": Damage(_directory(lambda w: w.state_file),
                                               _remove_dir(lambda w: w.state_file)),
    "state path is a non-empty directory": Damage(_directory(lambda w: w.state_file, with_file=True),
                                                  _remove_dir(lambda w: w.state_file)),
    "lock is a symlink out of the state dir": Damage(_lock_symlink, lambda w: w.lock_file.unlink()),
    "lock is a fifo": Damage(_fifo(lambda w: w.lock_file), lambda w: w.lock_file.unlink(), subprocess=True),
    "lock is a directory": Damage(_directory(lambda w: w.lock_file), _remove_dir(lambda w: w.lock_file)),
    "cursors dir replaced by a file": Damage(_cursors_dir_is_a_file, _restore_cursors_dir),
    # Issue 23, items 5 and 6: refused with one line, never opened through a link or blocked on.
    "ack journal is a fifo": Damage(_fifo(lambda w: w.journal), lambda w: w.journal.unlink(), subprocess=True),
    "ack journal is a symlink out of the state dir": Damage(_journal_symlink, lambda w: w.journal.unlink()),
    "cursors dir is a symlink to a file": Damage(_cursors_dir_links_to_a_file, _restore_cursors_dir_from_link,
                                                 subprocess=True),
    "cursors dir read-only (immutable, 0700)": Damage(_read_only_dir(0o700), _writable_dir),
    "cursors dir read-only (immutable, 0755)": Damage(_read_only_dir(0o755), _writable_dir),
}


# One-shot entry points: (in-process run, real-process run), each returning the run's NDJSON Result.
# The hook adapters join this table when they land, with a Result adapter for their own output.
ONE_SHOT: dict[str, tuple[Callable[[World], Result], Callable[[World], Result]]] = {
    "--once": (lambda w: w.once(), lambda w: w.once_subprocess()),
}


@pytest.mark.parametrize("entry", list(ONE_SHOT))
@pytest.mark.parametrize("name", list(DAMAGES))
def test_damage_is_announced_fails_closed_and_loses_nothing(world, name, entry):
    damage = DAMAGES[name]
    world.establish()
    pending = world.send(3)
    damage.apply(world)
    outside = world.snapshot_outside()
    in_process, real_process = ONE_SHOT[entry]
    def run() -> Result:
        return real_process(world) if damage.subprocess else in_process(world)

    # `status` reads the same files: it must describe the damage, not hang on it or crash.
    status = world.cli("status", "--json") if not damage.subprocess else world.status_subprocess()
    assert status.code == 0 and "Traceback" not in status.stderr, status.stderr
    assert len(status.events) == (0 if name in ("cursors dir replaced by a file", "cursors dir is a symlink to a file")
                                  else 1), status.stdout

    first = run()
    if damage.repair is None:
        assert first.code == 0, first.stderr
        [corrupt] = first.of_kind("state_corrupt")
        assert corrupt["reason"] and "\n" not in corrupt["reason"]
        assert first.new_ids == world.sent  # everything visible again, in order: fail closed
        world.assert_state_sound()
    else:
        assert first.code == 1, first.stdout + first.stderr
        one_line_error(first)
        assert set(first.new_ids) <= set(world.sent) and first.new_ids == sorted(first.new_ids)
        again = run()  # still damaged: the same clean failure, no progress claimed
        assert again.code == 1
        one_line_error(again)
        assert set(again.new_ids) <= set(first.new_ids) or not first.new_ids
        damage.repair(world)
        repaired = world.once()
        assert repaired.code == 0, repaired.stderr
        world.assert_state_sound()
    later = world.send(2)
    final = world.once()
    assert final.code == 0 and final.new_ids == later, final.stdout + final.stderr
    assert set(pending) <= set(world.delivered), "mail sent before the damage was lost"
    assert world.snapshot_outside() == outside, "something outside the state dir was written"


def test_an_unreadable_state_file_is_announced_and_loses_nothing(world, monkeypatch):
    """EACCES on open, simulated at the syscall boundary (root reads through chmod 000)."""
    world.establish()
    pending = world.send(3)
    target = str(world.state_file)
    real_open = os.open

    def open_denying_reads(path, flags, *args, **kwargs):
        if os.fspath(path) == target and not flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(errno.EACCES, "Permission denied", target)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_denying_reads)
    result = world.once()
    assert result.code == 0, result.stderr
    [corrupt] = result.of_kind("state_corrupt")
    assert "Permission denied" in corrupt["reason"]
    assert result.new_ids == world.sent  # fail closed: all visible mail again
    monkeypatch.undo()
    world.assert_state_sound()
    assert world.once().new_ids == []
    assert set(pending) <= set(world.delivered)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOTDIR, errno.ENOSPC],
                         ids=["read-only file system", "parent without write permission", "parent is a file",
                              "disk full"])
def test_a_state_dir_that_cannot_be_created_is_one_line_and_nothing_is_acknowledged(world, monkeypatch, code):
    """Issue 23, item 6: mkdir failing (simulated at the syscall: root writes anywhere, and no read-only file
    system is at hand) is one clear line and exit 1, no traceback; nothing is acknowledged, so a later run
    that can write delivers everything."""
    pending = world.send(2)
    real_mkdir = os.mkdir

    def failing_mkdir(path, *args, **kwargs):
        if str(path).startswith(str(world.state_dir)):
            raise OSError(code, os.strerror(code), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", failing_mkdir)
    result = world.once()
    assert result.code == 1 and result.new_ids == [], result.stdout + result.stderr
    line = one_line_error(result)
    assert "cannot be created" in line and os.strerror(code) in line, line
    assert not world.state_dir.exists()
    monkeypatch.undo()
    assert world.once().new_ids == pending


def test_a_loose_state_dir_root_is_made_private(world):
    """Issue 23, item 6: the state root, not only cursors/ inside it, is tightened to 0700."""
    world.state_dir.mkdir(mode=0o755)
    os.chmod(world.state_dir, 0o755)
    world.establish()
    assert stat.S_IMODE(os.stat(world.state_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(world.cursors).st_mode) == 0o700


def test_a_chmod_000_state_file_is_announced_and_loses_nothing(world):
    world.establish()
    pending = world.send(3)
    os.chmod(world.state_file, 0)
    result = world.once_subprocess(prefix=unprivileged())  # root would read it anyway
    assert result.code == 0, result.stderr
    assert len(result.of_kind("state_corrupt")) == 1
    assert set(pending) <= set(result.new_ids)


# -- watch -------------------------------------------------------------------------------------------


@pytest.fixture
def watches():
    started: list[WatchProc] = []
    yield started
    for w in started:
        w.kill()


def _inbox_requests(sb) -> int:
    return sum(1 for r in sb.requests if r["path"] == "/api/inbox")


def _no_traceback(w: WatchProc) -> None:
    assert "Traceback" not in "".join(w.stderr_lines), "".join(w.stderr_lines)


def test_watch_heals_garbage_state_and_keeps_delivering(world, watches):
    world.establish()
    pending = world.send(3)
    world.state_file.write_bytes(b"\x00garbage{")
    w = WatchProc(world.cli, "--persona", P, "--wait", "2")
    watches.append(w)
    corrupt = w.wait_for(lambda e: e["event"] == "state_corrupt")
    assert corrupt["persona"] == P
    for mid in pending:
        w.wait_for(lambda e, mid=mid: e["event"] == "new" and e["id"] == mid)
    [later] = world.send(1)
    w.wait_for(lambda e: e["event"] == "new" and e["id"] == later)
    assert w.new_ids().count(later) == 1
    world.assert_state_sound()
    assert w.stop() == 0
    _no_traceback(w)


@pytest.mark.parametrize("name", ["state path is a non-empty directory", "cursors dir read-only (immutable, 0700)",
                                  "lock is a directory"])
def test_watch_survives_persistent_damage_without_a_restart_storm(world, watches, name):
    damage = DAMAGES[name]
    world.establish()
    pending = world.send(3)
    damage.apply(world)
    outside = world.snapshot_outside()
    w = WatchProc(world.cli, "--persona", P, "--wait", "2")
    watches.append(w)
    w.wait_for(lambda e: e["event"] == "armed", timeout=15)
    world.sb.clear_requests()
    time.sleep(3.0)
    assert w.proc.poll() is None, "watch exited on damaged state"
    # Backoff, not a spin: retries at 1, 2, 4 ... s, plus at most the long-poll's own traffic.
    assert _inbox_requests(world.sb) <= 4, world.sb.requests
    assert len(w.stderr_lines) <= 6, w.stderr_lines
    _no_traceback(w)

    damage.repair(world)
    [later] = world.send(1)  # the count rises, so the watch pulls at once
    w.wait_for(lambda e: e["event"] == "new" and e["id"] == later, timeout=15)
    assert set(pending) <= set(w.new_ids()), "mail sent before the damage was lost"
    w.drain(0.5)
    assert w.new_ids().count(later) == 1
    world.assert_state_sound()
    assert w.stop() == 0
    _no_traceback(w)
    assert world.snapshot_outside() == outside
