"""`--emit exec-per-event --exec CMD`: run the user's command once per event; its exit status is the ack.

The command is the user's own configuration and goes to `/bin/sh -c` as written. Mail never goes
into the command line: the event arrives only as KIJITOMON_* environment variables (the contract of
kijito-inbox-monitor's exec mode), so nothing a sender writes is ever parsed by a shell, and the
token variables of our own environment are not passed on.

Exit 0 within the timeout is a delivery. Anything else holds the cursor, so the same event (same
KIJITOMON_EVENT_ID) comes again: a timed-out command may well have acted, which is why consumers
dedupe on the event id. A command that times out is killed with its whole process group, so a
hung hook cannot leave children behind run after run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import IO

from kijito_pull.core import render
from kijito_pull.core.events import exec_environment
from kijito_pull.core.models import Message
from kijito_pull.core.sink import Sink

SHELL = "/bin/sh"


def _flat(value: object) -> str:
    """A server-influenced name (the persona inside an event id) on one harmless line."""
    return " ".join(render.sanitize(str(value)).split())[:200] or "?"


class ExecSink(Sink):
    """`--emit exec-per-event --exec CMD`: runs the command once per event with the KIJITOMON_* variables;
    a message counts as taken when the command exits 0."""

    parks = True  # a command that keeps failing on one message: parked (docs/delivery.md, "Poison mail")

    def __init__(self, command: str, base_env: Mapping[str, str], timeout: float = 10.0,
                 stderr: IO[str] = sys.stderr):
        self.command = command
        self.base_env = dict(base_env)
        self.timeout = timeout
        self.stderr = stderr

    def signal(self, event: dict) -> None:
        """Diagnostics are best effort: run the command once, report a failure, never retry."""
        self._run(event, gating=False)

    def deliver(self, event: dict, message: Message) -> bool:
        return self._run(event, gating=True)

    def _run(self, event: dict, gating: bool) -> bool:
        try:
            env = exec_environment(event, self.base_env)
            proc = subprocess.Popen([SHELL, "-c", self.command], env=env, stdin=subprocess.DEVNULL,
                                    start_new_session=True, close_fds=True)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            self._report(event, gating, f"could not be started ({reason})")
            return False
        try:
            status = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._kill_group(proc)
            self._report(event, gating, f"did not finish within {self.timeout:g} s and was killed")
            return False
        except BaseException:
            # Interrupted (SIGINT, SIGTERM turned into an exception): do not leave the hook running.
            self._kill_group(proc)
            raise
        if status != 0:
            how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
            self._report(event, gating, how)
            return False
        return True

    @staticmethod
    def _kill_group(proc: subprocess.Popen) -> None:
        # The shell leads its own group (start_new_session) and is not reaped yet, so the group id
        # cannot have been reused: killing it reaches the shell and everything it started.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def _report(self, event: dict, gating: bool, what: str) -> None:
        # Neither the command (it may embed a secret of its own) nor any event content appears here.
        kind = _flat(event.get("event", "?"))
        event_id = _flat(event.get("event_id", "?"))
        if gating:
            line = (f"kijito-pull: the --exec command {what} for {kind} event {event_id}; holding the "
                    f"cursor, the event will be delivered again\n")
        else:
            line = f"kijito-pull: the --exec command {what} for {kind} event {event_id} (not retried)\n"
        try:
            self.stderr.write(line)
            self.stderr.flush()
        except (OSError, ValueError):
            pass
