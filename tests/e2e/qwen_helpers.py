"""Helpers for the end-to-end tests of kijito-pull's Qwen Code hooks against the real Qwen Code, offline.

Qwen Code (the version `scripts/install-harnesses` pins, on its Node 22) talks to the fake model's OpenAI
chat-completions API on loopback (`OPENAI_BASE_URL`, a dummy `OPENAI_API_KEY`, `OPENAI_MODEL`), with usage
statistics, telemetry and update checks off, inside the harness network namespace (shared harness notes,
"Qwen Code 0.24.4"). Hooks are installed the way a user would: `kijito-pull install qwen --user`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h

MODEL = "fake-model"
CHAT_PATH = "/v1/chat/completions"

#: The user settings of an offline Qwen Code (measured: no auth dialog, nothing phones home). With the
#: `$version` Qwen 0.24.4 writes into a user settings file that lacks one (its settings migration), so that the
#: file stays as the user (here: the test) wrote it.
OFFLINE_SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False},
    "telemetry": {"enabled": False},
    "$version": 4,
}


def settings_file(home: Path) -> Path:
    return home / ".qwen" / "settings.json"


def write_settings(home: Path, settings: dict | None = None) -> Path:
    """$HOME/.qwen/settings.json for offline use (kijito-pull's install adds its hooks to it later)."""
    path = settings_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings or OFFLINE_SETTINGS, indent=2) + "\n")
    return path


def qwen_env(harness: h.Harness, home: Path, model_url: str, sandbox_url: str, state: Path,
             **extra: str) -> dict[str, str]:
    """Qwen's environment: its home, the fake model and a dummy key, and what the hooks need (this
    repository's kijito-pull first on PATH, then the Node 22 that runs Qwen and the pinned `qwen`)."""
    hook = ch.hook_env(sandbox_url, state)
    node = Path(harness.argv[0]).parent
    qwen_bin = Path(harness.argv[-1]).parents[2] / ".bin"
    hook["PATH"] = os.pathsep.join((str(ch.venv_bin()), str(node), str(qwen_bin), os.environ.get("PATH", "")))
    env = h.base_env(home, {**hook, "OPENAI_API_KEY": "dummy-qwen-key", "OPENAI_BASE_URL": f"{model_url}/v1",
                            "OPENAI_MODEL": MODEL, "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"})
    for marker in ("CI", "GITHUB_ACTIONS"):  # the CI runner's markers are not the user's terminal's
        env.pop(marker, None)
    env.update(extra)
    return env


def run_p(harness: h.Harness, env: dict[str, str], cwd: Path, prompt: str, *extra: str,
          timeout: float = 90) -> subprocess.CompletedProcess:
    """`qwen -p PROMPT --yolo` (headless), in the namespace; the whole group is killed on timeout."""
    return h.run_headless(harness.cmd("-p", prompt, "--yolo", *extra), env=env, cwd=cwd, name="qwen -p",
                          timeout=timeout)


def chat_records(home: Path) -> list[Path]:
    """Qwen's chat records (`~/.qwen/projects/<cwd>/chats/<session id>.jsonl`), oldest first."""
    return sorted((home / ".qwen" / "projects").glob("*/chats/*.jsonl"), key=os.path.getmtime)


def chat_requests(fm) -> list[dict]:
    """The conversation's model requests (chat completions whose system prompt is Qwen's own; the side
    requests Qwen may make, e.g. prompt suggestions, are told apart by their system prompt)."""
    return [r for r in fm.model_requests if r["path"].endswith(CHAT_PATH) and _main(r)]


def _main(request: dict) -> bool:
    messages = (request.get("body") or {}).get("messages") or []
    first = messages[0] if messages else {}
    return first.get("role") == "system" and "You are Qwen Code" in json.dumps(first.get("content"))


def system_text(request: dict) -> str:
    messages = (request.get("body") or {}).get("messages") or []
    return json.dumps(messages[0].get("content")) if messages and messages[0].get("role") == "system" else ""


def last_user_text(request: dict) -> str:
    messages = [m for m in (request.get("body") or {}).get("messages") or [] if m.get("role") == "user"]
    return json.dumps(messages[-1].get("content")) if messages else ""
