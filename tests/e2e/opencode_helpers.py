"""Helpers for the end-to-end tests of kijito-pull's OpenCode plugin against the real OpenCode, offline.

OpenCode (the version `scripts/install-harnesses` pins) talks to the fake model's OpenAI chat-completions API
on loopback through its bundled `@ai-sdk/openai-compatible` provider (a project `opencode.json`), with model
fetching and auto-update off, inside the harness network namespace (shared harness notes, "OpenCode 1.18.33").
The plugin is installed the way a user would: `kijito-pull install opencode --user`; its npm step
(`@opencode-ai/plugin`) is served from npm's cache (`$npm_config_cache`, the machine's own), since the
namespace has no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h

TITLE_MARK = "You are a title generator"
PASSWORD = "e2e-opencode-server-password"


@dataclass(frozen=True)
class Host:
    """OpenCode or its fork Kilo Code CLI (kijito_pull.harnesses.opencode.variant): what the tests name."""

    name: str  # the harness (tests/e2e/harness.py) and kijito-pull's target
    config_file: str  # the project config it reads
    env_prefix: str  # OPENCODE_ / KILO_
    dependency: str  # what `kijito-pull install` npm-installs, with its version

    def env(self, what: str) -> str:
        return f"{self.env_prefix}{what}"


OPENCODE = Host("opencode", "opencode.json", "OPENCODE_", "@opencode-ai/plugin@1.18.33")
KILO = Host("kilo", "kilo.json", "KILO_", "@kilocode/plugin@7.3.1")
HOSTS = {"opencode": OPENCODE, "kilo": KILO}


def write_config(project: Path, model_url: str, host: Host = OPENCODE) -> Path:
    """<project>/opencode.json (kilo.json): the fake model as the only provider (the offline recipe)."""
    path = project / host.config_file
    path.write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                              "options": {"baseURL": f"{model_url}/v1", "apiKey": "dummy"},
                              "models": {"fake-model": {"name": "Fake model"}}}},
        "model": "fake/fake-model", "small_model": "fake/fake-model", "autoupdate": False, "share": "disabled",
    }, indent=2) + "\n")
    return path


def opencode_bin(harness: h.Harness) -> Path:
    """The folder with the pinned `opencode` (`kilo`) command (npm's bin links)."""
    exe = Path(harness.argv[0])
    return next(p for p in exe.parents if p.name == "node_modules") / ".bin"


def npm_cache() -> str:
    return os.environ.get("npm_config_cache") or str(Path(os.environ.get("HOME", "/root")) / ".npm")


def opencode_env(harness: h.Harness, home: Path, sandbox_url: str, state: Path, **extra: str) -> dict[str, str]:
    """OpenCode's environment: its home, no model fetching or updates, npm's cache, and what the plugin's
    hooks need (this repository's kijito-pull first on PATH, then the pinned `opencode`; the sandbox)."""
    hook = ch.hook_env(sandbox_url, state)
    hook["PATH"] = f"{ch.venv_bin()}{os.pathsep}{opencode_bin(harness)}{os.pathsep}{os.environ.get('PATH', '')}"
    host = HOSTS[harness.name]
    env = h.base_env(home, {**hook, host.env("DISABLE_MODELS_FETCH"): "1", host.env("DISABLE_AUTOUPDATE"): "1",
                            "npm_config_cache": npm_cache(), "npm_config_update_notifier": "false"})
    env.update(extra)
    return env


def run(harness: h.Harness, env: dict[str, str], cwd: Path, prompt: str, timeout: float = 120) \
        -> subprocess.CompletedProcess:
    """`opencode run PROMPT` (headless), in the namespace (OpenCode takes its folder from $PWD, not its cwd);
    the whole group is killed on timeout."""
    # The plugin's detached session.idle hook outlives `opencode run` (as it must); the sweep of the run's
    # processes after it would end it too, so it is given time to finish first.
    state = Path(env["KIJITO_PULL_STATE_DIR"])
    return h.run_headless(harness.cmd("run", prompt), env={**env, "PWD": str(cwd)}, cwd=cwd, name=f"{harness.name} run",
                          timeout=timeout,
                          settle=lambda _proc: ch.wait_until(
                              lambda: not ch.hook_pids(state, f"{harness.name}-session-idle"), 40, step=0.2))


def serve(harness: h.Harness, env: dict[str, str], cwd: Path, port: int) -> h.HarnessProcess:
    """`opencode serve --port PORT` in the namespace, with a server password."""
    argv = h.netns().wrap(harness.cmd("serve", "--port", str(port), "--hostname", "127.0.0.1"))
    return h.HarnessProcess(argv, env={**env, "PWD": str(cwd), HOSTS[harness.name].env("SERVER_PASSWORD"): PASSWORD},
                            cwd=cwd, stdin_pipe=False, name=f"{harness.name}-serve")


def api(port: int, method: str, path: str, body: dict | None = None, timeout: float = 5.0,
        user: str = "opencode") -> tuple[int, object]:
    """One request to the OpenCode server in the namespace (basic auth with the test's password)."""
    import base64

    def call() -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{PASSWORD}".encode()).decode())
        if data is not None:
            req.add_header("Content-Type", "application/json")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=timeout) as answer:
            raw = answer.read()
            return answer.status, (json.loads(raw) if raw.strip() else None)

    return h.netns().call(call)


def wait_server(port: int, timeout: float = 60, user: str = "opencode") -> bool:
    """Whether the OpenCode server on `port` answers `GET /session` within `timeout` seconds."""
    def up() -> bool:
        try:
            return api(port, "GET", "/session", timeout=2, user=user)[0] == 200
        except Exception:  # noqa: BLE001 - not listening yet
            return False

    return ch.wait_until(up, timeout, step=0.5)


def export(harness: h.Harness, env: dict[str, str], sid: str) -> str:
    argv = h.netns().wrap(harness.cmd("export", sid))
    return subprocess.run(argv, env=env, cwd="/", capture_output=True, text=True, timeout=60).stdout


def sessions(harness: h.Harness, env: dict[str, str], cwd: Path) -> list[str]:
    """The ids of OpenCode's sessions (`opencode session list --format json`), newest first."""
    argv = h.netns().wrap(harness.cmd("session", "list", "--format", "json"))
    out = subprocess.run(argv, env={**env, "PWD": str(cwd)}, cwd=cwd, capture_output=True, text=True, timeout=60).stdout
    try:
        return [s["id"] for s in json.loads(out)]
    except (ValueError, KeyError, TypeError):
        return []


def main_requests(fm) -> list[dict]:
    """The conversation's model requests (the title requests left out)."""
    return [r for r in fm.model_requests if TITLE_MARK not in fm.text_of(r)]


def tree(*roots: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under `roots`, for byte-exact comparisons."""
    out: dict[str, bytes | None] = {}
    for root in roots:
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            out[str(path)] = None if path.is_dir() else path.read_bytes()
    return out
