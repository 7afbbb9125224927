"""`kijito-pull`: parse arguments, dispatch to one command module, and map failures to exit codes.

`main` is the CLI's one error boundary (core/errors.py): a command raises, and never maps. A
`KijitoPullError` becomes its one line on stderr and its exit code (2 usage or configuration, 1 source
or hand-over); Ctrl-C is 130; an error nobody anticipated is one line naming the report written under
the state directory (core/crashreport.py), or, with `--debug` ($KIJITO_PULL_DEBUG=1), its traceback.
Hooks keep their own boundary (harnesses/hookgate.py)."""

from __future__ import annotations

# isort: off
# First, before anything else is imported: answers `kijito-pull hook claude-*` for a project that has
# not opted in with a few standard-library modules (Claude Code runs the plugin's hooks everywhere).
import kijito_pull.cli.early  # noqa: F401
# isort: on

import argparse
import functools
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from kijito_pull import __version__
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import KijitoPullError, first_line
from kijito_pull.core.exitcodes import ExitCode

# Command name -> its module. Only the module of the command being run is imported, so a hook or a
# `--once` does not pay for the sandbox, the watch loop or the lifecycle code at start-up.
COMMANDS = {
    "pull": "pull_cmd", "watch": "watch_cmd", "show": "show_cmd", "status": "status_cmd", "send": "send_cmd",
    "optin": "optin_cmd", "sandbox": "sandbox_cmd", "demo": "demo_cmd", "hook": "hook_cmd",
    "session": "lifecycle_cmd", "completion": "completion_cmd", "doctor": "doctor_cmd",
    "install": "install_cmd", "uninstall": "install_cmd", "parked": "parked_cmd", "exec": "exec_cmd",
    "relay": "relay_cmd", "track": "track_cmd", "dashboard": "dashboard_cmd",
}

# Commands that send no request to a Kijito API: they take -q but no -v, whose one job is logging requests.
NO_REQUESTS = frozenset({"completion", "status", "optin", "install", "uninstall", "session"})

DESCRIPTION = """\
Keep an AI agent's Kijito inbox live: pull unseen mail once, in order, never skipping a message.

  kijito-pull demo                      see the whole loop on a local sandbox (no account needed)
  kijito-pull --once --persona NAME     hand over unseen mail once (text; --json for NDJSON)
  kijito-pull status                    where each cursor stands
"""

EPILOG = """\
exit codes: 0 success (with or without mail); 1 the source failed or mail could not be handed over
(nothing is skipped; it is delivered next time), or an unexpected error (its report is written under the
state directory; --debug prints it); 2 usage or configuration error (no request was sent); 130
interrupted (Ctrl-C).

environment: KIJITOMON_TOKEN (token), KIJITO_BASE (API base), KIJITO_PERSONA (default persona),
KIJITO_PULL_STATE_DIR (where cursors live).
"""


class _Parser(argparse.ArgumentParser):
    """argparse, writing help and errors to the command's Environment rather than the process's streams."""

    def __init__(self, *args: Any, env: Environment | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.env = env

    def add_subparsers(self, **kwargs: Any):  # type: ignore[override]
        """Nested commands (`session stop`, `install claude`) write through the same Environment."""
        kwargs.setdefault("parser_class", functools.partial(_Parser, env=self.env))
        return super().add_subparsers(**kwargs)

    def _print_message(self, message: str, file=None) -> None:  # type: ignore[override]
        if message and self.env is not None:
            (self.env.stderr if file is sys.stderr else self.env.stdout).write(message)
        elif message:
            super()._print_message(message, file)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self._print_message(f"{self.prog}: error: {message}\n", sys.stderr)
        raise SystemExit(ExitCode.USAGE)


def build_parser(env: Environment | None = None, only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with `only` a parser that knows just that command (faster to import)."""
    parser = _Parser(prog="kijito-pull", description=DESCRIPTION, epilog=EPILOG, env=env,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kijito-pull {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"kijito_pull.cli.{module}").register(sub)
    nested = _leaves(sub, nested_only=True)
    for name, command in sub.choices.items():
        _add_volume_flags(command, False, requests=name not in NO_REQUESTS)
        _add_debug_flag(command, False)
    for command in nested:
        # `session stop -q` as well as `session -q stop`; SUPPRESS so the nested default does not undo it
        _add_volume_flags(command, argparse.SUPPRESS, requests=command.prog.split()[1] not in NO_REQUESTS)
        _add_debug_flag(command, argparse.SUPPRESS)
    return parser


def _leaves(sub: argparse._SubParsersAction, nested_only: bool = False) -> list[argparse.ArgumentParser]:
    """The parsers that actually run something (`session stop`, not `session`)."""
    out = []
    for command in sub.choices.values():
        inner = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if inner:
            out.extend(_leaves(inner[0]))
        elif not nested_only:
            out.append(command)
    return out


def _add_volume_flags(parser: argparse.ArgumentParser, default: object, requests: bool = True) -> None:
    """-q for every command; -v (log each HTTP request) only for a command that sends requests."""
    if "--quiet" in parser._option_string_actions:
        return  # the command defines these itself
    noise = parser.add_argument_group("output volume").add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="only errors on stderr (no notes, no progress)")
    if requests:
        noise.add_argument("-v", "--verbose", action="store_true", default=default,
                           help="also log each HTTP request (method, path, status, time; never the token)")


def _add_debug_flag(parser: argparse.ArgumentParser, default: object) -> None:
    if "--debug" not in parser._option_string_actions:
        parser.add_argument("--debug", action="store_true", default=default,
                            help="on an unexpected error, print its traceback (by default it is written to a "
                                 "report file under the state directory, and one line names it)")


def _normalise(argv: list[str]) -> list[str]:
    """`kijito-pull --once ...` is `kijito-pull pull --once ...`."""
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        return ["pull", *argv]
    return argv


def main(argv: Sequence[str] | None = None, env: Environment | None = None) -> int:
    env = env or Environment()
    args_list = _normalise(list(sys.argv[1:] if argv is None else argv))
    args: argparse.Namespace | None = None
    try:
        first = args_list[0] if args_list and not args_list[0].startswith("-") else None
        parser = build_parser(env, only=first if first in COMMANDS else None)
        try:
            args = parser.parse_args(args_list)
        except SystemExit as exc:
            return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
        if not getattr(args, "run", None):
            parser.print_help(env.stdout)
            return ExitCode.USAGE
        if getattr(args, "verbose", False):
            _log_requests_to(env)
        kijito_pull.cli.early.restore_interrupts()  # start-up is over: Ctrl-C is a KeyboardInterrupt again
        return int(args.run(args, env))
    except KijitoPullError as exc:  # the one boundary: every error the product anticipates
        env.error(exc.line())
        return exc.exit_code
    except KeyboardInterrupt:
        env.error("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.SOURCE_FAILED
    except Exception as exc:  # noqa: BLE001 - nobody anticipated it: one line and a report, no traceback
        return _unexpected(exc, args, args_list, env)


def _unexpected(exc: Exception, args: argparse.Namespace | None, argv: list[str], env: Environment) -> int:
    """An error no code anticipated: its traceback with --debug, else written to a report (0600, no
    secret in it) that one line names."""
    from kijito_pull.core import crashreport

    secrets = _secrets(args, env)
    what = crashreport.scrub(f"{type(exc).__name__}: {first_line(exc)}", secrets)
    if getattr(args, "debug", False) or "--debug" in argv or env.environ.get("KIJITO_PULL_DEBUG", "") in ("1", "true"):
        env.stderr.write(crashreport.scrub("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
                                           secrets))
        env.error(f"unexpected error ({what}); please report it with the traceback above")
        return ExitCode.SOURCE_FAILED
    from kijito_pull.core.paths import Paths

    where = crashreport.write(Paths(env.environ), exc, argv, secrets)
    env.error(f"unexpected error ({what}); {where}; run again with --debug to see the traceback")
    return ExitCode.SOURCE_FAILED


def _secrets(args: argparse.Namespace | None, env: Environment) -> list[str]:
    """The token and Redis password this command could have seen, so a report never holds them."""
    from kijito_pull.core import config

    found = [env.environ.get(name, "") for name in config.SECRET_ENVS]
    if args is not None:
        from kijito_pull.cli import options

        try:
            found.append(options.settings(args, env).token)
        except Exception:  # noqa: BLE001 - no token to hide, or none that can be read: nothing to add
            pass
    return [s.strip() for s in found if s and s.strip()]


def _log_requests_to(env: Environment) -> None:
    handler = logging.StreamHandler(env.stderr)
    handler.setFormatter(logging.Formatter("kijito-pull: %(message)s"))
    logger = logging.getLogger("kijito_pull")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False


def console() -> int:
    """The console-script entry: like `main`, and quiet when the reader of stdout went away.

    A consumer that closed our stdout has not taken the mail, and the pull already said so and held
    the cursor; Python would otherwise report the unflushed buffer again at exit, with status 120.
    """
    code = main()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = code or ExitCode.SOURCE_FAILED
    return code
