"""Helpers for driving the pi extension (extensions/kijito-pull.ts) end to end: a Kijito sandbox the
harness can reach, an opted-in project, a logging wrapper around the CLI, and ways to look at what
pi and its watch child did. Used by tests/e2e/test_pi_e2e.py and bench/bench_pi_wake.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kijito_pull.sandbox import Sandbox
from tests import entrypoints
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel, ToolUse, text_of

EXTENSION = h.REPO_ROOT / "extensions" / "kijito-pull.ts"
TOKEN = "pi-e2e-token"
PERSONA = "river"
STATUS_KEY = "kijito-pull"


# ---------------------------------------------------------------------------------------------
# The Kijito side
# ---------------------------------------------------------------------------------------------
def start_sandbox(ns: h.NetNS, **kwargs: Any) -> Sandbox:
    """A started sandbox whose listening socket lives where the harness runs (the test namespace,
    when there is one); the test process still drives it directly (``sb.send``, ``sb.requests``)."""
    sb = Sandbox(token=TOKEN, **kwargs)
    ns.call(sb.start)
    return sb


def real_cli() -> list[str]:
    """The kijito-pull CLI of the interpreter running the tests (the repo's venv)."""
    exe = Path(sys.executable).parent / "kijito-pull"
    if exe.is_file() and os.access(exe, os.X_OK):
        return [str(exe)]
    return [sys.executable, "-m", "kijito_pull"]


def cli_wrapper(directory: Path) -> tuple[Path, Path]:
    """A ``kijito-pull`` wrapper that appends each invocation (pid and argv, never the environment)
    to a log and then execs the real CLI. Returns (wrapper, log)."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "invocations.log"
    log.touch()
    wrapper = directory / "kijito-pull"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'printf "%s %s\\n" "$$" "$*" >> {shlex.quote(str(log))}\n'
        f"exec {shlex.join(real_cli())} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return wrapper, log


_RECORDER = """\
import json, os, subprocess, sys, time
REAL, LOG, INVOCATIONS = {real!r}, {log!r}, {invocations!r}
args = sys.argv[1:]
with open(INVOCATIONS, "a") as f:
    f.write(f"{{os.getpid()}} {{' '.join(args)}}\\n")
if not ("watch" in args and "--ack-stdin" in args):
    os.execv(REAL[0], REAL + args)
# The watch child: pass stdin through line by line, recording each line with the time it arrived.
child = subprocess.Popen(REAL + args, stdin=subprocess.PIPE)
with open(LOG, "a") as log:
    for raw in iter(sys.stdin.buffer.readline, b""):
        line = raw.decode("utf-8", "replace").strip()
        log.write(json.dumps({{"t": time.time(), "pid": child.pid, "line": line}}) + "\\n")
        log.flush()
        try:
            child.stdin.write(raw)
            child.stdin.flush()
        except OSError:
            break
try:
    child.stdin.close()
except OSError:
    pass
sys.exit(child.wait())
"""


def stdin_recorder(directory: Path) -> tuple[Path, Path, Path]:
    """A ``kijito-pull`` wrapper like ``cli_wrapper`` that also records every line the extension
    writes to its watch child's stdin (``{"t": unix time, "pid": ..., "line": ...}`` per line), so a
    test can tell when each ack or nack was given. Returns (wrapper, invocation log, stdin log).

    The watch child runs under the recorder (two processes match ``watch_children``)."""
    directory.mkdir(parents=True, exist_ok=True)
    log, stdin_log = directory / "invocations.log", directory / "stdin.ndjson"
    log.touch()
    stdin_log.touch()
    wrapper = directory / "kijito-pull"
    wrapper.write_text(f"#!{sys.executable}\n"
                       + _RECORDER.format(real=real_cli(), log=str(stdin_log), invocations=str(log)))
    wrapper.chmod(0o755)
    return wrapper, log, stdin_log


def stdin_lines(stdin_log: Path) -> list[dict]:
    """What the extension wrote to its watch children, in order: {"t", "pid", "line", "command"}."""
    out = []
    for text in stdin_log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(text)
            with contextlib.suppress(ValueError):
                entry["command"] = json.loads(entry["line"])
            out.append(entry)
    return out


def answers(stdin_log: Path, event_id: str) -> list[dict]:
    """The acks and nacks the extension gave for ``event_id``, in order."""
    return [e for e in stdin_lines(stdin_log) if isinstance(e.get("command"), dict)
            and event_id in (e["command"].get("ack"), e["command"].get("nack"))]


def invocations(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.strip()]


def opt_in(project: Path, persona: str = PERSONA, interrupt: str | None = None) -> Path:
    """Make ``project`` an opted-in repository (its own .git bounds the AGENTS.md search);
    ``interrupt`` adds an ``inbox interrupt:`` line (else the default, ``all``)."""
    project.mkdir(parents=True, exist_ok=True)
    (project / ".git").mkdir(exist_ok=True)
    policy = f"- inbox interrupt: {interrupt}\n" if interrupt else ""
    (project / "AGENTS.md").write_text(
        f"# Project\n\n- inbox monitor: raise on start\n- inbox persona: {persona}\n{policy}")
    return project


def not_opted_in(project: Path) -> Path:
    """A repository whose AGENTS.md talks about the inbox but has no opt-in line."""
    project.mkdir(parents=True, exist_ok=True)
    (project / ".git").mkdir(exist_ok=True)
    (project / "AGENTS.md").write_text(f"# Project\n\nWe use a Kijito inbox named {PERSONA}; no monitor here.\n")
    return project


# ---------------------------------------------------------------------------------------------
# A pi session with the extension
# ---------------------------------------------------------------------------------------------
@dataclass
class PiSession:
    proc: h.HarnessProcess
    model: FakeModel
    log: Path
    stdin_log: Path | None = None

    # -- RPC events ----------------------------------------------------------------------------
    def ui_requests(self, method: str) -> list[dict]:
        return [e for e in list(self.proc.events)
                if e.get("type") == "extension_ui_request" and e.get("method") == method]

    def wait_status(self, needle: str, timeout: float = 20.0) -> dict | None:
        """The first setStatus of the extension whose text contains ``needle``."""
        return self.proc.wait_for_event(
            lambda e: e.get("type") == "extension_ui_request" and e.get("method") == "setStatus"
            and e.get("statusKey") == STATUS_KEY and needle in str(e.get("statusText") or ""),
            timeout=timeout)

    def status_count(self, needle: str) -> int:
        return sum(1 for e in self.ui_requests("setStatus")
                   if e.get("statusKey") == STATUS_KEY and needle in str(e.get("statusText") or ""))

    def output(self) -> str:
        return self.proc.stdout_text() + "\n" + self.proc.stderr_text()

    # -- the watch child -----------------------------------------------------------------------
    def watch_pids(self) -> list[int]:
        return watch_children(self.proc.proc.pid)

    def wait_watch_pid(self, exclude: tuple[int, ...] = (), timeout: float = 15.0) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [p for p in self.watch_pids() if p not in exclude]
            if pids:
                return pids[0]
            time.sleep(0.05)
        return None

    # -- what reached the model ----------------------------------------------------------------
    def requests_with(self, needle: str) -> list[dict]:
        return [r for r in self.model.model_requests if needle in text_of(r)]

    def diagnostics(self) -> str:
        stdin = "" if self.stdin_log is None else "\n--- watch stdin\n" + self.stdin_log.read_text()[-3000:]
        return (self.proc.diagnostics() + "\n--- CLI invocations\n" + self.log.read_text() + stdin
                + f"\n--- model requests: {len(self.model.model_requests)}")


def kijito_env(sb: Sandbox, state_dir: Path, wrapper: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {"KIJITO_BASE": sb.url, "KIJITOMON_TOKEN": TOKEN, "KIJITO_PULL_STATE_DIR": str(state_dir),
           "KIJITO_PULL_BIN": str(wrapper)}
    env.update(extra or {})
    return env


def start_pi_session(harness: h.Harness, *, sb: Sandbox, model: FakeModel, root: Path, project: Path,
                     state_dir: Path, name: str = "pi", mode: str = "rpc",
                     extra_args: tuple[str, ...] = (), extensions: tuple[Path, ...] = (EXTENSION,),
                     env: dict[str, str] | None = None, settings: dict[str, Any] | None = None,
                     record_stdin: bool = False) -> PiSession:
    """pi (``mode`` rpc by default) in ``project`` with the extension, a private HOME under ``root``,
    reaching ``model`` and ``sb``; the CLI runs through a logging wrapper (``record_stdin``: one that
    also records what the extension writes to its watch child, see ``stdin_recorder``). ``settings``
    are merged into the agent dir's settings.json."""
    home = root / f"{name}-home"
    home.mkdir(parents=True, exist_ok=True)
    agent = h.write_pi_agent_dir(home / ".pi" / "agent", model.url)
    if settings:
        path = agent / "settings.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **settings}))
    stdin_log = None
    if record_stdin:
        wrapper, log, stdin_log = stdin_recorder(root / f"{name}-bin")
    else:
        wrapper, log = cli_wrapper(root / f"{name}-bin")
    argv = h.netns().wrap(h.pi_argv(harness, mode=mode, extensions=extensions, extra_args=extra_args))
    # print and json modes read piped stdin to EOF before they start: give them none.
    proc = h.HarnessProcess(argv, env=h.pi_env(home, agent, kijito_env(sb, state_dir, wrapper, env)), cwd=project,
                            stdin_pipe=mode == "rpc", name=f"{harness.name}:{name}")
    return PiSession(proc, model, log, stdin_log)


def start_installed_session(harness: h.Harness, *, sb: Sandbox, model: FakeModel, root: Path, project: Path,
                            state_dir: Path, name: str = "installed") -> PiSession:
    """pi in RPC mode with no ``-e``: the repo was added with ``pi install <repo>`` (its package.json
    "pi" block) into a fresh agent dir seeded for the fake model."""
    home = root / f"{name}-home"
    home.mkdir(parents=True, exist_ok=True)
    agent = h.write_pi_agent_dir(home / ".pi" / "agent", model.url)
    wrapper, log = cli_wrapper(root / f"{name}-bin")
    env = h.pi_env(home, agent, kijito_env(sb, state_dir, wrapper))
    installed = h.HarnessProcess(harness.cmd("install", str(h.REPO_ROOT)), env=env, cwd=project,
                                 stdin_pipe=False, name=f"{harness.name}:install")
    rc = installed.wait(timeout=60)
    assert rc == 0, installed.diagnostics()
    installed.kill()
    argv = h.netns().wrap(h.pi_argv(harness, mode="rpc"))
    proc = h.HarnessProcess(argv, env=env, cwd=project, name=f"{harness.name}:{name}")
    return PiSession(proc, model, log)


def start_pi_tui(harness: h.Harness, *, sb: Sandbox, model: FakeModel, root: Path, project: Path,
                 state_dir: Path, name: str = "tui") -> tuple[h.Tmux, Path]:
    """Interactive pi (the TUI) under a private tmux server with the extension. Returns (tmux, CLI log);
    the pane's process is pi itself (``env`` and ``nsenter`` exec it)."""
    home = root / f"{name}-home"
    home.mkdir(parents=True, exist_ok=True)
    agent = h.write_pi_agent_dir(home / ".pi" / "agent", model.url)
    wrapper, log = cli_wrapper(root / f"{name}-bin")
    env = h.pi_env(home, agent, kijito_env(sb, state_dir, wrapper))
    env.setdefault("TERM", "xterm-256color")
    argv = h.netns().wrap(harness.cmd("--no-session", "-e", str(EXTENSION)))
    return h.Tmux(argv, env=env, cwd=project), log


# ---------------------------------------------------------------------------------------------
# Other pullers of the same cursor: `kijito-pull --once`, the Claude Code hooks, `status`
# ---------------------------------------------------------------------------------------------
Ran = entrypoints.Ran  # one record of a finished run for every entry-point test


@dataclass
class Puller:
    """Runs the CLI the way a script or Claude Code would, beside a pi session: same Kijito base, token
    and state dir (so the same cursor, consumer ``agent``), in the test namespace, its own HOME."""

    sb: Sandbox
    state_dir: Path
    project: Path
    home: Path

    def env(self) -> dict[str, str]:
        self.home.mkdir(parents=True, exist_ok=True)
        return h.base_env(self.home, {
            "KIJITO_BASE": self.sb.url, "KIJITOMON_TOKEN": TOKEN, "KIJITO_PULL_STATE_DIR": str(self.state_dir),
            "KIJITO_PULL_CONFIG": os.devnull,
            # headless Claude Code, and no waker process left behind by a hook
            "CLAUDE_CODE_ENTRYPOINT": "sdk-cli", "KIJITO_PULL_CLAUDE_WAKER": "off"})

    def run(self, args: list[str], *, stdin: str | None = None, timeout: float = 30.0) -> Ran:
        argv = h.netns().wrap(real_cli() + args)
        started = time.monotonic()
        try:
            done = subprocess.run(argv, input=(stdin or "").encode(), capture_output=True, env=self.env(),
                                  cwd=self.project, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"kijito-pull {' '.join(args)} did not exit within {timeout} s") from exc
        return Ran(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"),
                   time.monotonic() - started)

    def once(self, *extra: str) -> Ran:
        """``kijito-pull --once --json --persona P`` (default consumer), as a script runs it."""
        return self.run(["--once", "--json", "--persona", PERSONA, *extra])

    def transcript(self, session_id: str) -> Path:
        """The (emulated) Claude Code session's transcript, named in its hooks' input."""
        path = self.home / "transcripts" / f"{session_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return path

    def claude_stop(self, session_id: str = "claude-sess-1", *, active: bool = False) -> Ran:
        """The Claude Code Stop hook as Claude Code runs it: in the project, its hook input on stdin
        (``active``: the agent goes on because a Stop hook blocked, ``stop_hook_active``)."""
        payload = {"session_id": session_id, "transcript_path": str(self.transcript(session_id)),
                   "cwd": str(self.project), "permission_mode": "default", "hook_event_name": "Stop",
                   "stop_hook_active": active}
        return self.run(["hook", "claude-stop"], stdin=json.dumps(payload))

    def claude_takes_block(self, session_id: str, reason: str) -> None:
        """What Claude Code does with a Stop block: the reason goes to the model and into the session's
        transcript (a user-role record, as 2.1.197 words it), where a later hook of the session can
        find it."""
        record = {"type": "user", "sessionId": session_id, "isMeta": True,
                  "message": {"role": "user", "content": f"Stop hook feedback:\n{reason}"}}
        with self.transcript(session_id).open("a") as handle:
            handle.write(json.dumps(record) + "\n")

    def status(self) -> list[dict]:
        """``kijito-pull status --json``: this persona's cursor rows."""
        ran = self.run(["status", "--json", "--persona", PERSONA])
        assert ran.code == 0, str(ran)
        return [row for row in ran.ndjson() if isinstance(row, dict)]


def hook_reason(ran: Ran) -> str | None:
    """The text a Claude Stop hook handed over (its block reason), None when it let the stop happen."""
    if not ran.stdout.strip():
        return None
    data = json.loads(ran.stdout)
    assert isinstance(data, dict), ran.stdout
    if data.get("decision") == "block":
        return str(data.get("reason") or "")
    return None


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------
def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(ppid, pgid) of a live process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[2])


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def descendants(root: int) -> list[int]:
    """Live processes below ``root`` (children, grandchildren, ...)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat:
                parents[int(entry)] = stat[0]
    out, frontier = [], {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        out.extend(sorted(frontier))
    return out


def watch_children(root: int) -> list[int]:
    """The ``kijito-pull watch --ack-stdin`` processes below ``root``."""
    return [pid for pid in descendants(root)
            if "watch" in (cmd := _cmdline(pid)) and "--ack-stdin" in cmd]


def alive(pid: int) -> bool:
    return _proc_stat(pid) is not None


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# Conversations
# ---------------------------------------------------------------------------------------------
def user_texts(request: dict) -> list[str]:
    """The text of each user-role message in a model request (Anthropic or OpenAI shape)."""
    body = request.get("body") if isinstance(request.get("body"), dict) else {}
    out = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.append("\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict)))
    return out


def handed_over(sessions: list[PiSession], marker: str) -> int:
    """How many times ``marker`` was handed to a model as a user message, over all sessions (each
    session's latest request carries its whole conversation)."""
    total = 0
    for session in sessions:
        requests = session.model.model_requests
        if requests:
            total += sum(1 for text in user_texts(requests[-1]) if marker in text)
    return total


@contextlib.contextmanager
def slow_model(model: FakeModel, seconds: float) -> Iterator[None]:
    """Make every model answer take ``seconds`` (a run in progress for that long)."""
    saved = model.reply

    def reply(request: dict) -> str:
        time.sleep(seconds)
        return saved(request) if callable(saved) else saved

    model.reply = reply
    try:
        yield
    finally:
        model.reply = saved


@contextlib.contextmanager
def timed_slow_model(model: FakeModel, seconds: float) -> Iterator[list[float]]:
    """Like ``slow_model``; yields a list that gets the time each answer was released (after its
    wait), so a test knows the earliest moment pi could have taken up a queued follow-up."""
    saved = model.reply
    released: list[float] = []

    def reply(request: dict) -> str:
        time.sleep(seconds)
        released.append(time.time())
        return saved(request) if callable(saved) else saved

    model.reply = reply
    try:
        yield released
    finally:
        model.reply = saved


@contextlib.contextmanager
def gated_model(model: FakeModel, limit: float = 60.0) -> Iterator[threading.Event]:
    """Hold every model answer until the yielded event is set (at most ``limit`` seconds): a run in
    progress for exactly as long as the test needs. Set on exit."""
    saved = model.reply
    gate = threading.Event()

    def reply(request: dict) -> str:
        gate.wait(limit)
        return saved(request) if callable(saved) else saved

    model.reply = reply
    try:
        yield gate
    finally:
        gate.set()
        model.reply = saved


def tool_results_in(request: dict) -> int:
    """How many tool results the conversation of a model request holds (Anthropic shape): how far
    the run of tool calls had got when pi asked."""
    body = request.get("body") if isinstance(request.get("body"), dict) else {}
    return sum(1 for message in body.get("messages") or [] if isinstance(message, dict)
               and isinstance(message.get("content"), list)
               for block in message["content"] if isinstance(block, dict) and block.get("type") == "tool_result")


RUN_DONE = "RUN-DONE: all tool calls finished"


def busy_with_tools(calls: int, seconds: float) -> Callable[[dict], Any]:
    """A fake-model reply that keeps pi busy: a bash ``sleep`` tool call per answer until the
    conversation holds ``calls`` tool results, then the text ``RUN_DONE`` for this and every later
    request (so a later turn ends at once). Each answer is a fresh call (its own tool_use id)."""

    def reply(request: dict) -> Any:
        if tool_results_in(request) < calls:
            return ToolUse("bash", {"command": f"sleep {seconds:g}"})
        return RUN_DONE

    return reply


def rpc_events(session: PiSession, kind: str) -> list[dict]:
    return [e for e in list(session.proc.events) if e.get("type") == kind]


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1)[:3000]
