"""Helpers for the end-to-end tests of kijito-pull's Codex hooks against the real Codex CLI, offline.

Codex (the version `scripts/install-harnesses` pins) talks to the fake model's Responses API on loopback
(a custom provider with `wire_api = "responses"`), with analytics and plugins off, inside the harness
network namespace. Hooks are installed and trusted the way a user would: `kijito-pull install codex
--user --trust` (which asks `codex app-server` for the hooks' keys and hashes).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h

API_KEY_ENV = "FAKE_CODEX_KEY"


def codex_bin(harness: h.Harness) -> Path:
    return Path(harness.argv[0]).parent


def write_config(home: Path, model_url: str, trusted_projects: tuple[Path, ...] = ()) -> Path:
    """$HOME/.codex/config.toml: the fake model as the only provider; nothing else phones home."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    lines = [
        'model = "fake-model"',
        'model_provider = "fake"',
        "",
        "[model_providers.fake]",
        'name = "fake"',
        f'base_url = "{model_url}/v1"',
        'wire_api = "responses"',
        f'env_key = "{API_KEY_ENV}"',
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "",
    ]
    for project in trusted_projects:
        lines += [f'[projects."{project}"]', 'trust_level = "trusted"', ""]
    path = codex_home / "config.toml"
    path.write_text("\n".join(lines))
    return path


def codex_env(harness: h.Harness, home: Path, sandbox_url: str, state: Path, **extra: str) -> dict[str, str]:
    """Codex's environment: its home, the fake key, and what the hooks need (this repository's
    kijito-pull and the pinned codex first on PATH)."""
    hook = ch.hook_env(sandbox_url, state)
    env = h.base_env(home, {**hook, "CODEX_HOME": str(home / ".codex"), API_KEY_ENV: "dummy",
                            "PATH": f"{ch.venv_bin()}{os.pathsep}{codex_bin(harness)}{os.pathsep}"
                                    f"{os.environ.get('PATH', '')}"})
    env.update(extra)
    return env


def run_exec(harness: h.Harness, env: dict[str, str], cwd: Path, prompt: str, *extra: str,
             timeout: float = 90) -> subprocess.CompletedProcess:
    argv = h.netns().wrap(harness.cmd("exec", "--skip-git-repo-check", *extra, prompt))
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          start_new_session=True)


def hooks_file(home: Path) -> Path:
    return home / ".codex" / "hooks.json"


def rollout_lines(home: Path, session_id: str) -> list[dict]:
    for path in (home / ".codex" / "sessions").rglob(f"*{session_id}.jsonl"):
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return []


def daemon_stop(harness: h.Harness, env: dict[str, str]) -> None:
    subprocess.run(h.netns().wrap(harness.cmd("app-server", "daemon", "stop")), env=env, capture_output=True,
                   timeout=30)


def start_tui(harness: h.Harness, env: dict[str, str], project: Path, fm, *, daemon: bool = True) -> h.Tmux:
    """The interactive Codex under tmux, through its first turn (Codex starts the session, and runs its
    SessionStart hooks, with the first prompt). Raises AssertionError with the screen if it never gets there."""
    argv = h.netns().wrap(harness.cmd(*([] if daemon else ["--no-daemon"])))
    tui = h.Tmux(argv, env={**env, "TERM": "xterm-256color"}, cwd=project)
    try:
        assert tui.wait_for_screen("Ask Codex", timeout=30), tui.capture()
        submit(tui, fm, "say hello")
    except BaseException:
        tui.kill()
        raise
    return tui


def submit(tui: h.Tmux, fm, prompt: str) -> None:
    """Type `prompt` into Codex's composer and submit it; returns once a model request holds it. Codex's composer
    takes keys typed in a burst as a paste, Enter included: press Enter on its own, again if the first one was
    taken into the paste (an empty composer ignores it). Raises AssertionError with the screen if none does."""
    start = len(fm.requests)
    tui.type(prompt, enter=False)
    for _ in range(5):
        time.sleep(0.6)
        tui.send_keys("Enter")
        if fm.wait_for_text(prompt, timeout=5, start=start) is not None:
            return
    raise AssertionError(tui.capture())


def watchers(state: Path) -> list[int]:
    """Live `kijito-pull hook codex-watch` processes serving this state dir (zombies excluded)."""
    return ch.hook_pids(state, "codex-watch")


def watch_logs(state: Path) -> str:
    return "\n".join(f"{p.name}: {p.read_text()[-3000:]}" for p in (state / "sessions").glob("*.watch.log"))


def pending(env: dict[str, str], project: Path) -> list[dict]:
    """The cursor's hand-overs held by a session (`status --json`); released ones are not listed."""
    out = ch.kp(env, project, "status", "--json", "--persona", ch.PERSONA)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [p for row in rows for p in row.get("pending") or [] if p.get("holder")]
