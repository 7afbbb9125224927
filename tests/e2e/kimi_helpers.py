"""Helpers for the end-to-end tests of kijito-pull's Kimi Code CLI hooks against the real Kimi Code CLI, offline.

Kimi Code CLI (the version `scripts/install-harnesses` pins, on the Node 22 installed beside it) talks to the
fake model's OpenAI chat-completions API on loopback, named as a provider in its config.toml (no login), with
telemetry and the update check off, inside the harness network namespace (shared harness notes, "Kimi Code CLI
2.1.0"). Hooks are installed the way a user would: `kijito-pull install kimi --user`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h

STREAM_PATH = "/chat/completions"

#: The offline config.toml: one provider, the fake model on loopback (`{url}` is its /v1 base).
OFFLINE_CONFIG = """\
# my Kimi settings
default_model = "fake"

[providers.fake]
type = "openai"
base_url = "{url}"
api_key = "dummy"

[models.fake]
provider = "fake"
model = "fake-model"
max_context_size = 128000
"""


def config_file(home: Path) -> Path:
    return home / ".kimi-code" / "config.toml"


def write_config(home: Path, model_url: str) -> Path:
    """$HOME/.kimi-code/config.toml for offline use (kijito-pull's install adds its hooks to it later)."""
    path = config_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OFFLINE_CONFIG.format(url=model_url.rstrip("/") + "/v1"))
    return path


def kimi_bin(tmp: Path, harness: h.Harness) -> Path:
    """A folder holding a `kimi` command that runs the pinned bundle on its Node 22 (npm's bin link would run
    the system node, which Kimi refuses below 22.19)."""
    folder = tmp / "kimi-bin"
    folder.mkdir(exist_ok=True)
    script = folder / "kimi"
    script.write_text(f"#!/bin/sh\nexec {harness.argv[0]} {harness.argv[1]} \"$@\"\n")
    script.chmod(0o755)
    return folder


def kimi_env(harness: h.Harness, home: Path, sandbox_url: str, state: Path, bin_dir: Path,
             **extra: str) -> dict[str, str]:
    """Kimi's environment: its home, no telemetry or update check, and what the hooks need (this repository's
    kijito-pull first on PATH, then `kimi`; the sandbox, the state dir)."""
    hook = ch.hook_env(sandbox_url, state)
    hook["PATH"] = f"{ch.venv_bin()}{os.pathsep}{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    env = h.base_env(home, {**hook, "KIMI_DISABLE_TELEMETRY": "1", "KIMI_CODE_NO_AUTO_UPDATE": "1"})
    env.update(extra)
    return env


def run_p(harness: h.Harness, env: dict[str, str], cwd: Path, prompt: str, *extra: str,
          timeout: float = 90) -> subprocess.CompletedProcess:
    """`kimi -p PROMPT` (headless), in the namespace; the whole group is killed on timeout."""
    # A settler a Stop hook started (kimi-settle) outlives `kimi -p` by design; it carries the run's tag, so
    # the kill after the run would end it: let it finish first (it looks for at most 30 s).
    return h.run_headless(harness.cmd("-p", prompt, *extra), env=env, cwd=cwd, name="kimi -p", timeout=timeout,
                          settle=lambda proc: ch.wait_until(lambda: not settlers(proc.tag), 40))


def settlers(tag: str) -> list[int]:
    """The live `kijito-pull hook kimi-settle` processes of one run (by its tag)."""
    found = []
    for pid in h.tagged_pids(tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"kimi-settle" in handle.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def trust_folder(home: Path, folder: Path) -> None:
    """Answer the TUI's folder-trust dialog in advance, as Kimi records the answer
    (`workspace-trust/<its folder name for the path>`: `{"root", "trustedAt"}`, private)."""
    from kijito_pull.harnesses.kimi.record import bucket

    trust = home / ".kimi-code" / "workspace-trust"
    trust.mkdir(parents=True, exist_ok=True, mode=0o700)
    entry = trust / bucket(str(folder))
    entry.write_text(json.dumps({"root": str(folder), "trustedAt": int(time.time() * 1000)}))
    entry.chmod(0o600)


def start_tui(harness: h.Harness, env: dict[str, str], cwd: Path) -> h.Tmux:
    """The interactive Kimi under tmux (the folder trusted first); ready when it says "No session yet"."""
    trust_folder(Path(env["HOME"]), cwd)
    return h.Tmux(h.netns().wrap(harness.cmd()), env={**env, "TERM": "xterm-256color"}, cwd=cwd)


def type_prompt(tui: h.Tmux, text: str) -> None:
    """Type a prompt: the text, a pause, then Enter on its own (sent together, Kimi takes them as a paste)."""
    tui.send_keys(text, literal=True)
    time.sleep(0.6)
    tui.send_keys("Enter")


def wires(home: Path) -> list[Path]:
    """Kimi's session records (`~/.kimi-code/sessions/wd_*/session_*/agents/main/wire.jsonl`), oldest first."""
    return sorted((home / ".kimi-code" / "sessions").glob("wd_*/session_*/agents/main/wire.jsonl"),
                  key=os.path.getmtime)


def stream_requests(fm) -> list[dict]:
    """The conversation's model requests."""
    return [r for r in fm.model_requests if r["path"].endswith(STREAM_PATH)]
