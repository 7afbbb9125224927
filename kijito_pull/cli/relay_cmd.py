"""`kijito-pull relay --redis URL`: read Kijito with the engine and append each persona's mail to its stream.

When to read is the watch loop's business (watch/loop.py's `Watcher`, as `watch` runs it): one
account-wide `notify/pending` long-poll wakes it, and a persona is pulled only when its unread count
rose, on a resync, or when it appears in the directory, so an idle relay costs Kijito about one request
a minute however many personas it serves. Each pull hands the unseen messages, through the embedded
engine (its own cursor, consumer `relay` by default), to a sink that appends each one to
`kijito:{persona}:mail` with `sources.redis_scripts.APPEND_LUA`, keyed by the Kijito id, so several
relays against one Redis and account append each message once, a late-visible id is still taken, and
the engine's cursor moves past a message only once Redis has it (a killed relay loses nothing). Every
`--interval` a guard thread checks, in Redis alone and in one round trip (sources/redis_tail.py), that
Redis still holds what this relay appended; what it lost (a restart that lost its tail) is read again from Kijito
by id and appended again. Runs until SIGTERM or SIGINT, then exits 0. Redis unreachable at start: exit 1
with one line; a failure later is one line and is retried (nothing was acknowledged past what Redis
holds). docs/fleets.md.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from typing import IO

from kijito_pull.cli import operations, options
from kijito_pull.cli.stopsignals import StopSignals
from kijito_pull.context import Context, refuse_password_in_argv
from kijito_pull.core import config, metrics, render
from kijito_pull.core.api import KijitoClient
from kijito_pull.core.config import ConfigError
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import SourceFailed
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.core.models import ApiError, Message, message_at
from kijito_pull.core.sink import Sink
from kijito_pull.sources import redis_streams
from kijito_pull.sources.redis_tail import TailCheck
from kijito_pull.watch.loop import Watcher, WatchOptions

DESCRIPTION = """\
Append each persona's Kijito mail to its Redis stream (kijito:{persona}:mail), for the consumers that
read it with --source redis://... --consumer GROUP (docs/fleets.md).

Kijito's notify/pending long-poll wakes the relay, and it reads a persona's inbox only when that persona
has new mail, so an idle relay costs about one request a minute however many personas it serves. A
message counts as relayed only once Redis holds it: a killed relay loses nothing, and several relays
against one Redis and account append each message once. Every --interval it checks that Redis still
holds what it appended, and reads again from Kijito what a Redis restart lost.

Runs until SIGTERM or SIGINT, then exits 0. Redis unreachable at the start: exit 1 with one line (no
request to Kijito); no --redis or a wrong scheme: exit 2."""
DEFAULT_INTERVAL = 2.0
RELAY_CONSUMER = config.RELAY_CONSUMER
#: A relay's first contact carries the unread mail into the stream (each group then reads it from there): far
#: more than an agent's 50, since the relay's own events (replay_capped) reach no one who could act on them.
RELAY_MAX_REPLAY = 10_000


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "relay", help="append each persona's Kijito mail to a Redis stream (fleets; docs/fleets.md)",
        description=DESCRIPTION,
        epilog="examples:\n  kijito-pull relay --redis redis://10.0.0.5:6379/0 --persona river --persona argus\n"
               "  kijito-pull relay --redis redis://10.0.0.5:6379/0          # every persona of the account",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis", metavar="URL", help="redis://HOST:PORT/DB to append to (required; no password "
                                                       "in it: see --redis-password-file)")
    options.add_redis_password(parser)
    parser.add_argument("--interval", type=options.positive_float, default=DEFAULT_INTERVAL, metavar="SECONDS",
                        help=f"seconds between checks that Redis still holds what was appended, and "
                             f"between refreshes of the group metrics (default {DEFAULT_INTERVAL:g}); "
                             f"new mail is taken as soon as Kijito announces it")
    parser.add_argument("--wait", type=options.non_negative_int, default=50, metavar="SECONDS",
                        help="seconds each notify/pending long-poll asks Kijito to hold (default 50; 0: "
                             "short polls every --poll-seconds)")
    parser.add_argument("--poll-seconds", type=options.positive_float, default=60.0, metavar="SECONDS",
                        help="seconds between polls when the server does not long-poll (default 60)")
    options.add_personas(parser)
    parser.add_argument("--max-replay", type=options.non_negative_int, default=RELAY_MAX_REPLAY, metavar="N",
                        help=f"at a persona's first contact, how many of its unread messages go into the stream "
                             f"(default {RELAY_MAX_REPLAY}; older unread mail beyond it is left at Kijito and said "
                             f"on stderr)")
    parser.add_argument("--consumer", metavar="NAME", default=RELAY_CONSUMER,
                        help=f"the relay's own Kijito cursor (default {RELAY_CONSUMER!r})")
    options.add_connection(parser)
    operations.add(parser, stale_default="the larger of 60 and 5 x --interval")
    parser.set_defaults(run=run)



class StreamSink(Sink):
    """Takes a message once Redis holds it (appended now or by another relay before), and notes it in
    `tail`, so a Redis that lost its tail is noticed (`tail.lost()`) and refilled (`recover`). The diagnostics
    that say mail was not carried, or a cursor is in trouble (`SAID`), go to `notes` as one sentence each: a
    relay has no reader of its events, and mail it left at Kijito must not pass in silence."""

    SAID = frozenset({"alert", "recovered", "replay_capped", "baseline_skipped", "state_corrupt", "seed_ahead"})

    def __init__(self, appender: redis_streams.Appender, tail: TailCheck, ops: metrics.Metrics | None = None,
                 notes: IO[str] | None = None):
        self.appender = appender
        self.tail = tail
        self.ops = ops
        self.notes = notes
        self.appended = 0
        self.redis_error: SourceFailed | None = None  # the last failure that came from Redis (not from Kijito)

    def via_redis(self, call, *args):  # noqa: ANN001, ANN202
        """call(*args), noting that a failure it raised (an ApiError) came from Redis."""
        try:
            return call(*args)
        except SourceFailed as exc:
            self.redis_error = exc
            raise

    def signal(self, event: dict) -> None:
        if self.notes is not None and event.get("event") in self.SAID:
            with contextlib.suppress(OSError, ValueError):
                self.notes.write(f"kijito-pull: relay: {render.sentence(event)}\n")
                self.notes.flush()

    def blames(self, exc: ApiError) -> str:
        return "redis" if exc is self.redis_error else "kijito"

    def deliver(self, event: dict, message: Message) -> bool:
        if self.via_redis(self.appender.append, event["persona"], message):  # ApiError stops the pass
            self.appended += 1
            if self.ops is not None:
                self.ops.relayed(event["persona"])
        self.tail.held(event["persona"], message.id)
        return True

    def recover(self, persona: str, lost: list[int], client: KijitoClient, env: Environment) -> None:
        """Re-read from Kijito, by id, what Redis held and lost; append it again (once, in id order). On an
        ApiError the ids are looked at again at the next check."""
        env.error(f"{persona}: Redis lost {len(lost)} appended message(s) (a restart that lost its tail?); "
                  f"re-reading them from Kijito")
        try:
            for kid in lost:
                message = message_at(client, persona, kid)
                if message is None:
                    env.error(f"{persona}: message {kid} is gone from Kijito too; it cannot be appended again")
                    self.tail.forget(persona, kid)
                    continue
                self.via_redis(self.appender.append, persona, message)
                self.tail.held(persona, kid)
        except SourceFailed:  # looked at again at the next check
            self.tail.recheck(persona, lost)
            raise


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    if not args.redis:
        raise ConfigError("relay needs --redis redis://HOST:PORT/DB")
    refuse_password_in_argv(args.redis, "--redis")
    settings = options.settings(args, env)
    stop = threading.Event()
    with StopSignals(stop):  # first: a stop during the connect below is a clean stop too
        try:
            url = redis_streams.check_url(args.redis)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        client = redis_streams.connect(settings.redis_url(url))  # MissingExtra without the redis package
        try:
            return _relay(args, env, settings, client, stop)
        finally:
            client.close()


def _relay(args: argparse.Namespace, env: Environment, settings, client, stop: threading.Event) -> ExitCode:  # noqa: ANN001
    """Check Redis, then run the watch loop with the stream sink (and the guard beside it) until `stop`."""
    where = redis_streams.safe_url(args.redis)
    settings.connection()  # checked before any request
    try:
        with redis_streams.failures(where):
            client.ping()
    except SourceFailed as exc:
        if stop.is_set():
            return ExitCode.OK  # stopped while Redis was being reached: a clean stop
        exc.within(outcome="nothing was relayed")
        raise
    ops = operations.start(args, env, "relay", f"relay to {where}", max(180.0, 5 * args.interval))
    sink = StreamSink(redis_streams.Appender(client, where), TailCheck(client, where, args.interval), ops,
                      notes=env.stderr)
    with Context(settings) as ctx:
        watcher = Watcher(
            client=ctx.client, notify_client=ctx.new_client(), factory=ctx.factory, sink=sink, stop=stop,
            make_engine=lambda persona: ctx.engine(persona, reads_for_model=False,  # never a receipt
                                                   max_replay=args.max_replay),
            personas=settings.personas if args.persona else (),
            options=WatchOptions(consumer=settings.consumer, wait=args.wait, poll_seconds=args.poll_seconds,
                                 all_personas=not args.persona, stranded_alerts=False, urgent_alerts=False),
            errors=env.stderr, ops=ops)
        guard = threading.Thread(target=_guard, args=(watcher, sink, client, ctx, where, args.interval, env),
                                 name="relay-guard", daemon=True)
        return operations.run_watcher(watcher, ops, env, beside=guard)


def _guard(watcher: Watcher, sink: StreamSink, client, ctx: Context, where: str, interval: float,  # noqa: ANN001
           env: Environment) -> None:
    """Every `interval`: does Redis still hold what was appended (one round trip in Redis alone while it
    does: sources/redis_tail.py), refilled from Kijito where not, under the watch loop's lock, so the loop
    and the refill never append at once; and, with metrics on, each persona's group lag. A success here
    says Redis answers; the relay is healthy only while Kijito's long-poll answers too."""
    while not watcher.stop.wait(interval):
        try:
            lost = sink.via_redis(sink.tail.lost)
        except SourceFailed as exc:  # one line a check, however many personas; checked again
            watcher.ops.failed(sink.blames(exc), exc)
            env.error(f"{exc}; checked again in {interval:g} s (nothing passed that Redis lacks)")
            continue
        healthy = True
        for persona, kids in lost.items():
            if watcher.stop.is_set():
                return
            try:
                with watcher.busy:  # the loop appends only under this lock too
                    sink.recover(persona, kids, ctx.client, env)
            except SourceFailed as exc:
                healthy = False
                watcher.ops.failed(sink.blames(exc), exc)
                env.error(f"{persona}: {exc}; tried again in {interval:g} s (nothing passed that Redis lacks)")
        if watcher.ops.serving:
            with watcher.busy:
                personas = [t.name for t in watcher.targets.values()]
            try:
                for persona in personas:
                    if watcher.stop.is_set():
                        return
                    watcher.ops.groups(persona, sink.via_redis(_groups, client, ctx, persona, where))
            except SourceFailed as exc:
                healthy = False
                watcher.ops.failed(sink.blames(exc), exc)
                env.error(f"{exc}; the group metrics are read again in {interval:g} s")
        if healthy and not watcher.notify_health.failures:
            watcher.ops.succeeded()


def _groups(client, ctx: Context, persona: str, where: str) -> list[dict]:  # noqa: ANN001
    """Each consumer group of the persona's stream, its lag and pending count (for the metrics)."""
    return redis_streams.RedisSource(client, ctx.factory, persona=persona, consumer=RELAY_CONSUMER,
                                     where=where).lag()


