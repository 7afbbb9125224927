"""Every entry point that pulls mail, as a real subprocess, and what each one handed over.

Shared by the fault matrix, the concurrency and token tests, the entry-point crash trials and the soak
script. Output always goes to files (a pipe nobody reads blocks the writer, which then holds the cursor
lock); the pi child's stdout is the one exception: a thread reads and acknowledges it as it comes, the
way the pi extension does, and copies every line to a file.

    once                kijito-pull --once --json --persona P
    watch               kijito-pull watch --persona P          (NDJSON on stdout, or --events-file)
    pi-child            kijito-pull watch --persona P --ack-stdin   (acked by a thread)
    hook-NAME           kijito-pull hook NAME, as its harness runs it (its JSON on stdin, in an opted-in
                        project): every hook its harness's descriptor lists (ENTRY_HOOKS; Claude Code's
                        keep their first names, hook-session-start and hook-stop)
    NAME-watch          a harness's push watcher (PUSH_WATCHER), with a stand-in of its way in (WAY_IN)

The hooks come from the registry and each harness's descriptor (`<its package>.testing`, below): a new
harness's are here without an edit to this file. The hooks of MATRIX harnesses (Claude Code, Codex) are in
ENTRIES/HOOKS (the fault matrix and the concurrency test); the others are NEW_HOOKS, for the crash trials.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kijito_pull.harnesses import registry
from tests.sessionhost import HostedProc, SessionHost

REPO = Path(__file__).resolve().parent.parent
#: The console script, as Claude Code runs it (its early gate answers hooks before the CLI imports).
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")

PYTHONPATH_ENV = "KIJITO_PULL_TEST_PYTHONPATH"

ONCE = "once"
WATCH = "watch"
PI_CHILD = "pi-child"


# -- the harnesses' descriptors ---------------------------------------------------------------------------
# Each hook harness describes itself in `<its package>.testing` (the contract: kijito_pull/harnesses/claude/
# testing.py): which hooks hand mail over (ENTRY_HOOKS, the crash trials' entry points; MATRIX: also the
# fault matrix's and the concurrency test's), its session's end (SESSION_END, or IDLE and its process), its
# push watcher and the stand-in of its way in (PUSH_WATCHER, WAY_IN), its hook input (hook_input), and its
# record (record_path, record_start, record_lines, record_fields; STORE: a store rewritten whole). Everything
# below iterates the registry: a harness registered at test time (tests/harnesses/settingstoy) is in.


def descriptor(harness: str) -> ModuleType | None:
    """`harness`'s testing descriptor, or None for a harness that has none (pi, daemon: no hooks)."""
    module = registry.HARNESSES[harness] + ".testing"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None


def described() -> list[tuple[str, ModuleType]]:
    """(name, descriptor) of every registered harness that has one, in the registry's order."""
    return [(name, d) for name in registry.HARNESSES if (d := descriptor(name)) is not None]


def entry_of(hook: str) -> str:
    """The entry name of `kijito-pull hook NAME`: "hook-NAME" (a push watcher: its own name)."""
    d = descriptor(hook.split("-", 1)[0])
    if d is not None and hook == getattr(d, "PUSH_WATCHER", None):
        return hook
    return getattr(d, "ENTRY_NAMES", {}).get(hook, "hook-" + hook)


def hook_entries(matrix: bool | None = None) -> tuple[str, ...]:
    """Every harness's hook entry points (`matrix`: only those of MATRIX harnesses, or only the others)."""
    return tuple(entry_of(h) for _, d in described() if matrix is None or getattr(d, "MATRIX", False) == matrix
                 for h in d.ENTRY_HOOKS)


def push_watchers() -> tuple[str, ...]:
    return tuple(d.PUSH_WATCHER for _, d in described() if getattr(d, "PUSH_WATCHER", None))


def crash_entries() -> tuple[str, ...]:
    """What scripts/crash_entries.py kills: watch, the pi child, every hook entry point, every push watcher."""
    return (WATCH, PI_CHILD, *hook_entries(), *push_watchers())


def hook_name(entry: str) -> str:
    """The `kijito-pull hook NAME` an entry runs."""
    for _, d in described():
        for hook, name in getattr(d, "ENTRY_NAMES", {}).items():
            if name == entry:
                return hook
    return entry.removeprefix("hook-")


def harness_of(entry: str) -> str:
    return hook_name(entry).split("-", 1)[0]


def hook_event(entry: str) -> str:
    """The harness event of an entry's hook (a push watcher reads the input of the hook that started it)."""
    found = registry.find_hook(hook_name(entry))
    assert found is not None, f"no hook {hook_name(entry)!r}"
    return found[1].event


def session_end_of(harness: str) -> str | None:
    """The entry that ends one of `harness`'s sessions (None: its process's end)."""
    d = descriptor(harness)
    end = getattr(d, "SESSION_END", None)
    return entry_of(end) if end else None


def nothing_of(entry: str) -> str:
    """What the entry's hook prints when it has nothing to say."""
    return registry.get(harness_of(entry)).nothing


SESSION_START, STOP, SESSION_END = (entry_of(h) for h in ("claude-session-start", "claude-stop", "claude-session-end"))
CLAUDE_HOOKS = (SESSION_START, STOP)
CODEX_HOOKS = tuple(entry_of(h) for h in descriptor("codex").ENTRY_HOOKS)  # type: ignore[union-attr]
CODEX_SESSION_START, CODEX_STOP = CODEX_HOOKS
#: The hooks of the fault matrix and the concurrency test; the others' (NEW_HOOKS) are in the crash trials.
HOOKS = hook_entries(matrix=True)
NEW_HOOKS = hook_entries(matrix=False)
ENTRIES = (ONCE, WATCH, SESSION_START, STOP, PI_CHILD, *(h for h in HOOKS if h not in CLAUDE_HOOKS))
PUSH_WATCHERS = push_watchers()
COPILOT_WATCH, CODEX_WATCH, OPENCODE_WATCH = "copilot-watch", "codex-watch", "opencode-watch"
#: Every hook entry of the harnesses registered at import (hand-overs, session ends, idle hooks, push
#: watchers): its `kijito-pull hook NAME` and its harness event (the functions above see later ones too).
_ALL = (*hook_entries(), *(e for name, d in described() for e in (session_end_of(name),
                                                                   getattr(d, "IDLE", None) and entry_of(d.IDLE))
                           if e), *PUSH_WATCHERS)
HOOK_NAMES = {e: hook_name(e) for e in _ALL}
HOOK_EVENTS = {e: hook_event(e) for e in _ALL}

# How the hook text names a message ("Message 2 of 5: id 123, from loom, ...", or in the listing of
# what did not fit "- Message 7 of 90: id 130, from ..."), and the tail it could not even list.
_HOOK_ID = re.compile(r"Message \d+ of \d+: id (\d+), from ")
_HOOK_RANGE = re.compile(r"not listed; their ids run from (\d+) to (\d+)\.")


def opt_in_text(persona: str) -> str:
    return f"# Project\n\n- inbox monitor: raise on start\n- inbox persona: {persona}\n"


class System:
    """One Kijito API base and token, one state dir and one opted-in project: what every entry point
    of one test shares, so they all pull through the same cursor (consumer `agent` unless told)."""

    def __init__(self, api_base: str, token: str, work: Path, persona: str, *, consumer: str | None = None,
                 extra_env: Mapping[str, str] | None = None):
        self.api_base = api_base
        self.token = token
        self.work = Path(work)
        self.persona = persona
        self.consumer = consumer
        self.state_dir = self.work / "state"
        self.project = self.work / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        (self.project / ".git").mkdir(exist_ok=True)
        (self.project / "AGENTS.md").write_text(opt_in_text(persona))
        self.env = {
            "KIJITOMON_TOKEN": token,
            "KIJITO_BASE": api_base,
            "KIJITO_PULL_STATE_DIR": str(self.state_dir),
            "KIJITO_PULL_CONFIG": os.devnull,
            "PATH": os.environ.get("PATH", ""),
            # To check that a harness catches a deliberately broken copy of the package, point this at it.
            "PYTHONPATH": os.environ.get(PYTHONPATH_ENV) or str(REPO),
            "HOME": str(self.work),
            "CLAUDE_CODE_ENTRYPOINT": "sdk-cli",  # headless: no waker sentence, no output without mail
            "KIJITO_PULL_CLAUDE_WAKER": "off",
            **(extra_env or {}),
        }
        self._n = 0
        self._n_lock = threading.Lock()

    # -- argv -----------------------------------------------------------------------------------

    def consumer_args(self) -> list[str]:
        return ["--consumer", self.consumer] if self.consumer else []

    def once_argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "kijito_pull", "--once", "--json", "--persona", self.persona,
                *self.consumer_args(), *extra]

    def watch_argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "kijito_pull", "watch", "--persona", self.persona, *self.consumer_args(),
                *extra]

    def cli_argv(self, *argv: str) -> list[str]:
        return [sys.executable, "-m", "kijito_pull", *argv]

    def next_paths(self, tag: str) -> tuple[Path, Path]:
        with self._n_lock:
            self._n += 1
            n = self._n
        runs = self.work / "runs"
        runs.mkdir(exist_ok=True)
        return runs / f"{n:05d}-{tag}.out", runs / f"{n:05d}-{tag}.err"

    # -- spawning ---------------------------------------------------------------------------------

    def spawn(self, argv: list[str], out: Path, err: Path, *, env: Mapping[str, str] | None = None,
              stdin: Any = subprocess.DEVNULL, cwd: Path | None = None) -> subprocess.Popen:
        with open(out, "ab") as o, open(err, "ab") as e:
            return subprocess.Popen(argv, stdout=o, stderr=e, stdin=stdin, env={**self.env, **(env or {})},
                                    cwd=str(cwd or self.work))

    def hook_payload(self, entry: str, session_id: str = "sess-1", **fields: Any) -> str:
        """The hook's stdin as its harness writes it: session_id, cwd, hook_event_name (unless the harness
        names none) and the fields its descriptor's `hook_input` adds (docs/<harness>.md), then `fields`."""
        d = descriptor(harness_of(entry))
        assert d is not None, f"{entry}: its harness has no testing descriptor"
        event = hook_event(entry)
        data: dict[str, Any] = {"session_id": session_id, "cwd": str(self.project)}
        if getattr(d, "NAMES_EVENT", True):
            data["hook_event_name"] = event
        data.update(d.hook_input(event, session_id))
        data.update(fields)
        return json.dumps(data)

    def spawn_hook(self, entry: str, out: Path, err: Path, *, session_id: str = "sess-1",
                   env: Mapping[str, str] | None = None, payload: str | None = None,
                   host: SessionHost | None = None) -> subprocess.Popen | HostedProc:
        """`kijito-pull hook NAME` as its harness runs it: the console script, in the project, JSON on stdin
        (written and closed at once; the payload is far below a pipe's buffer). `host`: started as the child
        of that stand-in harness process (tests/sessionhost.py), else of this one."""
        text = payload if payload is not None else self.hook_payload(entry, session_id)
        if host is not None:
            with open(out, "ab") as o, open(err, "ab") as e:
                return host.spawn([KIJITO_PULL, "hook", hook_name(entry)], stdin=text.encode(), stdout=o.fileno(),
                                  stderr=e.fileno(), env={**self.env, **(env or {})}, cwd=self.project)
        proc = self.spawn([KIJITO_PULL, "hook", hook_name(entry)], out, err, env=env, stdin=subprocess.PIPE,
                          cwd=self.project)
        return _feed(proc, text)

    def spawn_hook_piped(self, entry: str, err: Path, payload: str, *, env: Mapping[str, str] | None = None,
                         host: SessionHost | None = None) -> subprocess.Popen | HostedProc:
        """The same, with stdout a pipe (as Claude Code reads it), so a caller sees the answer the moment
        it is written, e.g. to kill the hook right then. The caller must read `proc.stdout`."""
        if host is not None:
            read, write = os.pipe()
            try:
                with open(err, "ab") as e:
                    return host.spawn([KIJITO_PULL, "hook", hook_name(entry)], stdin=payload.encode(), stdout=write,
                                      stderr=e.fileno(), env={**self.env, **(env or {})}, cwd=self.project,
                                      stdout_reader=os.fdopen(read, "rb", buffering=0))
            finally:
                os.close(write)
        with open(err, "ab") as e:
            proc = subprocess.Popen([KIJITO_PULL, "hook", hook_name(entry)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=e, env={**self.env, **(env or {})},
                                    cwd=str(self.project))
        return _feed(proc, payload)

    def run(self, argv: list[str], *, timeout: float = 60, env: Mapping[str, str] | None = None,
            cwd: Path | None = None) -> Ran:
        out, err = self.next_paths("run")
        started, started_at = time.monotonic(), time.time()
        proc = self.spawn(argv, out, err, env=env, cwd=cwd)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{argv[2:]} did not exit within {timeout} s") from None
        return Ran(proc.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"),
                   time.monotonic() - started, started_at, time.time())

    def run_hook(self, entry: str, *, timeout: float = 60, env: Mapping[str, str] | None = None,
                 session_id: str = "sess-1") -> Ran:
        out, err = self.next_paths(entry)
        started, started_at = time.monotonic(), time.time()
        proc = self.spawn_hook(entry, out, err, session_id=session_id, env=env)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{entry} did not exit within {timeout} s") from None
        return Ran(proc.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"),
                   time.monotonic() - started, started_at, time.time())

    def lock_rows(self) -> list[dict]:
        ran = self.run(self.cli_argv("status", "--json"))
        assert ran.code == 0, ran.stderr
        return [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]


def _feed(proc: subprocess.Popen, payload: str) -> subprocess.Popen:
    """Write the hook's JSON to its stdin and close it (the payload is far below a pipe's buffer)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(payload.encode())
        proc.stdin.close()
    except BrokenPipeError:  # killed before it read its input
        pass
    proc.stdin = None
    return proc


class HarnessSession:
    """One session of a hook harness as the harness keeps it: a session id and its record, to which the
    harness adds a hook's answer only once the hook completed; a killed hook's output is dropped, never
    recorded (../shared/harness-notes.md, docs/<harness>.md). The hooks confirm their hand-overs by finding
    the messages' markers in it. Where the record is, how it starts, what a completed hook's answer adds to
    it, what it records as the turn goes on whatever became of the answer (a killed hook's included) and what
    the hook input says of it: the harness's descriptor (`record_path`, `record_start`, `record_lines`,
    `turn_lines`, `record_fields`). A STORE harness's record is a store rewritten whole (OpenCode's: the
    session's messages, as `opencode export <id>` prints it; `prepare` makes what prints it).

    A push watcher's text (`pushed`), once the session's turn takes it: `pushed_lines` (Codex's rollout gains
    a user message) or `pushed_parts` (OpenCode's store a user message; `messages_json`: what its server's
    `GET /session/{id}/message` answers). Copilot's push record is tests/copilotext.py's.
    """

    def __init__(self, directory: Path, session_id: str, codex: bool = False, *, harness: str | None = None,
                 home: Path | None = None, interactive: bool = False, project: Path | None = None):
        self.id = session_id
        self.harness = harness or ("codex" if codex else "claude")
        self.codex = self.harness == "codex"
        d = descriptor(self.harness)
        assert d is not None, f"{self.harness} has no testing descriptor"
        self.d = d
        self.store = getattr(d, "STORE", False)
        self.separators = (",", ":") if getattr(d, "COMPACT", False) else None  # how the harness writes JSON
        directory = Path(directory)
        self.messages: list[dict] = []  # a store's messages
        self.transcript = d.record_path(directory, home or directory, project or directory, session_id)
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # the harness writes its record from more than one thread (pushes)
        if self.store:
            d.prepare(self.transcript)
            self._save()
        else:
            with self.transcript.open("a") as handle:
                for line in d.record_start(session_id, interactive):
                    handle.write(json.dumps(line, separators=self.separators) + "\n")
        self.hooks = 0  # hooks run in this session

    @property
    def binary(self) -> Path:
        """A STORE harness's stand-in that prints its store (OpenCode's `opencode`; descriptor `stand_in`)."""
        return self.d.stand_in(self.transcript)

    def fields(self, event: str = "") -> dict[str, Any]:
        """What the harness's hook input says of the record."""
        return self.d.record_fields(self.transcript, event)

    def record(self, text: str, event: str = "") -> None:
        """What the harness does with a completed hook's answer: the model is given it, the record says so."""
        if self.store:
            self._message(self.d.record_parts(text, event, self.hooks))
            return
        for line in self.d.record_lines(text, event, self.hooks):
            self._line(line)

    def turn(self, event: str = "") -> None:
        """What the harness records as the turn goes on after a hook, whether or not it took the hook's answer
        (descriptor `turn_lines`, e.g. Qwen's model reply; none for most: nothing there confirms a hand-over)."""
        for line in getattr(self.d, "turn_lines", lambda event, n: [])(event, self.hooks):
            self._line(line)

    def pushed(self, text: str) -> None:
        """What the harness records once the turn a push watcher's `text` started is under way."""
        if self.store:
            self._message(self.d.pushed_parts(text))
            return
        assert hasattr(self.d, "pushed_lines"), f"{self.harness}'s push record is not kept here"
        for line in self.d.pushed_lines(text):
            self._line(line)

    def messages_json(self) -> str:
        """A store's session messages as its server answers them."""
        with self._lock:
            return json.dumps(self.messages)

    def _line(self, line: dict) -> None:
        with self._lock, self.transcript.open("a") as handle:
            handle.write(json.dumps(line, separators=self.separators) + "\n")

    def _message(self, parts: list[dict]) -> None:
        with self._lock:
            self.messages.append({"info": {"role": "user", "sessionID": self.id}, "parts": parts})
            self._save()

    def _save(self) -> None:
        """A store changes whole (an export never shows half a message)."""
        tmp = self.transcript.with_name(f".{self.transcript.name}.tmp")
        tmp.write_text(json.dumps({"info": {"id": self.id}, "messages": self.messages}))
        os.replace(tmp, self.transcript)


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    seconds: float
    started_at: float = 0.0  # wall clock (time.time()), to compare with the sandbox's request log
    ended_at: float = 0.0

    def ndjson(self) -> list[dict]:
        return ndjson_events(self.stdout)[0]

    def new_ids(self) -> list[int]:
        return [e["id"] for e in self.ndjson() if e.get("event") == "new"]

    def __str__(self) -> str:
        return (f"exit {self.code} after {self.seconds:.2f} s\n--- stdout\n{self.stdout[-3000:]}"
                f"\n--- stderr\n{self.stderr[-3000:]}")


# -- reading what was handed over ------------------------------------------------------------------


def ndjson_events(text: str) -> tuple[list[dict], bool]:
    """The complete lines of an NDJSON stream, and whether a torn last line (cut by a kill) was ignored."""
    lines = text.split("\n")
    torn = lines[-1] != ""
    return [json.loads(line) for line in lines[:-1] if line.strip()], torn


def new_ids(events: Iterable[dict]) -> list[int]:
    return [e["id"] for e in events if e.get("event") == "new"]


def hook_text(stdout: str) -> str | None:
    """The text a hook handed to its harness (additionalContext, a Stop block's reason, OpenCode's `text`), or
    None when it handed over nothing (no output, or `{}`). Raises AssertionError when stdout is anything but
    one JSON object the harness reads."""
    if not stdout.strip():
        return None
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"hook stdout is not one JSON line: {stdout[:500]!r}"
    data = json.loads(lines[0])
    assert isinstance(data, dict), data
    if data == {}:
        return None
    if "hookSpecificOutput" in data:
        specific = data["hookSpecificOutput"]
        if specific.get("permissionDecision") == "deny":  # a Stop block as a denial (Kimi Code CLI)
            text = specific["permissionDecisionReason"]
        else:
            text = specific["additionalContext"]
        if "additionalContext" in data:  # Copilot CLI reads the top-level copy
            assert data["additionalContext"] == text, data
    elif set(data) in ({"text"}, {"message"}):  # one more part of the user message, a message before the prompt
        text = data["text"] if "text" in data else data["message"]
    else:
        assert data.get("decision") == "block", data
        text = data["reason"]
    assert isinstance(text, str)
    return text


def hook_ids(stdout: str, universe: Iterable[int] = ()) -> list[int]:
    """The message ids a hook handed over, in order (`text_ids` of its answer's text)."""
    text = hook_text(stdout)
    return [] if text is None else text_ids(text, universe)


def text_ids(text: str, universe: Iterable[int] = ()) -> list[int]:
    """The message ids one hand-over's text names, in order. Messages that did not even fit the listing are
    named only as a range ("their ids run from L to H"); those count as the ids of `universe` in that range."""
    ids = [int(m) for m in _HOOK_ID.findall(text)]
    pool = sorted(set(universe))
    for low, high in _HOOK_RANGE.findall(text):
        ids.extend(i for i in pool if int(low) <= i <= int(high) and i not in ids)
    return ids


# -- the pi child ----------------------------------------------------------------------------------


@dataclass
class PiChild:
    """`kijito-pull watch --persona P --ack-stdin` with a thread acknowledging each `new` event the way the
    pi extension does once `sendUserMessage` returned. Every stdout line is also copied to `out`."""

    proc: subprocess.Popen
    out: Path
    err: Path
    events: list[dict] = field(default_factory=list)
    acked: list[tuple[int, float]] = field(default_factory=list)  # (message id, wall time of the ack)
    torn: bool = False
    _reader: threading.Thread | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def start(cls, system: System, *extra: str, env: Mapping[str, str] | None = None,
              tag: str = "pi") -> PiChild:
        out, err = system.next_paths(tag)
        with open(err, "ab") as e:
            proc = subprocess.Popen(system.watch_argv("--ack-stdin", *extra), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=e, env={**system.env, **(env or {})},
                                    cwd=str(system.work))
        child = cls(proc, out, err)
        child._reader = threading.Thread(target=child._pump, daemon=True)
        child._reader.start()
        return child

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with open(self.out, "ab") as copy:
            buffer = b""
            while True:
                chunk = self.proc.stdout.read1(65536) if hasattr(self.proc.stdout, "read1") else \
                    self.proc.stdout.read(1)
                if not chunk:
                    break
                copy.write(chunk)
                copy.flush()
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        self._handle(json.loads(line))
            self.torn = bool(buffer)
        with self._cond:
            self._cond.notify_all()

    def _handle(self, event: dict) -> None:
        if event.get("event") == "new":
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"ack": event["event_id"]}).encode() + b"\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):
                pass  # the child is gone: the extension's answer would be lost the same way
            else:
                self.acked.append((event["id"], time.time()))
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self._reader is not None and not self._reader.is_alive()):
                    return None
                self._cond.wait(min(remaining, 0.2))

    def acked_ids(self) -> list[int]:
        return [i for i, _ in self.acked]

    def close(self, timeout: float = 15) -> int:
        """Close stdin (the extension's way to end the child) and wait for it to exit."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass


# -- files ---------------------------------------------------------------------------------------------


class FileEvents:
    """New events appended to a file by another process (watch's stdout or its --events-file), read as
    they come: complete lines only, so a line still being written is picked up next time."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.events: list[dict] = []

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        fresh = [json.loads(line) for line in data[:end].split(b"\n") if line.strip()]
        self.events.extend(fresh)
        return fresh

    def wait_for(self, predicate, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if predicate(event):
                    return event
            self.poll()
            if any(predicate(e) for e in self.events):
                continue
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def new_ids(self) -> list[int]:
        self.poll()
        return new_ids(self.events)


def stderr_problems(text: str) -> list[str]:
    """What is wrong with a command's stderr: a traceback, or a line that is not one of ours."""
    problems = []
    if "Traceback" in text:
        problems.append(f"traceback on stderr: {text[-800:]!r}")
    for line in text.splitlines():
        if line.strip() and not line.startswith("kijito-pull"):
            problems.append(f"stray stderr line: {line[:300]!r}")
    return problems


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def argv_of_tree(pid: int) -> list[bytes]:
    argvs = []
    for p in descendants(pid):
        try:
            argvs.append(Path(f"/proc/{p}/cmdline").read_bytes())
        except OSError:
            pass
    return argvs
