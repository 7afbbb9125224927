"""Run the CLI in-process (through the injectable Environment) or as a real subprocess."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict]:
        # NDJSON lines end at "\n" only: content may carry U+2028 or C1 controls that splitlines() splits on.
        return [json.loads(line) for line in self.stdout.split("\n") if line.strip()]

    def of_kind(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]

    @property
    def new_ids(self) -> list[int]:
        return [e["id"] for e in self.of_kind("new")]


def unprivileged() -> list[str]:
    """The argv prefix that runs a command without root's power to ignore file modes: as root, `unshare
    --user` (a user namespace of its own: the owner's mode bits apply to it, and no capability overrides
    them); as anyone else, nothing. A test of what an unreadable or unwritable file does runs its command
    with it, so it tests the same thing on a developer's machine and in CI (which runs as root)."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare") or "unshare"  # by its path: a test's own PATH may not hold it
    try:
        works = subprocess.run([unshare, "--user", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        works = False
    if not works:
        raise RuntimeError("running as root, and `unshare --user` is not available to drop root's file access")
    return [unshare, "--user"]


class Cli:
    """A configured kijito-pull: token and API base in the environment, a private state dir."""

    def __init__(self, api_base: str, token: str, state_dir: Path):
        self.environ = {
            "KIJITOMON_TOKEN": token,
            "KIJITO_BASE": api_base,
            "KIJITO_PULL_STATE_DIR": str(state_dir),
            "KIJITO_PULL_CONFIG": os.devnull,  # no config file, until `configure` writes one
            "PATH": os.environ.get("PATH", ""),
        }
        self.state_dir = state_dir

    def configure(self, text: str) -> Path:
        """Write `text` as this kijito-pull's config file (beside its state dir) and use it from now on."""
        path = self.state_dir.parent / f"{self.state_dir.name}-config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.environ["KIJITO_PULL_CONFIG"] = str(path)
        return path

    def __call__(self, *argv: str, stdin: str = "", env: Mapping[str, str] | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        environ = {**self.environ, **(env or {})}
        code = main(list(argv), Environment(stdin=io.StringIO(stdin), stdout=out, stderr=err, environ=environ,
                                            cwd=str(self.state_dir)))
        return Result(code, out.getvalue(), err.getvalue())

    def spawn(self, *argv: str, env: Mapping[str, str] | None = None, prefix: tuple[str, ...] | list[str] = (),
              **kwargs) -> subprocess.Popen:
        environ = {**self.environ, "PYTHONPATH": str(REPO), **(env or {})}
        return subprocess.Popen([*prefix, sys.executable, "-m", "kijito_pull", *argv], env=environ,
                                stdout=kwargs.pop("stdout", subprocess.PIPE),
                                stderr=kwargs.pop("stderr", subprocess.PIPE), text=True, **kwargs)

    def run(self, *argv: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> Result:
        proc = self.spawn(*argv, env=env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()  # never leave a hung child behind
            proc.communicate()
            raise
        return Result(proc.returncode, out, err)

    def state_files(self) -> list[Path]:
        return sorted((self.state_dir / "cursors").glob("*.json"))
