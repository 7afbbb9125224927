"""Session lifecycle for harness wakers: one lease per session, durable stop markers, typed results.

Stdlib only: hooks reach this before anything heavy is imported. Everything lives under the state dir
(files 0600, dirs 0700):

    sessions/<session id>.json     the lease of the session's one waker: pid, its start time, the
                                   harness process it serves, project, persona
    sessions/<session id>.rung     the highest message id the session's doorbell already rang for
    sessions/<session id>.blocks   consecutive Stop-hook blocks (the cap on Stop loops)
    sessions/<session id>.synced   which event's synchronous hook last finished its pull
    sessions/<session id>.push     whether the session's waker pushes through Claude Code's inbox socket
    sessions/<session id>.current  what the session's waker knew of the inbox, and when (lean hooks)
    sessions/.lock                 serializes every lease change
    stops/<key>.json               the durable stop marker of one (project, persona)

A lease names a process by pid *and* start time, so a recycled pid is never mistaken for a live
waker. A lease whose process is gone is stale and is swept by the next lease change.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import json
import os
import re
import signal
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kijito_pull.core import process
from kijito_pull.core.errors import KijitoPullError
from kijito_pull.core.paths import Paths

SESSION_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,120}")
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh", "mksh", "busybox", "fish", "env", "nsenter"})
MAX_ANCESTRY = 8
TERMINATE_GRACE = 0.5


class Result(str, enum.Enum):
    """What a lifecycle operation did. Never a bare "ok": each value says what is now true."""

    ARMED = "armed"
    ALREADY_ARMED = "already_armed"
    NOT_ARMED = "not_armed"
    RELEASED = "released"
    STOPPED = "stopped"
    ALREADY_STOPPED = "already_stopped"
    STARTED = "started"
    NOT_STOPPED = "not_stopped"
    HEADLESS = "headless"
    UNSUPPORTED = "unsupported"
    SESSION_ID_UNAVAILABLE = "session_id_unavailable"
    INVALID_SESSION_ID = "invalid_session_id"
    STARTUP_FAILED = "startup_failed"


@dataclass
class Outcome:
    """What a session command (`kijito-pull session ...`) did: its result, the session and the details."""

    result: Result
    session_id: str | None = None
    detail: str = ""
    fields: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"result": self.result.value}
        if self.session_id is not None:
            out["session_id"] = self.session_id
        out.update(self.fields)
        if self.detail:
            out["detail"] = self.detail
        return out

    def line(self) -> str:
        who = f"session {self.session_id}: " if self.session_id else ""
        return f"{who}{self.result.value}" + (f" ({self.detail})" if self.detail else "")


class LifecycleError(KijitoPullError):
    """The state directory cannot be used (exit 1); one line."""


# -- session ids --------------------------------------------------------------------------------------


def check_session_id(value: Any) -> tuple[str | None, str | None]:
    """(the id, None) when valid, else (None, why) -- never raises."""
    if value is None or value == "":
        return None, "no session id"
    if not isinstance(value, str):
        return None, f"the session id is a {type(value).__name__}, not a string"
    if not SESSION_ID_RE.fullmatch(value):
        shown = value[:40] + ("..." if len(value) > 40 else "")
        return None, (f"invalid session id {shown!r}: use 1-120 letters, digits and . _ : -")
    return value, None


# -- files ----------------------------------------------------------------------------------------


def _private_dir(path: Path) -> Path:
    from kijito_pull.core.state import StateError, ensure_private_dir

    try:
        ensure_private_dir(path)
    except (StateError, OSError) as exc:
        raise LifecycleError(str(exc) if isinstance(exc, StateError) else f"{path}: {exc.strerror}") from None
    return path


def sessions_dir(environ: Mapping[str, str]) -> Path:
    return Paths(environ).sessions_dir


def stops_dir(environ: Mapping[str, str]) -> Path:
    return Paths(environ).stops_dir


def read_json(path: Path) -> dict[str, Any] | None:
    """A small private JSON object file (at most 64 KiB); None when it is missing or unreadable, or not a
    regular file (opened without following a link and without blocking: a FIFO there never hangs us)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = json.loads(handle.read(65536).decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a small JSON object file atomically, 0600, in a private directory."""
    _private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise LifecycleError(f"cannot write {path}: {exc.strerror}") from None


def _unlink(path: Path) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise LifecycleError(f"cannot remove {path}: {exc.strerror}") from None


@contextlib.contextmanager
def _locked(environ: Mapping[str, str], timeout: float = 3.0) -> Iterator[Path]:
    from kijito_pull.core import lock as filelock

    directory = _private_dir(sessions_dir(environ))
    try:
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        raise LifecycleError(f"cannot open {directory / '.lock'}: {exc.strerror}") from None
    try:
        try:
            taken = filelock.acquire(fd, timeout)
        except OSError as exc:
            raise LifecycleError(f"cannot lock {directory / '.lock'}: {exc.strerror}") from None
        if not taken:
            raise LifecycleError(f"the session lease lock {directory / '.lock'} stayed busy for {timeout:g} s")
        yield directory
    finally:
        os.close(fd)


# -- processes ------------------------------------------------------------------------------------


# Process facts (a pid and its start-time token, alive or not) are the core's: kijito_pull.core.process.
Proc, proc, alive = process.Proc, process.proc, process.alive


def host_process(start_pid: int | None = None) -> Proc | None:
    """The harness process this hook serves: the first ancestor that is not a shell."""
    pid = os.getppid() if start_pid is None else start_pid
    for _ in range(MAX_ANCESTRY):
        info = process.read_stat(pid)
        if info is None:
            return None
        comm = info[0]
        if comm not in SHELLS or info[2] <= 1:
            return Proc(pid, info[3])
        pid = info[2]
    return None


def terminate(pid: int, start: str | None, grace: float = TERMINATE_GRACE) -> bool:
    """End a lease holder: SIGTERM, then SIGKILL after `grace`. Only the process the lease names."""
    if not alive(pid, start):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(pid, start):
            return True
        time.sleep(0.02)
    if alive(pid, start):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return True


# -- leases -----------------------------------------------------------------------------------------


def lease_path(environ: Mapping[str, str], session_id: str) -> Path:
    return sessions_dir(environ) / f"{session_id}.json"


def read_lease(environ: Mapping[str, str], session_id: str) -> dict[str, Any] | None:
    return read_json(lease_path(environ, session_id))


def live_lease(environ: Mapping[str, str], session_id: str) -> dict[str, Any] | None:
    lease = read_lease(environ, session_id)
    if lease is not None and alive(lease.get("pid"), lease.get("pid_start")):
        return lease
    return None


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _records(directory: Path) -> list[dict[str, Any]]:
    """Every readable JSON record (lease or stop marker) in `directory`, by file name; none if it is absent."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return []
    return [record for record in (read_json(directory / name) for name in names) if record is not None]


def all_leases(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for lease in _records(sessions_dir(environ)):
        if isinstance(lease.get("session_id"), str):
            lease["live"] = alive(lease.get("pid"), lease.get("pid_start"))
            out.append(lease)
    return out


def acquire(environ: Mapping[str, str], session_id: str, *, project: str, persona: str,
            me: Proc, host: Proc | None, source: str | None = None, one_per_host: bool = True) -> Outcome:
    """Take the session's waker lease for `me`, or say who already holds it.

    A live waker of the same harness process under another session id (the id changes on /clear)
    is ended first, so one harness process never runs two wakers -- unless `one_per_host` is False: a
    host that serves many sessions at once (Codex's shared app-server daemon) keeps one per session.
    """
    superseded: list[dict[str, Any]] = []
    with _locked(environ) as directory:
        current = read_json(directory / f"{session_id}.json")
        if current is not None and alive(current.get("pid"), current.get("pid_start")):
            if current.get("pid") != me.pid:
                return Outcome(Result.ALREADY_ARMED, session_id, f"waker pid {current.get('pid')}",
                               {"pid": current.get("pid")})
        for lease in all_leases(environ):
            if lease["session_id"] == session_id:
                continue
            if not lease["live"]:
                _unlink(directory / f"{lease['session_id']}.json")
            elif (one_per_host and host is not None and lease.get("host_pid") == host.pid
                  and lease.get("host_start") == host.start):
                _unlink(directory / f"{lease['session_id']}.json")
                superseded.append(lease)
        write_json(directory / f"{session_id}.json", {
            "session_id": session_id, "pid": me.pid, "pid_start": me.start,
            "host_pid": host.pid if host else None, "host_start": host.start if host else None,
            "project": project_key(project), "persona": persona, "armed_at": _now(), "source": source,
        })
    for lease in superseded:  # outside the lock: the waker gives its lease back on the way out
        terminate(lease["pid"], lease.get("pid_start"))
    return Outcome(Result.ARMED, session_id, f"waker pid {me.pid}", {"pid": me.pid, "persona": persona})


def holds(environ: Mapping[str, str], session_id: str, me: Proc) -> bool:
    lease = read_lease(environ, session_id)
    return lease is not None and lease.get("pid") == me.pid and lease.get("pid_start") == me.start


def release(environ: Mapping[str, str], session_id: str, me: Proc) -> bool:
    """Give the lease up, only if `me` still holds it. Never raises (it runs on the way out)."""
    try:
        with _locked(environ, timeout=1.0) as directory:
            if holds(environ, session_id, me):
                return _unlink(directory / f"{session_id}.json")
    except LifecycleError:
        pass
    return False


def end_session(environ: Mapping[str, str], session_id: str) -> Outcome:
    """The session is over (SessionEnd, /clear): end its waker and forget its per-session files."""
    with _locked(environ) as directory:
        lease = read_json(directory / f"{session_id}.json")
        _unlink(directory / f"{session_id}.json")
        for suffix in (".rung", ".blocks", ".synced", ".transcript", ".push-transcript", ".push", ".current"):
            _unlink(directory / f"{session_id}{suffix}")
    # Outside the lock: a waker being ended takes the lock to give its lease back.
    ended = lease is not None and isinstance(lease.get("pid"), int) and terminate(lease["pid"], lease.get("pid_start"))
    return Outcome(Result.RELEASED if ended else Result.NOT_ARMED, session_id,
                   "its waker was ended" if ended else "no waker was running")


def end_wakers(environ: Mapping[str, str], *, project: str | None = None, persona: str | None = None,
               session_id: str | None = None) -> list[str]:
    """End every live waker matching the filters; returns their session ids."""
    doomed = []
    with _locked(environ) as directory:
        for lease in all_leases(environ):
            if session_id is not None and lease["session_id"] != session_id:
                continue
            if project is not None and lease.get("project") != project:
                continue
            if persona is not None and lease.get("persona") != persona:
                continue
            _unlink(directory / f"{lease['session_id']}.json")
            if lease["live"]:
                doomed.append(lease)
    for lease in doomed:
        terminate(lease["pid"], lease.get("pid_start"))
    return [lease["session_id"] for lease in doomed]


# -- per-session counters -------------------------------------------------------------------------------


def _counter(environ: Mapping[str, str], session_id: str, suffix: str, key: str) -> int:
    data = read_json(sessions_dir(environ) / f"{session_id}{suffix}")
    value = data.get(key) if data else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def read_blocks(environ: Mapping[str, str], session_id: str, prompt_id: str | None = None) -> int:
    """Consecutive Stop blocks of the turn `prompt_id` (Claude Code keeps a turn's prompt_id across
    the continuations its Stop blocks cause; a new prompt or wake has a new one)."""
    data = read_json(sessions_dir(environ) / f"{session_id}.blocks")
    if not data or data.get("prompt_id") != prompt_id:
        return 0
    value = data.get("consecutive")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def write_blocks(environ: Mapping[str, str], session_id: str, count: int, prompt_id: str | None = None) -> None:
    path = sessions_dir(environ) / f"{session_id}.blocks"
    if count <= 0:
        _unlink(path)
    else:
        write_json(path, {"consecutive": count, "prompt_id": prompt_id, "at": _now()})


def read_rung(environ: Mapping[str, str], session_id: str) -> int:
    """The newest id the session's waker rang for; -1 (below every id: Kijito's first is 0) when none."""
    data = read_json(sessions_dir(environ) / f"{session_id}.rung")
    value = data.get("through") if data else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else -1


def write_rung(environ: Mapping[str, str], session_id: str, through: int) -> None:
    write_json(sessions_dir(environ) / f"{session_id}.rung", {"through": through, "at": _now()})


def write_synced(environ: Mapping[str, str], session_id: str, key: str) -> None:
    """A synchronous hook of one event is done with its pull (the waker of the same event waits for it)."""
    write_json(sessions_dir(environ) / f"{session_id}.synced", {"key": key, "at": time.time()})


def write_push_mode(environ: Mapping[str, str], session_id: str, pushing: bool, why: str) -> None:
    """Record whether the session's waker pushes through the inbox socket (and why, or why not)."""
    with contextlib.suppress(LifecycleError):
        write_json(sessions_dir(environ) / f"{session_id}.push", {"pushing": pushing, "why": why[:300],
                                                                    "at": _now()})


def read_push_mode(environ: Mapping[str, str], session_id: str) -> dict[str, Any] | None:
    return read_json(sessions_dir(environ) / f"{session_id}.push")


# -- "current as of": what a live waker knows, so a hook with nothing new need not ask the server --------------


def files_stamp(paths: list[str]) -> list[Any]:
    """(inode, size, mtime ns) of each file, None for one that is absent: changes whenever it is written."""
    out: list[Any] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
            continue
        out.append([st.st_ino, st.st_size, st.st_mtime_ns])
    return out


def write_current(environ: Mapping[str, str], session_id: str, *, me: Proc, persona: str, files: list[str],
                  stamp: list[Any], until: float) -> None:
    """The session's waker vouches: until `until` (epoch seconds), while it lives and `files` (the cursor's
    state file and ack journal) still have `stamp`, there is no unseen mail and nothing pending for `persona`."""
    with contextlib.suppress(LifecycleError):
        write_json(sessions_dir(environ) / f"{session_id}.current", {
            "pid": me.pid, "pid_start": me.start, "persona": persona, "files": files, "stamp": stamp,
            "until": until})


def clear_current(environ: Mapping[str, str], session_id: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(sessions_dir(environ) / f"{session_id}.current")


def nothing_new(environ: Mapping[str, str], session_id: str, persona: str) -> bool:
    """True only when the session's live waker vouches that there is nothing new (write_current) and
    nothing it vouched on has changed since. Any doubt is False: the hook then pulls as usual."""
    data = read_json(sessions_dir(environ) / f"{session_id}.current")
    if not data or data.get("persona") != persona:
        return False
    until, files, stamp = data.get("until"), data.get("files"), data.get("stamp")
    if not isinstance(until, (int, float)) or isinstance(until, bool) or time.time() >= until:
        return False
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        return False
    if files_stamp(files) != stamp:
        return False
    return alive(data.get("pid"), data.get("pid_start"))


def handed_marker(environ: Mapping[str, str], session_id: str) -> Path:
    """Exists while mail handed to this session may still be pending (SessionEnd then settles it)."""
    return sessions_dir(environ) / f"{session_id}.handed"


def read_synced(environ: Mapping[str, str], session_id: str) -> tuple[str, float] | None:
    """(event key, epoch seconds) of the last synchronous hook that finished, if any."""
    data = read_json(sessions_dir(environ) / f"{session_id}.synced")
    key, at = (data.get("key"), data.get("at")) if data else (None, None)
    if isinstance(key, str) and isinstance(at, (int, float)) and not isinstance(at, bool):
        return key, float(at)
    return None


# -- stop markers -----------------------------------------------------------------------------------


def project_key(project: str) -> str:
    return os.path.realpath(project)


def _marker_path(environ: Mapping[str, str], project: str, persona: str) -> Path:
    import hashlib

    key = project_key(project)
    digest = hashlib.sha256(f"{key}\0{persona}".encode("utf-8", "surrogatepass")).hexdigest()[:24]
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", f"{os.path.basename(key)}.{persona}")[:48]
    return stops_dir(environ) / f"{readable}.{digest}.json"


def stop_marker(environ: Mapping[str, str], project: str, persona: str) -> dict[str, Any] | None:
    marker = read_json(_marker_path(environ, project, persona))
    if marker is None and _marker_path(environ, project, persona).exists():
        return {"project": project_key(project), "persona": persona, "since": None}  # unreadable: still stopped
    return marker


def set_stop(environ: Mapping[str, str], project: str, persona: str, *, session_id: str | None = None) -> Outcome:
    """Persist the stop marker and end the project's wakers for that persona."""
    existed = stop_marker(environ, project, persona) is not None
    if not existed:
        write_json(_marker_path(environ, project, persona), {
            "project": project_key(project), "persona": persona, "since": _now(), "session_id": session_id,
            "by_pid": os.getpid()})
    ended = end_wakers(environ, project=project_key(project), persona=persona)
    detail = f"{len(ended)} waker{'s' if len(ended) != 1 else ''} ended; automatic arming stays off until " \
             f"`kijito-pull session start`"
    return Outcome(Result.ALREADY_STOPPED if existed else Result.STOPPED, session_id, detail,
                   {"project": project_key(project), "persona": persona, "wakers_ended": ended})


def clear_stop(environ: Mapping[str, str], project: str, persona: str) -> Outcome:
    removed = _unlink(_marker_path(environ, project, persona))
    detail = ("the waker is armed again at the session's next start or turn end" if removed
              else "no stop marker was set")
    return Outcome(Result.STARTED if removed else Result.NOT_STOPPED, None, detail,
                   {"project": project_key(project), "persona": persona})


def all_stop_markers(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    return _records(stops_dir(environ))


def say(stream: Any, text: str) -> None:
    """One line on stderr, never raising (a hook's stderr may already be closed)."""
    try:
        stream.write(f"kijito-pull: {text}\n")
        stream.flush()
    except (OSError, ValueError):
        pass


__all__ = ["Result", "Outcome", "LifecycleError", "check_session_id", "acquire", "release", "holds",
           "end_session", "end_wakers", "set_stop", "clear_stop", "stop_marker", "host_process", "proc",
           "alive", "terminate", "read_blocks", "write_blocks", "read_rung", "write_rung", "all_leases",
           "all_stop_markers", "live_lease"]
