"""Helpers for the end-to-end tests of kijito-pull's Copilot CLI hooks against the real Copilot CLI, offline.

Copilot CLI (the version `scripts/install-harnesses` pins) talks to the fake model's OpenAI chat
completions on loopback with its own provider settings (BYOK: no GitHub sign-in, no onboarding), offline
and without updates, inside the harness network namespace (shared harness notes, "Copilot CLI 1.0.102").
Its first run unpacks about 235 MB under `$XDG_CACHE_HOME/copilot`: the tests share one cache folder,
so only the first run of a session pays for it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h

MODEL_PATH = "/chat/completions"
_CACHE = Path(tempfile.gettempdir()) / f"kijito-pull-e2e-copilot-cache-{os.getuid()}"


def cache_dir() -> Path:
    """The shared cache Copilot unpacks its JS into (once per machine, not per test: 235 MB)."""
    _CACHE.mkdir(mode=0o700, exist_ok=True)
    return _CACHE


def copilot_env(harness: h.Harness, home: Path, model_url: str, sandbox_url: str, state: Path,
                **extra: str) -> dict[str, str]:
    hook = ch.hook_env(sandbox_url, state)
    hook["PATH"] = f"{ch.venv_bin()}{os.pathsep}{Path(harness.argv[0]).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    _CACHE.mkdir(mode=0o700, exist_ok=True)
    env = h.base_env(home, {**hook, "COPILOT_PROVIDER_BASE_URL": f"{model_url}/v1", "COPILOT_PROVIDER_TYPE": "openai",
                            "COPILOT_PROVIDER_API_KEY": "dummy", "COPILOT_MODEL": "gpt-4.1",
                            "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                            "XDG_CACHE_HOME": str(_CACHE)})
    env.update(extra)
    return env


def run_p(harness: h.Harness, env: dict[str, str], cwd: Path, prompt: str, *extra: str,
          timeout: float = 120) -> subprocess.CompletedProcess:
    """`copilot -p PROMPT --allow-all-tools` (headless), in the namespace; the group is killed on timeout."""
    return h.run_headless(harness.cmd("-p", prompt, "--allow-all-tools", *extra), env=env, cwd=cwd, name="copilot -p",
                          timeout=timeout)


def model_requests(fm) -> list[dict]:
    return [r for r in fm.model_requests if r["path"].endswith(MODEL_PATH)]


def records(home: Path) -> list[Path]:
    return sorted((home / ".copilot" / "session-state").glob("*/events.jsonl"))


def start_tui(harness: h.Harness, env: dict[str, str], cwd: Path) -> h.Tmux:
    """The terminal UI with its experimental features (extensions) on, in the namespace; the folder dialog is
    answered "Yes" (this session only), as a user would."""
    tui = h.Tmux(h.netns().wrap(harness.cmd("--experimental")), env={**env, "TERM": "xterm-256color"}, cwd=cwd)
    if tui.wait_for_screen("Yes, and remember", timeout=40):
        tui.send_keys("Enter")
    return tui
