"""Imported first by the CLI entry: a quiet Ctrl-C during start-up, and `kijito-pull hook NAME`
answered before the heavy imports. First of all, a kijito-pull that does not fit the plugin whose
launcher started it hands over to that launcher (kijito_pull.harnesses.launcher).

The console script imports `kijito_pull.cli.main`, which imports every command (and so `requests`,
`tenacity`, ...): about 150 ms before any code runs. Claude Code and Codex run their hooks in every
project, so for a project that has not opted in, importing this module first lets the hook exit 0
having loaded only the standard library, and an opted-in hook runs from here without argparse or
the unrelated commands: through the one hook route, `kijito_pull.harnesses.hookgate.run_hook` (see
`early_gate`). For any other command line the gate does nothing.

A Ctrl-C in those start-up imports would print a KeyboardInterrupt traceback: for a console run that
is not a hook, SIGINT meanwhile ends the process with one line and status 130 (nothing has been read
or written yet), and `restore_interrupts()` (called by `main` before the command runs) gives Ctrl-C
back to Python, so a running command unwinds and reports it itself. Hooks keep their own handling.

The long-running commands (`watch`, `relay`, `sandbox`) stop cleanly on SIGTERM (exit 0), and a
supervisor may send it at any moment, start-up included: for them SIGTERM meanwhile ends the process
with one line and status 0, until the command installs its own handler (first thing in its `run`).
"""

import signal
import sys

from kijito_pull.harnesses import (
    hookgate,  # standard library only, and first: a hook gets nothing else
    launcher,
)

launcher.reroute(sys.argv)  # started by a plugin's launcher this version does not fit: back to it (exec)

_EXIT_INTERRUPTED = 130  # core.exitcodes.ExitCode.INTERRUPTED, not imported: this runs before everything
LONG_RUNNING = frozenset({"watch", "relay", "sandbox"})  # commands that exit 0 on SIGTERM


def _interrupted_at_start(signum, frame):  # noqa: ARG001 - a signal handler's signature
    sys.stderr.write("kijito-pull: interrupted\n")
    raise SystemExit(_EXIT_INTERRUPTED)


def _stopped_at_start(signum, frame):  # noqa: ARG001 - a signal handler's signature
    sys.stderr.write("kijito-pull: stopped before it started\n")
    raise SystemExit(0)


def restore_interrupts() -> None:
    """Start-up is over: Ctrl-C raises KeyboardInterrupt again (only if it was this module that took it)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_at_start:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_console = bool(sys.argv) and hookgate.is_console(sys.argv[0]) and not (len(sys.argv) > 1 and sys.argv[1] == "hook")
if _console and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_at_start)
# The command is the first word (cli.main); a later one may be a value (`--once --persona watch`).
_long_running = len(sys.argv) > 1 and sys.argv[1] in LONG_RUNNING
if _console and _long_running and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _stopped_at_start)

hookgate.early_gate()
