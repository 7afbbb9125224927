"""`kijito-pull sandbox`: serve a Kijito-compatible API on 127.0.0.1 until SIGINT/SIGTERM.

For trying kijito-pull without an account, local development, and tests in other processes. The
token is a local sandbox secret (random unless given), so printing it is fine.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import sqlite3
import sys
import threading
from collections.abc import Sequence

from kijito_pull.cli.stopsignals import StopSignals
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import UsageError
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.sandbox import Sandbox


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=_port, default=0, metavar="N",
                        help="port on 127.0.0.1 (default 0: pick a free one and print it)")
    parser.add_argument("--token", metavar="T",
                        help="token clients must send (default: a random one, printed)")
    parser.add_argument("--db", metavar="PATH",
                        help="SQLite file to keep mail in (default: in memory, gone on exit)")
    parser.add_argument("--limit", type=_positive, default=20, metavar="N",
                        help="rows per inbox window (default 20)")
    parser.add_argument("--budget", type=_positive, default=65536, metavar="BYTES",
                        help="content bytes per inbox window (default 65536)")
    parser.add_argument("--auth-header", metavar="NAME",
                        help="expect the raw token in this header instead of 'Authorization: Bearer'")
    parser.add_argument("--json", action="store_true",
                        help='print one JSON object {"url", "token", "db"} instead of the instructions')


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sandbox", help="serve a local Kijito-compatible API (no account needed)",
        description="Serve a Kijito-compatible API on 127.0.0.1, backed by SQLite, with the real inbox "
                    "window rules, long-poll notify/pending and a persona directory. Runs until "
                    "Ctrl-C or SIGTERM.",
        epilog="examples:\n  kijito-pull sandbox"
               "\n  kijito-pull sandbox --port 8765 --token dev --db /tmp/kijito.db"
               "\n  kijito-pull sandbox --json --limit 5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    parser.set_defaults(run=run)


def _instructions(sb: Sandbox, args: argparse.Namespace) -> str:
    url, token = sb.url, sb.token
    auth = f"{args.auth_header}: {token}" if args.auth_header else f"Authorization: Bearer {token}"
    db = args.db or "in memory (discarded on exit)"
    body = json.dumps({"to": "river", "content": "hello from the sandbox"})
    return "\n".join([
        f"Kijito sandbox listening on {url}",
        f"  token:    {token}",
        f"  database: {db}",
        f"  window:   {args.limit} rows / {args.budget} bytes of content per inbox page",
        "",
        "Use it from another shell:",
        f"  export KIJITO_BASE={shlex.quote(url)}",
        f"  export KIJITOMON_TOKEN={shlex.quote(token)}",
        f"  curl -s -H {shlex.quote(auth)} -d {shlex.quote(body)} {url}/api/send",
        "  kijito-pull --once --persona river",
        "",
        "Ctrl-C stops it.",
        "",
    ])


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    token = args.token if args.token is not None else secrets.token_urlsafe(24)
    if not token.strip():
        raise UsageError("--token must not be empty")
    stop = getattr(args, "stop_event", None) or threading.Event()
    with StopSignals(stop):
        try:
            sb = Sandbox(token=token, db_path=args.db, port=args.port, window_limit=args.limit,
                         content_budget=args.budget, auth_header=args.auth_header)
        except (sqlite3.Error, ValueError) as exc:
            raise UsageError(f"cannot open the sandbox database {args.db!r}: {exc}") from None
        try:
            sb.start()
        except OSError as exc:
            sb.stop()
            raise UsageError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
        try:
            if args.json:
                env.stdout.write(json.dumps({"url": sb.url, "token": sb.token, "db": args.db}) + "\n")
            else:
                env.stdout.write(_instructions(sb, args))
            env.stdout.flush()
            while not stop.wait(0.5):
                pass
        finally:
            sb.stop()
    if not args.json:
        env.stderr.write("Kijito sandbox stopped.\n")
        env.stderr.flush()
    return ExitCode.OK


def main(argv: Sequence[str] | None = None, env: Environment | None = None) -> int:
    """Run the command on its own: `python3 -m kijito_pull.cli.sandbox_cmd [options]`, through the CLI's one
    error boundary (cli/main.py), as `kijito-pull sandbox [options]`."""
    from kijito_pull.cli.main import main as cli_main

    return cli_main(["sandbox", *(sys.argv[1:] if argv is None else argv)], env)


if __name__ == "__main__":
    raise SystemExit(main())
