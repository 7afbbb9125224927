"""Run `kijito-pull watch` as a real subprocess and read its NDJSON events with deadlines."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from typing import Callable

from tests.clirunner import Cli


class WatchProc:
    def __init__(self, cli: Cli, *argv: str, env: dict | None = None, stdin: bool = False):
        self.proc = cli.spawn("watch", *argv, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)
        self.events: list[dict] = []
        self.lines: queue.Queue = queue.Queue()
        self.stderr_lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = 10.0) -> dict:
        """The first event (already seen or arriving before the deadline) matching predicate."""
        for event in self.events:
            if predicate(event):
                return event
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching event within {timeout} s; saw {self.kinds()}; "
                                     f"stderr: {''.join(self.stderr_lines)[-2000:]}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"watch exited ({self.proc.poll()}); saw {self.kinds()}; "
                                     f"stderr: {''.join(self.stderr_lines)[-2000:]}")
            event = json.loads(line)
            self.events.append(event)
            if predicate(event):
                return event

    def new(self, content: str, timeout: float = 10.0) -> dict:
        return self.wait_for(lambda e: e["event"] == "new" and e.get("content") == content, timeout)

    def drain(self, seconds: float) -> None:
        """Collect whatever arrives during `seconds`."""
        try:
            self.wait_for(lambda e: False, seconds)
        except AssertionError:
            pass

    def kinds(self) -> list[str]:
        return [e["event"] for e in self.events]

    def new_ids(self) -> list[int]:
        return [e["id"] for e in self.events if e["event"] == "new"]

    def send_line(self, obj: dict) -> None:
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
