"""Helpers for the end-to-end tests of kijito-pull's Gemini CLI hooks against the real Gemini CLI, offline.

Gemini CLI (the version `scripts/install-harnesses` pins) talks to the fake model's Gemini API on loopback
(`GOOGLE_GEMINI_BASE_URL`, API-key auth with a dummy key), with telemetry, usage statistics and update
checks off, inside the harness network namespace (shared harness notes, "Gemini CLI 0.61.0"). Hooks are
installed, and the project trusted, the way a user would: `kijito-pull install gemini --user --trust`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h

MODEL = "gemini-2.5-flash"
STREAM_PATH = ":streamGenerateContent"

#: The user settings of an offline Gemini CLI (measured: no auth dialog, nothing phones home). Current key
#: names only: Gemini CLI 0.61.0 rewrites a settings.json that uses deprecated ones (`disableAutoUpdate`
#: becomes `enableAutoUpdate: false`), which would make the user's file differ from what they wrote.
OFFLINE_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "telemetry": {"enabled": False},
}


def settings_file(home: Path) -> Path:
    return home / ".gemini" / "settings.json"


def write_settings(home: Path) -> Path:
    """$HOME/.gemini/settings.json for offline use (kijito-pull's install adds its hooks to it later)."""
    path = settings_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(OFFLINE_SETTINGS, indent=2) + "\n")
    return path


def gemini_bin(harness: h.Harness) -> Path:
    """The folder with the pinned `gemini` command (npm's bin link to the bundle)."""
    return Path(harness.argv[-1]).parents[3] / ".bin"


def gemini_env(harness: h.Harness, home: Path, model_url: str, sandbox_url: str, state: Path,
               **extra: str) -> dict[str, str]:
    """Gemini's environment: its home, the fake model and dummy key, and what the hooks need (this
    repository's kijito-pull first on PATH, then the pinned `gemini`; the sandbox, the state dir)."""
    hook = ch.hook_env(sandbox_url, state)
    hook["PATH"] = f"{ch.venv_bin()}{os.pathsep}{gemini_bin(harness)}{os.pathsep}{os.environ.get('PATH', '')}"
    env = h.base_env(home, {**hook, "GEMINI_API_KEY": "dummy-gemini-key",
                            "GOOGLE_GEMINI_BASE_URL": model_url, "GEMINI_CLI_NO_RELAUNCH": "true"})
    # Gemini runs headless, never drawing its TUI, wherever CI=true or GITHUB_ACTIONS=true (its
    # isHeadlessMode): the CI runner's markers are not the user's terminal's.
    for marker in ("CI", "GITHUB_ACTIONS"):
        env.pop(marker, None)
    env.update(extra)
    return env


def run_p(harness: h.Harness, env: dict[str, str], cwd: Path, prompt: str, *extra: str,
          timeout: float = 90) -> subprocess.CompletedProcess:
    """`gemini -p PROMPT -m MODEL` (headless), in the namespace; the whole group is killed on timeout."""
    return h.run_headless(harness.cmd("-p", prompt, "-m", MODEL, *extra), env=env, cwd=cwd, name="gemini -p",
                          timeout=timeout)


def chat_records(home: Path) -> list[Path]:
    """Gemini's session records (`~/.gemini/tmp/<project>/chats/session-*.jsonl`), oldest first."""
    return sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"), key=os.path.getmtime)


def stream_requests(fm) -> list[dict]:
    """The conversation's model requests (the streamed ones; side requests left out)."""
    return [r for r in fm.model_requests if r["path"].endswith(STREAM_PATH)]
