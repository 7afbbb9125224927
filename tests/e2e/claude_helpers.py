"""Helpers for the kijito-pull Claude Code plugin's end-to-end tests (and bench/bench_hooks.py).

Built on tests/e2e/harness.py: a Kijito sandbox that listens inside the harness's loopback-only
network namespace, an opted-in project, the hook environment (with this repository's `kijito-pull`
first on PATH), and ways to see the waker processes of one state dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kijito_pull.sandbox import Sandbox
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel

REPO = h.REPO_ROOT
PLUGIN = REPO / "plugins" / "claude"  # the Claude Code plugin's own folder (`--plugin-dir`)
TOKEN = "e2e-kijito-token"
PERSONA = "river"
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"


def venv_bin() -> Path:
    """The directory holding this repository's `kijito-pull` (the one the hooks must run)."""
    for candidate in (REPO / ".venv" / "bin", Path(sys.executable).parent):
        if (candidate / "kijito-pull").exists():
            return candidate
    raise FileNotFoundError("no kijito-pull next to this Python or in .venv/bin: run scripts/dev.py")


def start_sandbox() -> Sandbox:
    """A sandbox reachable from the harnesses (bound inside their network namespace)."""
    return h.netns().call(lambda: Sandbox(token=TOKEN).start())


def make_project(root: Path, opted_in: bool = True, name: str = "proj") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / ".git").mkdir()  # the opt-in search stops at the repository root
    (folder / "AGENTS.md").write_text(OPT_IN if opted_in else "# Project\n\nNo inbox here.\n")
    return folder


def hook_env(sandbox_url: str, state: Path, **extra: str) -> dict[str, str]:
    """What the hooks need from the Claude Code process's environment."""
    return {
        "KIJITO_BASE": sandbox_url,
        "KIJITOMON_TOKEN": TOKEN,
        "KIJITO_PULL_STATE_DIR": str(state),
        "KIJITO_PULL_CONFIG": os.devnull,
        "PATH": f"{venv_bin()}{os.pathsep}{os.environ.get('PATH', '')}",
        **extra,
    }


def kp(env: dict[str, str], cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """This repository's kijito-pull, as a user runs it (inside the namespace, so it reaches the sandbox)."""
    argv = h.netns().wrap([str(venv_bin() / "kijito-pull"), *args])
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def doctor(env: dict[str, str], cwd: Path) -> dict[str, dict]:
    """`kijito-pull doctor --json` for the test persona: its findings by check name."""
    out = kp(env, cwd, "doctor", "--json", "--persona", PERSONA)
    found = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {f["check"]: f for f in found}


def unseen(env: dict[str, str], project: Path) -> str:
    """The test persona's mail that no hand-over has confirmed yet (`--once --peek`: read, nothing marked)."""
    return kp(env, project, "--once", "--peek", "--persona", PERSONA).stdout


def hook_pids(state: Path, hook: str) -> list[int]:
    """Live `kijito-pull hook <hook>` processes serving this state dir (zombies excluded), however they
    were started (the console script, or `python -m kijito_pull` for a detached Codex watcher)."""
    needle = f"KIJITO_PULL_STATE_DIR={state}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            if hook.encode() not in argv or b"hook" not in argv:
                continue
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
            if stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X"):
                continue
        except OSError:
            continue
        found.append(int(entry))
    return sorted(found)


def waker_pids(state: Path) -> list[int]:
    """Live `kijito-pull hook claude-waker` processes serving this state dir."""
    return hook_pids(state, "claude-waker")


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


TITLE_MARK = "Write the title"


def is_conversation(fm: FakeModel, request: dict) -> bool:
    """Not a side request (the TUI asks the model for a session title with the first prompt)."""
    return request["path"].endswith("/v1/messages") and TITLE_MARK not in fm.text_of(request)


def conversation_requests(fm: FakeModel, marker: str) -> list[dict]:
    """Model requests of the conversation that contain `marker`, oldest first."""
    return [r for r in fm.model_requests if marker in fm.text_of(r) and is_conversation(fm, r)]


def wait_for_conversation(fm: FakeModel, needle: str, timeout: float, start: int = 0) -> dict | None:
    return fm.wait_for(lambda r: is_conversation(fm, r) and needle in fm.text_of(r), timeout=timeout, start=start)


def counts(fm: FakeModel, request: dict, needles: list[str]) -> dict[str, int]:
    text = fm.text_of(request)
    return {n: text.count(n) for n in needles}


STOP_ECHO = "Stop hook blocking error from command"


def handovers(fm: FakeModel, request: dict, needles: list[str]) -> dict[str, int]:
    """How often each needle was handed to the model, as the conversation in `request` shows it.

    Claude Code (2.1.197 and 2.1.332) keeps a Stop hook's block reason twice in later requests: as the
    user text "Stop hook feedback: ..." and as a system-role "Stop hook blocking error from command ..."
    copy (a string in 2.1.197, a text block in 2.1.332). The copy is Claude Code's, not a second
    hand-over, so it is not counted."""
    body = request.get("body") or {}
    kept = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list) and content and isinstance(content[0], dict):
            content = content[0].get("text")
        if message.get("role") == "system" and isinstance(content, str) and content.startswith(STOP_ECHO):
            continue
        kept.append(message)
    text = fm.text_of({"body": {"system": body.get("system"), "messages": kept}})
    return {n: text.count(n) for n in needles}


def repo_checkout(dest: Path) -> Path:
    """The repository as a clone would have it (tracked and new files, nothing ignored): what
    `claude plugin marketplace add <repo dir>` is pointed at by a user."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src = REPO / rel
        if not src.is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    return dest


def claude_cli(harness: h.Harness, home: Path, cwd: Path, *args: str,
               timeout: float = 60) -> subprocess.CompletedProcess:
    """A non-interactive `claude ...` subcommand (e.g. `plugin install`), offline."""
    env = h.claude_env(home, "http://127.0.0.1:9")
    return subprocess.run(h.netns().wrap(harness.cmd(*args)), env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


TUI_READY = ("for shortcuts", "shift+tab to cycle")  # 2.1.197's prompt footer; 2.1.332's (auto mode)


def wait_tui_ready(tui: h.Tmux, timeout: float = 30) -> bool:
    """The TUI shows its prompt, whichever Claude Code version draws it."""
    return wait_until(lambda: any(n in tui.capture() for n in TUI_READY), timeout, step=0.25)
