"""A real `kijito-pull dashboard` process for the dashboard tests: started against a sandbox and a state
directory, its address read from the first line of its stdout, stopped with SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]


class Dashboard:
    """The running command: `url` (with the key), `base` (without), `proc`."""

    def __init__(self, proc: subprocess.Popen, url: str):
        self.proc = proc
        self.url = url
        self.base = url.split("?", 1)[0]
        self.key = url.split("key=", 1)[1]

    def at(self, path: str, key: bool = True) -> str:
        return f"{self.base.rstrip('/')}{path}" + (f"?key={self.key}" if key else "")

    def snapshot(self) -> dict:
        return requests.get(self.at("/snapshot.json"), timeout=5).json()

    def wait(self, test, timeout: float = 5.0) -> dict:  # noqa: ANN001
        """The first snapshot `test` accepts; AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.snapshot()
            if test(snap):
                return snap
            if time.monotonic() > deadline:
                raise AssertionError(f"no such snapshot within {timeout} s; last: {json.dumps(snap)[:2000]}")
            time.sleep(0.05)


def environ(api_base: str, token: str, state: Path) -> dict[str, str]:
    return {"KIJITOMON_TOKEN": token, "KIJITO_BASE": api_base, "KIJITO_PULL_STATE_DIR": str(state),
            "KIJITO_PULL_CONFIG": os.devnull, "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(REPO)}


@contextlib.contextmanager
def dashboard(api_base: str, token: str, state: Path, *args: str,
              stderr: list[str] | None = None) -> Iterator[Dashboard]:
    """`kijito-pull dashboard ARGS` running until the block ends; `stderr` (a list) receives what it wrote there."""
    proc = subprocess.Popen([sys.executable, "-m", "kijito_pull", "dashboard", *args],
                            env=environ(api_base, token, state), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("http://"):
            proc.kill()
            raise AssertionError(f"no address on stdout: {line!r}; stderr: {proc.stderr.read()}")
        yield Dashboard(proc, line)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            raise AssertionError("the dashboard did not stop within 15 s of SIGTERM") from None
        err = proc.stderr.read()
        if stderr is not None:
            stderr.append(err)
        assert code == 0, err
