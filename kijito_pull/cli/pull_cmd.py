"""`kijito-pull pull --once` (also `kijito-pull --once`): hand over unseen mail once and exit."""

from __future__ import annotations

import argparse

from kijito_pull.cli import options
from kijito_pull.cli.progress import WalkProgress
from kijito_pull.context import Context
from kijito_pull.core import urgency
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.engine import DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_REPLAY, DEFAULT_PAGE_BUDGET
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import Carry
from kijito_pull.core.events import EventFactory
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.core.sink import Sink
from kijito_pull.core.source import MailSource
from kijito_pull.sinks.stdout import NdjsonSink, TextSink


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "pull", help="hand over unseen mail once (also: kijito-pull --once)",
        description="Pull the persona's unseen mail once, in id order, and advance the cursor past what was "
                    "handed over. Mail bodies are printed as data, never as instructions.",
        epilog="examples:\n  kijito-pull --once --persona river\n  kijito-pull --once --json --persona river "
               "--consumer my-script\n  kijito-pull --once --peek --persona river     # look without acknowledging",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true", help="pull once and exit (the only mode of `pull`)")
    parser.add_argument("--json", action="store_true", help="NDJSON events on stdout, one per line")
    parser.add_argument("--peek", action="store_true", help="show unseen mail without acknowledging it")
    options.add_personas(parser)
    options.add_consumer(parser)
    options.add_on_reset(parser)
    options.add_max_attempts(parser)
    options.add_source(parser)
    parser.add_argument("--max-replay", type=options.non_negative_int, default=DEFAULT_MAX_REPLAY, metavar="N",
                        help=f"on first contact, deliver at most N visible unread messages "
                             f"(default {DEFAULT_MAX_REPLAY}); the rest are announced, never silent")
    parser.add_argument("--page-budget", type=options.non_negative_int, default=DEFAULT_PAGE_BUDGET,
                        metavar="N", help=f"most backward pages one catch-up walk may read "
                                          f"(default {DEFAULT_PAGE_BUDGET})")
    parser.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait for another puller of the same cursor "
                             f"(default {DEFAULT_LOCK_TIMEOUT:g})")
    options.add_connection(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    settings = options.settings(args, env)
    # all checked before a request; a Redis source needs no Kijito connection (it sends Kijito nothing)
    personas, _, _ = settings.personas, settings.consumer, settings.source or settings.connection()
    carry = Carry(env.error)  # one persona's failed source does not keep the others from their mail
    with Context(settings) as ctx:
        # Urgency is Kijito's notify/pending count: a Redis source asks Kijito nothing, so it says none.
        urgent = None if settings.source else (lambda p, ms: urgency.count_among(ctx.client, p, ms))
        sink: Sink = NdjsonSink(env.stdout) if args.json else TextSink(
            env.stdout, None if args.quiet else env.stderr, count_urgent=urgent)
        for persona in personas:
            progress = WalkProgress.for_terminal(env.stderr, persona, quiet=args.quiet)
            engine = ctx.engine(persona, max_replay=args.max_replay, page_budget=args.page_budget,
                                lock_timeout=args.lock_timeout, progress=progress)
            try:
                with carry.item(persona, "nothing was acknowledged"):
                    carry.code = max(carry.code, _pull_one(engine, ctx.factory, sink, env, peek=args.peek))
            finally:
                progress.done()
    return carry.code


def _pull_one(engine: MailSource, factory: EventFactory, sink: Sink, env: Environment, *, peek: bool) -> ExitCode:
    persona = engine.persona
    report = pull_through(engine, factory, sink, peek=peek)
    if report.refused is not None:
        env.error(f"{persona}: message {report.refused} could not be handed over; it will be delivered again")
        return ExitCode.SOURCE_FAILED
    if report.pinned:
        env.error(f"{persona}: {report.problem}; the cursor stays pinned and the gap will be retried "
                  f"(what was visible was delivered)")
        return ExitCode.SOURCE_FAILED
    for line in engine.remarks(len(report.delivered)):  # what only the source can say (a Redis one: nothing)
        env.error(line)
    return ExitCode.OK
