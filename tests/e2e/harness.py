"""Locate the real agent harnesses installed by ``scripts/install-harnesses`` and run them offline
against a fake model server (see ``docs/dev/harness-findings.md`` and shared harness notes).

Harness names: ``claude`` (Claude Code, oldest supported), ``claude2`` (Claude Code, current release),
``codex`` (Codex CLI), ``pi073`` (@mariozechner/pi-coding-agent 0.73.x, system
node), ``pi1`` (@earendil-works/pi-coding-agent 1.x, the Node 22 installed next to it), ``copilot``
(GitHub Copilot CLI, its native binary), ``gemini`` (Gemini CLI's bundle, system node),
``opencode`` (OpenCode's native binary), ``kimi`` (Kimi Code CLI's bundle, the Node 22 installed next to it)
``qwen`` (Qwen Code's ``cli-entry.js``, the same Node 22) and ``kilo`` (Kilo Code CLI's native build).

Isolation: when ``unshare -n`` + ``nsenter`` work (probed once per process), every harness runs in
a private network namespace that has only loopback, so nothing can leak out. A server the harness
must reach (the fake model, a Kijito sandbox) has to listen *inside* that namespace: build it with
``FakeModel(bind=netns().listen)`` (the ``fake_model`` fixture does) or bind its socket with
``netns().listen(port)`` / ``netns().call(fn)``. Without a working namespace everything falls
back to the host's loopback and ``netns()`` is a no-op. ``KIJITO_PULL_E2E_NETNS=0`` disables it.

Every process is started in its own process group and registered, so ``kill_all()`` (called by
an autouse fixture in conftest) ends it and its children even when a test fails.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.required import REQUIRE_ENV, missing  # noqa: F401 (REQUIRE_ENV: h.REQUIRE_ENV in the tests)

REPO_ROOT = Path(__file__).resolve().parents[2]
HARNESS_NAMES = ("claude", "claude2", "codex", "pi073", "pi1", "copilot", "gemini", "opencode", "kimi", "qwen",
                 "kilo")

# Environment prefixes stripped from the parent environment so a test run inside an agent
# session (or with a developer's keys set) cannot leak settings into the harness under test.
_STRIPPED_PREFIXES = ("ANTHROPIC_", "CLAUDE", "OPENAI_", "PI_", "CODEX_", "KIJITO", "OTEL_", "COPILOT_", "GEMINI_",
                      "GOOGLE_", "OPENCODE_", "GITHUB_COPILOT_",
                      "KIMI_", "MOONSHOT_", "QWEN_", "KILO_")

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# Locating the harnesses
# ---------------------------------------------------------------------------------------------
def harness_dir() -> Path:
    return Path(os.environ.get("KIJITO_PULL_HARNESS_DIR") or REPO_ROOT / ".harness")


def _node_arch() -> str:
    return {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        os.uname().machine, os.uname().machine
    )


@dataclass(frozen=True)
class Harness:
    """An installed harness: ``argv`` is the command prefix that runs it."""

    name: str
    argv: tuple[str, ...]
    version: str | None

    @property
    def kind(self) -> str:
        if self.name.startswith("claude"):
            return "claude"
        return "pi" if self.name.startswith("pi") else self.name

    def cmd(self, *args: str) -> list[str]:
        return [*self.argv, *args]


def node22() -> Path | None:
    p = harness_dir() / "node22" / "node_modules" / f"node-linux-{_node_arch()}" / "bin" / "node"
    return p if p.is_file() and os.access(p, os.X_OK) else None


def _stamp_version(name: str) -> str | None:
    stamp = harness_dir() / name / ".installed"
    try:
        return stamp.read_text().strip().rsplit("@", 1)[-1]
    except OSError:
        return None


def find_harness(name: str) -> Harness | None:
    """The installed harness ``name`` (one of ``HARNESS_NAMES``), or None if it is absent."""
    base = harness_dir() / name / "node_modules"
    if name in ("claude", "claude2", "codex"):
        exe = base / ".bin" / ("codex" if name == "codex" else "claude")
        if exe.exists() and os.access(exe, os.X_OK):
            return Harness(name, (str(exe),), _stamp_version(name))
    elif name == "pi073":
        cli = base / "@mariozechner" / "pi-coding-agent" / "dist" / "cli.js"
        node = shutil.which("node")
        if cli.is_file() and node:
            return Harness(name, (node, str(cli)), _stamp_version(name))
    elif name in ("copilot", "opencode"):
        exe = base / ".bin" / "copilot" if name == "copilot" else base / "opencode-ai" / "bin" / "opencode.exe"
        if exe.exists() and os.access(exe, os.X_OK):
            return Harness(name, (str(exe),), _stamp_version(name))
    elif name == "kilo":
        exe = base / "@kilocode" / "cli" / "bin" / "kilo"
        if exe.exists() and os.access(exe, os.X_OK):
            return Harness(name, (str(exe),), _stamp_version(name))
    elif name == "gemini":
        bundle = base / "@google" / "gemini-cli" / "bundle" / "gemini.js"
        node = shutil.which("node")
        if bundle.is_file() and node:
            return Harness(name, (node, str(bundle)), _stamp_version(name))
    elif name == "qwen":
        cli = base / "@qwen-code" / "qwen-code" / "cli-entry.js"
        node = node22()
        if cli.is_file() and node:
            return Harness(name, (str(node), str(cli)), _stamp_version(name))
    elif name == "pi1":
        cli = base / "@earendil-works" / "pi-coding-agent" / "dist" / "bundle" / "cli.js"
        node = node22()
        if cli.is_file() and node:
            return Harness(name, (str(node), str(cli)), _stamp_version(name))
    elif name == "kimi":
        bundle = base / "@moonshot-ai" / "kimi-code" / "dist" / "main.mjs"
        node = node22()
        if bundle.is_file() and node:
            return Harness(name, (str(node), str(bundle)), _stamp_version(name))
    else:
        raise ValueError(f"unknown harness {name!r}; expected one of {HARNESS_NAMES}")
    return None


def require_harness(name: str) -> Harness:
    """The harness, or skip the test when it is not installed -- unless ``KIJITO_PULL_REQUIRE_E2E=1``
    (CI), where a missing harness is a failure."""
    harness = find_harness(name)
    if harness is not None:
        return harness
    missing(f"harness {name!r} is not installed under {harness_dir()} (run scripts/install-harnesses)")


# ---------------------------------------------------------------------------------------------
# Network namespace (loopback only)
# ---------------------------------------------------------------------------------------------
_CLONE_NEWNET = 0x40000000
_LO_UP_SCRIPT = r"""
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))
print("ready", flush=True)
sys.stdin.read()
"""


class NetNS:
    """A private network namespace holding only an ``up`` loopback, kept alive by a small holder
    process (which exits when our end of its stdin closes, i.e. when this process dies)."""

    def __init__(self) -> None:
        self._holder: subprocess.Popen | None = None
        self.path: str | None = None

    @property
    def active(self) -> bool:
        return self.path is not None

    def start(self) -> NetNS:
        unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
        if not unshare or not nsenter:
            raise OSError("unshare/nsenter not found")
        holder = subprocess.Popen(
            [unshare, "-n", "--", sys.executable, "-c", _LO_UP_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        line = holder.stdout.readline() if holder.stdout else b""
        if line.strip() != b"ready":
            err = holder.stderr.read().decode(errors="replace") if holder.stderr else ""
            holder.kill()
            holder.wait()
            raise OSError(f"unshare -n failed: {err.strip() or line!r}")
        self._holder = holder
        self.path = f"/proc/{holder.pid}/ns/net"
        return self

    def stop(self) -> None:
        holder, self._holder, self.path = self._holder, None, None
        if holder is not None:
            with contextlib.suppress(OSError):
                holder.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(OSError):
                holder.kill()
            holder.wait(timeout=5)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (unchanged when inactive)."""
        if not self.active:
            return list(argv)
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on a short-lived thread that has entered the namespace. Sockets it creates
        live in the namespace for good (other threads can then use them). No-op when inactive."""
        if not self.active:
            return fn()
        libc = ctypes.CDLL(None, use_errno=True)
        result: dict[str, Any] = {}

        def run() -> None:
            own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
            target = os.open(self.path, os.O_RDONLY)  # type: ignore[arg-type]
            try:
                if libc.setns(target, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns into the test namespace failed")
                try:
                    result["value"] = fn()
                finally:
                    libc.setns(own, _CLONE_NEWNET)  # the thread ends right after anyway
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                result["error"] = exc
            finally:
                os.close(own)
                os.close(target)

        thread = threading.Thread(target=run, name="netns-call")
        thread.start()
        thread.join()
        if "error" in result:
            raise result["error"]
        return result["value"]

    def listen(self, port: int = 0, host: str = "127.0.0.1", backlog: int = 64) -> socket.socket:
        """A TCP socket bound and listening on ``host:port`` inside the namespace."""

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(backlog)
            return sock

        return self.call(make)


_NETNS: NetNS | None = None
_NETNS_LOCK = threading.Lock()


def _probe(ns: NetNS) -> None:
    """Prove the namespace works end to end: a socket bound inside via setns is reachable from a
    process started through ``nsenter``."""
    sock = ns.listen()
    try:
        port = sock.getsockname()[1]
        code = (
            "import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3);"
            "s.sendall(b'x'); s.close()"
        )
        proc = subprocess.run(ns.wrap([sys.executable, "-c", code, str(port)]), capture_output=True, timeout=15)
        if proc.returncode != 0:
            raise OSError(f"probe client failed: {proc.stderr.decode(errors='replace')[-300:]}")
        sock.settimeout(5)
        conn, _ = sock.accept()
        conn.close()
    finally:
        sock.close()


def netns() -> NetNS:
    """The process-wide namespace; inactive (no-op) when unavailable, broken or disabled."""
    global _NETNS
    with _NETNS_LOCK:
        if _NETNS is None:
            ns = NetNS()
            if os.environ.get("KIJITO_PULL_E2E_NETNS", "1") != "0":
                try:
                    ns.start()
                    _probe(ns)
                except (OSError, subprocess.SubprocessError, ValueError):
                    ns.stop()
                    ns = NetNS()
            _NETNS = ns
        return _NETNS


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------
_LIVE: set[HarnessProcess] = set()
_LIVE_LOCK = threading.Lock()

# Every process we start carries TAG_ENV=<unique tag> in its environment, and so do its
# descendants (harnesses pass their environment on to hooks, monitors and extensions' children).
# That finds the ones that escape the process group (Claude runs hooks in their own groups, and
# an async hook outlives an interactive session that exits: see docs/dev/harness-findings.md).
TAG_ENV = "KIJITO_PULL_E2E_TAG"
_TAG_COUNTER = iter(range(1, 1 << 62))


def new_tag() -> str:
    return f"{os.getpid()}-{next(_TAG_COUNTER)}-{os.urandom(4).hex()}"


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment carries ``TAG_ENV=tag`` (zombies and unreadable ones are
    skipped)."""
    needle = f"{TAG_ENV}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def sweep_tagged(tag: str, rounds: int = 3) -> None:
    """SIGKILL every process carrying ``tag`` (a few rounds, for ones forked meanwhile)."""
    for _ in range(rounds):
        pids = tagged_pids(tag)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _kill_group(proc: subprocess.Popen, grace: float = 2.0) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # The leader may be gone while children in its group live on: always sweep the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class HarnessProcess:
    """A harness child in its own process group. stdout is read line by line on a thread
    (``lines``; JSON lines also parsed into ``events``); stderr is kept in ``stderr_text()``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        cwd: os.PathLike | str,
        stdin_pipe: bool = True,
        name: str = "harness",
    ):
        self.argv = list(argv)
        self.name = name
        self._stderr_file = tempfile.TemporaryFile()
        self.lines: list[str] = []
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self.tag = new_tag()
        self.proc = subprocess.Popen(
            self.argv,
            env={**env, TAG_ENV: self.tag},
            cwd=str(cwd),
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file,
            start_new_session=True,
        )
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            event = None
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
            with self._cond:
                self.lines.append(line)
                if isinstance(event, dict):
                    self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    # -- interaction ---------------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        """Write one JSON line (or a raw string line) to stdin."""
        assert self.proc.stdin is not None
        line = obj if isinstance(obj, str) else json.dumps(obj)
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def wait_for_event(self, predicate: Callable[[dict], bool], timeout: float = 10.0) -> dict | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return None
                self._cond.wait(min(remaining, 0.5))

    def stderr_text(self) -> str:
        self._stderr_file.seek(0)
        return self._stderr_file.read().decode("utf-8", "replace")

    def stdout_text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def diagnostics(self, limit: int = 4000) -> str:
        """Tail of stdout and stderr, for assertion messages."""
        return (
            f"--- {self.name} rc={self.proc.poll()} argv={self.argv}\n"
            f"--- stdout (tail)\n{self.stdout_text()[-limit:]}\n"
            f"--- stderr (tail)\n{self.stderr_text()[-limit:]}"
        )

    # -- lifecycle -----------------------------------------------------------------------------
    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return rc

    def kill(self) -> None:
        """End the process, its group and every descendant that carries its tag."""
        self.close_stdin()
        _kill_group(self.proc)
        sweep_tagged(self.tag)
        self._reader.join(timeout=5)
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def __enter__(self) -> HarnessProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill()


def run_headless(cmd: Sequence[str], *, env: dict[str, str], cwd: os.PathLike | str, name: str, timeout: float,
                 settle: Callable[[HarnessProcess], object] | None = None) -> subprocess.CompletedProcess:
    """A harness's headless run (`qwen -p …`, `gemini -p …`) in the namespace, to its end: its output, or an
    AssertionError with its diagnostics when it does not end within `timeout` s. The whole group is killed
    after; `settle(proc)`, when given, runs first (to let a hook the harness leaves running by design end)."""
    argv = netns().wrap(list(cmd))
    proc = HarnessProcess(argv, env=env, cwd=cwd, stdin_pipe=False, name=name)
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        diag = proc.diagnostics()
        proc.kill()
        raise AssertionError(f"{name} did not end within {timeout:g} s\n{diag}") from None
    if settle is not None:
        settle(proc)
    out, err = proc.stdout_text(), proc.stderr_text()
    proc.kill()
    return subprocess.CompletedProcess(argv, rc, out, err)


def kill_all() -> None:
    """Kill every harness process (and its process group) still registered."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        proc.kill()


# ---------------------------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------------------------
def base_env(home: os.PathLike | str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent environment minus agent/API settings, with ``HOME`` replaced."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
    env["HOME"] = str(home)
    env.setdefault("LANG", "C.UTF-8")
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("XDG_STATE_HOME", None)
    env.pop("XDG_CACHE_HOME", None)
    env.pop("XDG_DATA_HOME", None)
    if extra:
        env.update(extra)
    return env


def claude_env(
    home: os.PathLike | str, base_url: str, extra: dict[str, str] | None = None, *, feature_flags: bool = False
) -> dict[str, str]:
    """Offline Claude Code environment. ``feature_flags=True`` drops ``DISABLE_TELEMETRY`` and
    ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` so that Claude reads the feature flags cached in
    ``$HOME/.claude.json`` (``seed_claude_json(features=...)``); Claude then tries to reach its
    vendor, so this is only allowed inside the loopback-only namespace."""
    env = base_env(home)
    env.update(
        {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
    )
    if feature_flags:
        if not netns().active:
            raise RuntimeError("feature_flags=True needs the loopback-only network namespace")
        del env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], env["DISABLE_TELEMETRY"]
    if extra:
        env.update(extra)
    return env


# Feature flag that gates both the Monitor tool and plugin monitors in Claude Code 2.1.197
# (off by default offline; see docs/dev/harness-findings.md).
MONITOR_FLAG = "tengu_amber_sentinel"


def seed_claude_json(
    home: os.PathLike | str,
    cwd: os.PathLike | str | None = None,
    api_key: str = "dummy",
    features: dict[str, Any] | None = None,
) -> Path:
    """Write ``$HOME/.claude.json``: onboarding done, ``api_key`` approved, the trust dialog
    accepted for ``cwd`` (the interactive TUI exits trying to reach its vendor without these), and
    optionally cached feature flags (honoured only with ``claude_env(feature_flags=True)``)."""
    path = Path(home) / ".claude.json"
    data: dict[str, Any] = {}
    if path.exists():
        data = json.loads(path.read_text() or "{}")
    data["hasCompletedOnboarding"] = True
    approved = data.setdefault("customApiKeyResponses", {}).setdefault("approved", [])
    if api_key[-20:] not in approved:
        approved.append(api_key[-20:])
    if cwd is not None:
        project = data.setdefault("projects", {}).setdefault(str(Path(cwd).resolve()), {})
        project.update({"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True})
    if features:
        data.setdefault("cachedGrowthBookFeatures", {}).update(features)
    Path(home).mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def claude_argv(harness: Harness, *args: str, plugin_dirs: Iterable[os.PathLike | str] = ()) -> list[str]:
    argv = harness.cmd(*args)
    for d in plugin_dirs:
        argv += ["--plugin-dir", str(d)]
    return argv


def _claude_prepare(
    home: os.PathLike | str,
    cwd: os.PathLike | str,
    base_url: str,
    env: dict[str, str] | None,
    features: dict[str, Any] | None,
) -> dict[str, str]:
    Path(home).mkdir(parents=True, exist_ok=True)
    if features:
        seed_claude_json(home, cwd, features=features)
    return claude_env(home, base_url, env, feature_flags=bool(features))


def run_claude_p(
    harness: Harness,
    prompt: str,
    *,
    base_url: str,
    home: os.PathLike | str,
    cwd: os.PathLike | str,
    plugin_dirs: Iterable[os.PathLike | str] = (),
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    features: dict[str, Any] | None = None,
    timeout: float = 45.0,
) -> subprocess.CompletedProcess:
    """``claude -p PROMPT`` offline; returns the completed process (text output). Kills the whole
    process group on timeout and re-raises ``subprocess.TimeoutExpired`` (its ``output`` holds
    diagnostics). ``features``: cached feature flags to turn on (see ``claude_env``)."""
    full_env = _claude_prepare(home, cwd, base_url, env, features)
    argv = netns().wrap(claude_argv(harness, "-p", prompt, *extra_args, plugin_dirs=plugin_dirs))
    proc = HarnessProcess(argv, env=full_env, cwd=cwd, stdin_pipe=False, name="claude-p")
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        diag = proc.diagnostics()
        proc.kill()
        raise subprocess.TimeoutExpired(argv, timeout, output=diag) from None
    out, err = proc.stdout_text(), proc.stderr_text()
    proc.kill()
    return subprocess.CompletedProcess(argv, rc, out, err)


def start_claude_stream_json(
    harness: Harness,
    *,
    base_url: str,
    home: os.PathLike | str,
    cwd: os.PathLike | str,
    plugin_dirs: Iterable[os.PathLike | str] = (),
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    features: dict[str, Any] | None = None,
) -> HarnessProcess:
    """``claude -p --input-format stream-json --output-format stream-json --verbose`` with stdin
    held open (the headless mode in which asyncRewake wakes land). Send turns with
    ``proc.send(claude_user_message(text))``; output events land in ``proc.events``."""
    full_env = _claude_prepare(home, cwd, base_url, env, features)
    argv = netns().wrap(
        claude_argv(
            harness,
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            *extra_args,
            plugin_dirs=plugin_dirs,
        )
    )
    return HarnessProcess(argv, env=full_env, cwd=cwd, name="claude-stream")


def claude_user_message(text: str) -> dict:
    return {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}}


# ---------------------------------------------------------------------------------------------
# tmux (interactive TUIs)
# ---------------------------------------------------------------------------------------------
class Tmux:
    """A private tmux server (own socket) running one command in a detached session."""

    def __init__(
        self, argv: Sequence[str], *, env: dict[str, str], cwd: os.PathLike | str, width: int = 200, height: int = 50
    ):
        tmux = shutil.which("tmux")
        if not tmux:
            raise FileNotFoundError("tmux not found")
        self.tmux = tmux
        self._dir = tempfile.mkdtemp(prefix="kp-tmux-")
        self.socket = os.path.join(self._dir, "sock")
        self.session = "e2e"
        # `env -i` + explicit env: the tmux server would otherwise hand its own env to the pane.
        self.tag = new_tag()
        env = {**env, TAG_ENV: self.tag}
        env_args = [f"{k}={v}" for k, v in env.items()]
        command = ["env", "-i", *env_args, *argv]
        subprocess.run(
            [
                tmux,
                "-S",
                self.socket,
                # A pane whose command exited stays on screen ("Pane is dead (status N)"), so a failed wait
                # shows why the program ended instead of an empty capture of a closed session.
                "start-server",
                ";",
                "set-option",
                "-g",
                "remain-on-exit",
                "on",
                ";",
                "new-session",
                "-d",
                "-s",
                self.session,
                "-x",
                str(width),
                "-y",
                str(height),
                "-c",
                str(cwd),
                shlex.join(command),
            ],
            check=True,
            env={**env, "TMUX": ""},
            timeout=15,
        )
        self.server_pid = int(self._tmux("display-message", "-p", "#{pid}").strip())
        self.pane_pid = int(self._tmux("display-message", "-p", "-t", self.session, "#{pane_pid}").strip())
        with _LIVE_LOCK:
            _TMUX.add(self)

    def _tmux(self, *args: str) -> str:
        return subprocess.run([self.tmux, "-S", self.socket, *args], capture_output=True, text=True, timeout=15).stdout

    def send_keys(self, *keys: str, literal: bool = False) -> None:
        self._tmux("send-keys", "-t", self.session, *(["-l"] if literal else []), *keys)

    def type(self, text: str, enter: bool = True) -> None:
        self.send_keys(text, literal=True)
        if enter:
            time.sleep(0.2)
            self.send_keys("Enter")

    def capture(self) -> str:
        done = subprocess.run([self.tmux, "-S", self.socket, "capture-pane", "-p", "-t", self.session],
                              capture_output=True, text=True, timeout=15)
        if done.returncode != 0:  # say why there is no screen (the server gone, the session closed)
            return f"[tmux capture-pane failed, rc {done.returncode}: {done.stderr.strip()}]"
        return done.stdout

    def wait_for_screen(self, needle: str, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.capture():
                return True
            time.sleep(0.25)
        return False

    def kill(self) -> None:
        """End the pane's command, the tmux server and every descendant that carries the tag."""
        with contextlib.suppress(Exception):
            os.killpg(os.getpgid(self.pane_pid), signal.SIGKILL)
        with contextlib.suppress(Exception):
            self._tmux("kill-server")
        sweep_tagged(self.tag)  # the server and the pane were started with the tag too
        shutil.rmtree(self._dir, ignore_errors=True)
        with _LIVE_LOCK:
            _TMUX.discard(self)

    def __enter__(self) -> Tmux:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill()


_TMUX: set[Tmux] = set()


def start_claude_tui(
    harness: Harness,
    *,
    base_url: str,
    home: os.PathLike | str,
    cwd: os.PathLike | str,
    plugin_dirs: Iterable[os.PathLike | str] = (),
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    features: dict[str, Any] | None = None,
) -> Tmux:
    """Interactive Claude Code under tmux (``$HOME/.claude.json`` seeded first). The prompt is
    ready when ``tmux.wait_for_screen("for shortcuts")``; type with ``tmux.type("text")``.
    ``features={MONITOR_FLAG: True}`` turns plugin monitors and the Monitor tool on."""
    seed_claude_json(home, cwd)
    full_env = _claude_prepare(home, cwd, base_url, env, features)
    full_env.setdefault("TERM", "xterm-256color")
    argv = netns().wrap(claude_argv(harness, *extra_args, plugin_dirs=plugin_dirs))
    return Tmux(argv, env=full_env, cwd=cwd)


def kill_all_tmux() -> None:
    with _LIVE_LOCK:
        live = list(_TMUX)
    for t in live:
        t.kill()


# ---------------------------------------------------------------------------------------------
# pi
# ---------------------------------------------------------------------------------------------
def write_pi_agent_dir(
    agent_dir: os.PathLike | str, base_url: str, *, api: str = "anthropic-messages", model: str = "fake-model"
) -> Path:
    """``models.json`` (a ``fake`` provider at ``base_url``) and ``settings.json`` (default to it)."""
    agent = Path(agent_dir)
    agent.mkdir(parents=True, exist_ok=True)
    models = {
        "providers": {
            "fake": {
                "baseUrl": base_url,
                "api": api,
                "apiKey": "dummy",
                "models": [
                    {"id": model, "reasoning": False, "input": ["text"], "contextWindow": 200000, "maxTokens": 4096}
                ],
            }
        }
    }
    (agent / "models.json").write_text(json.dumps(models, indent=2))
    (agent / "settings.json").write_text(json.dumps({"defaultProvider": "fake", "defaultModel": model}))
    return agent


def pi_env(
    home: os.PathLike | str, agent_dir: os.PathLike | str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = base_env(home)
    env.update(
        {"PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    )
    if extra:
        env.update(extra)
    return env


def pi_argv(
    harness: Harness,
    *,
    mode: str = "rpc",
    extensions: Iterable[os.PathLike | str] = (),
    no_session: bool = True,
    extra_args: Sequence[str] = (),
) -> list[str]:
    argv = harness.cmd("--mode", mode) if mode != "print" else harness.cmd("-p")
    if no_session:
        argv.append("--no-session")
    for ext in extensions:
        argv += ["-e", str(ext)]
    return argv + list(extra_args)


def start_pi(
    harness: Harness,
    *,
    base_url: str,
    home: os.PathLike | str,
    cwd: os.PathLike | str,
    extensions: Iterable[os.PathLike | str] = (),
    mode: str = "rpc",
    agent_dir: os.PathLike | str | None = None,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    stdin_pipe: bool | None = None,
) -> HarnessProcess:
    """pi (``harness`` = pi073 or pi1) in ``--mode rpc`` (default), ``json`` or ``print`` with
    ``-e`` extensions, its agent dir seeded for the fake model. RPC commands go to stdin as JSON
    lines, e.g. ``proc.send({"type": "prompt", "message": "hi"})``; events arrive in
    ``proc.events``. For print/json pass the prompt in ``extra_args``; their stdin is /dev/null by
    default because pi reads piped stdin to EOF before it starts in those modes."""
    Path(home).mkdir(parents=True, exist_ok=True)
    agent = Path(agent_dir) if agent_dir else Path(home) / ".pi" / "agent"
    write_pi_agent_dir(agent, base_url)
    argv = netns().wrap(pi_argv(harness, mode=mode, extensions=extensions, extra_args=extra_args))
    if stdin_pipe is None:
        stdin_pipe = mode == "rpc"
    return HarnessProcess(argv, env=pi_env(home, agent, env), cwd=cwd, stdin_pipe=stdin_pipe, name=harness.name)
