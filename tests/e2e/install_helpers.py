"""Helpers for tests/e2e/test_install_e2e.py: kijito-pull as a user gets it (a wheel in a fresh virtual
environment, nothing from this checkout), the real harness commands on PATH, and Codex-shaped hook
input.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e import harness as h

REPO = h.REPO_ROOT
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class FreshInstall:
    """A virtual environment with only the built wheel (and its dependencies) installed."""

    venv: Path
    wheel: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def kijito_pull(self) -> Path:
        return self.bin / "kijito-pull"


def build_wheel(out: Path) -> Path:
    """`pip wheel --no-deps` of this checkout into `out` (the build backend from pip's index if the
    running environment has no hatchling)."""
    out.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)]
    proc = subprocess.run([*base[:5], "--no-build-isolation", *base[5:]], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        proc = subprocess.run(base, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"building the wheel failed:\n{proc.stderr[-3000:]}")
    (wheel,) = sorted(out.glob("kijito_pull-*.whl"))
    return wheel


def fresh_install(root: Path) -> FreshInstall:
    """Build the wheel, make a new venv, `pip install` the wheel into it."""
    wheel = build_wheel(root / "dist")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)]
    proc = subprocess.run(pip, capture_output=True, text=True, timeout=600, cwd=root)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install of the wheel failed:\n{proc.stderr[-3000:]}")
    found = FreshInstall(env_dir, wheel)
    if not found.kijito_pull.exists():
        raise RuntimeError(f"no kijito-pull script in {found.bin}")
    return found


def user_env(home: Path, fresh: FreshInstall, *extra_path: Path | str, **extra: str) -> dict[str, str]:
    """A user's environment: private HOME, the fresh install's bin (and `extra_path`) first on PATH,
    then only the system dirs (this checkout's .venv is not on it)."""
    env = h.base_env(home)
    env["PATH"] = os.pathsep.join([str(fresh.bin), *(str(p) for p in extra_path), SYSTEM_PATH])
    env.update({"DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"})
    env.update(extra)
    return env


def kp(fresh: FreshInstall, *args: str, env: dict[str, str], cwd: Path,
       timeout: float = 120) -> subprocess.CompletedProcess:
    """The fresh install's `kijito-pull ARGS`."""
    return subprocess.run([str(fresh.kijito_pull), *args], env=env, cwd=str(cwd), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def harness_bin(root: Path, harness: h.Harness, name: str) -> Path:
    """A folder holding `name` (claude, pi) that runs `harness`: what a user's PATH would have."""
    folder = root / f"bin-{harness.name}"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\nexec {shlex.join(harness.argv)} \"$@\"\n")
    script.chmod(0o755)
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- Codex ------------------------------------------------------------------------------------------------


def codex_payload(event: str, cwd: Path, session_id: str = "019a7c3e-0000-7000-8000-00000000c0de",
                  **fields: Any) -> str:
    """Hook input as Codex sends it (codex-rs hooks: SessionStart / Stop command input)."""
    data: dict[str, Any] = {"session_id": session_id, "cwd": str(cwd), "transcript_path": None,
                            "model": "gpt-5-codex", "permission_mode": "default", "hook_event_name": event}
    if event == "SessionStart":
        data["source"] = "startup"
    else:
        data.update({"turn_id": "turn-1", "stop_hook_active": False, "last_assistant_message": "done"})
    data.update(fields)
    return json.dumps(data)


def check_codex_hooks_shape(data: Any) -> dict[str, str]:
    """Assert `data` is a hooks.json Codex reads (event -> [{matcher?, hooks: [{type: command, command,
    timeout}]}]); returns event -> our command line."""
    assert isinstance(data, dict) and isinstance(data.get("hooks"), dict), data
    ours = {}
    for event, groups in data["hooks"].items():
        assert event in {"SessionStart", "PreToolUse", "PermissionRequest", "PostToolUse", "UserPromptSubmit",
                         "Stop", "SubagentStop", "PreCompact", "PostCompact", "SessionEnd"}, event
        assert isinstance(groups, list), groups
        for group in groups:
            assert isinstance(group, dict) and set(group) <= {"matcher", "hooks"}, group
            assert isinstance(group["hooks"], list) and group["hooks"], group
            for handler in group["hooks"]:
                assert handler.get("type") == "command" and isinstance(handler.get("command"), str), handler
                assert isinstance(handler.get("timeout", 1), int) and handler.get("timeout", 1) > 0, handler
                if "kijito" in handler["command"]:
                    ours[event] = handler["command"]
    return ours


def run_hook(command: str, payload: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """A hooks.json command line the way Codex runs it (`sh -c`), hook input on stdin, inside the test
    network namespace (where the sandbox listens)."""
    return subprocess.run(h.netns().wrap(["/bin/sh", "-c", command]), input=payload, env=env, cwd=str(cwd),
                          capture_output=True, text=True, timeout=30)
