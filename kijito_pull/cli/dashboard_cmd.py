"""`kijito-pull dashboard`: a read-only live web page of every persona's mail (kijito_pull/dashboard/).

Wires the board to its feeds (one Kijito long-poll, this machine's cursor files, Redis when a source is
set) and serves it on loopback; the first line on stdout is the page's address with its access key.
"""

from __future__ import annotations

import argparse
import threading

from kijito_pull.cli import options
from kijito_pull.cli.stopsignals import StopSignals
from kijito_pull.context import Context
from kijito_pull.core import config, overview
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import UsageError
from kijito_pull.core.exitcodes import ExitCode

LOOPBACK = "127.0.0.1"

DESCRIPTION = """\
Serve a read-only web page that shows, live, every persona of the account: its unread mail at Kijito,
this machine's cursors (as `kijito-pull status --json` prints them), hand-overs to agent sessions not
yet confirmed (session, harness, age), confirmations in the last hour, parked mail, the wake latency
of the last deliveries and, with --source, each Redis consumer group's lag and pending entries and how
far the relay is behind.

The first line on stdout is the page's address, with a random access key as ?key=... (open it in a
browser; a request without the key is refused with 403). The page updates itself (server-sent events)
the moment something changes, and the whole page costs Kijito ONE notify/pending long-poll however
many browsers show it: the same as one `kijito-pull watch`. The Kijito token never reaches the page.
When Kijito or Redis cannot be reached the page says so and keeps showing this machine's state.

It listens on 127.0.0.1 (a free port unless --port) and only there, unless --host is given. Runs until
SIGTERM or SIGINT (Ctrl-C), then exits 0."""

EPILOG = """\
examples:
  kijito-pull dashboard                          # every persona; open the printed address
  kijito-pull dashboard --persona river --port 8765
  kijito-pull dashboard --source redis://10.0.0.5:6379/0 --persona river
  kijito-pull dashboard --host 0.0.0.0           # every interface: anyone with the address sees the page"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("dashboard", help="a read-only live web page of every persona's mail (loopback)",
                            description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=options.non_negative_int, default=0, metavar="PORT",
                        help="port to listen on (default: a free one)")
    parser.add_argument("--host", default=None, metavar="ADDRESS",
                        help=f"address to listen on (default {LOOPBACK}, this machine only); any other address "
                             f"lets whoever reaches it and has the printed address see the page")
    parser.add_argument("--persona", action="append", metavar="NAME",
                        help="show only this persona; repeatable (default: every persona of the account and "
                             "of this machine's cursors)")
    parser.add_argument("--consumer", metavar="NAME", default=None,
                        help="show only this consumer's cursors (default: every consumer)")
    parser.add_argument("--wait", type=options.non_negative_int, default=50, metavar="SECONDS",
                        help="seconds each notify/pending long-poll asks Kijito to hold (default 50, as watch)")
    parser.add_argument("--poll-seconds", type=options.positive_float, default=60.0, metavar="SECONDS",
                        help="seconds between polls when the server does not long-poll (default 60)")
    options.add_source(parser)
    options.add_connection(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    from kijito_pull.dashboard.board import Board
    from kijito_pull.dashboard.feeds import Feeds
    from kijito_pull.dashboard.server import DashboardServer, make_key

    settings = options.settings(args, env)
    for name in args.persona or ():
        config.validate_persona(name)
    if args.consumer is not None:
        config.validate_consumer(args.consumer)
    settings.connection()  # checked before any request: exit 2
    source = settings.source
    stop = threading.Event()
    with StopSignals(stop), Context(settings, attempts=1) as ctx:
        groups = top = None
        where = None
        if source is not None:
            from kijito_pull.sources import redis_streams

            where = redis_streams.safe_url(source)

            def groups(persona: str) -> list[dict]:
                return overview.group_rows(persona, ctx.redis_source(persona))

            def top(persona: str) -> str:
                return ctx.redis_source(persona).top()

        board = Board(settings.api_base, args.persona, args.consumer, where)
        host = args.host if args.host is not None else LOOPBACK
        try:
            server = DashboardServer((host, args.port), board, key := make_key())
        except OSError as exc:  # exit 2 at the one boundary (cli/main.py)
            failure = UsageError(f"cannot listen on {host}:{args.port} ({exc.strerror or exc})")
            raise failure.within("dashboard") from None
        bound_host, port = server.server_address[:2]
        shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        env.stdout.write(f"http://{shown}:{port}/?key={key}\n")
        env.stdout.flush()
        if args.host is not None:
            env.error(f"dashboard: listening on {host}:{port}, as --host asked: anyone who can reach that address "
                      f"and has the printed key sees every persona's unread counts, cursors and sessions")
        feeds = Feeds(board, client=ctx.client, notify_client=ctx.new_client(), cursor_dir=settings.paths.cursors_dir,
                      stop=stop, wait=args.wait, poll_seconds=args.poll_seconds, groups=groups, top=top)
        feeds.start()
        serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                   name="dashboard-http", daemon=True)
        serving.start()
        try:
            while not stop.wait(1.0):
                pass
        finally:
            server.close()
    return ExitCode.OK

