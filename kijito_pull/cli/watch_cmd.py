"""`kijito-pull watch`: the long-running loop behind the pi child, the Claude monitor and the daemon."""

from __future__ import annotations

import argparse
import queue
import signal
import threading
from dataclasses import replace
from pathlib import Path

from kijito_pull.cli import operations, options
from kijito_pull.cli.stopsignals import StopSignals
from kijito_pull.context import Context, Settings
from kijito_pull.core import config, errors, metrics, process
from kijito_pull.core.api import KijitoClient
from kijito_pull.core.engine import DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_REPLAY, DEFAULT_PAGE_BUDGET, Engine
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import SourceFailed
from kijito_pull.core.events import EventFactory
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import Sink
from kijito_pull.core.state import CursorState
from kijito_pull.harnesses.session.optin import INTERRUPT_POLICIES
from kijito_pull.sinks.stdout import NdjsonSink
from kijito_pull.watch.loop import SourceWake, Watcher, WatchOptions

EXAMPLES = """\
examples:
  kijito-pull watch --persona river                       NDJSON events on stdout
  kijito-pull watch --all-personas --events-file-template ~/.local/state/kijito-pull/events/{persona}.ndjson
  kijito-pull watch --persona river --emit exec-per-event --exec 'my-waker'   (KIJITOMON_* variables)
  kijito-pull watch --persona river --format line         one readable line per event
  kijito-pull watch --persona river --self-test           probe and test the sink, then exit 0 or 1
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="watch inboxes and emit one event per new message (long-poll)",
                       description="Watch one, several or all personas' inboxes with one long-poll for the whole "
                                   "account, and emit one event per new message (kijito-inbox-monitor's NDJSON "
                                   "and exec contract). Every message goes through the same cursor as --once.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    who = p.add_argument_group("personas")
    who.add_argument("--persona", action="append", metavar="NAME", help="watch this persona; repeatable")
    who.add_argument("--personas", action="append", metavar="A,B", help="comma-separated personas")
    who.add_argument("--all-personas", action="store_true",
                     help="watch every persona in the account (the default when none is named)")
    who.add_argument("--rediscover-every", type=_positive_int, default=600, metavar="SECONDS",
                     help="re-read the persona directory this often (default 600)")
    options.add_consumer(p)
    options.add_on_reset(p)
    options.add_max_attempts(p)
    options.add_source(p)  # with it: the personas' Redis streams, woken by XREAD BLOCK (watch_source)

    poll = p.add_argument_group("polling")
    poll.add_argument("--wait", type=options.non_negative_int, default=50, metavar="SECONDS",
                      help="long-poll hold asked of notify/pending (default 50; 0 = interval polling); with "
                           "--source, how long one XREAD BLOCK holds (1 at least)")
    poll.add_argument("--poll-seconds", type=_positive_int, default=60, metavar="SECONDS",
                      help="interval when the server does not long-poll (default 60)")
    poll.add_argument("--resync-every", type=_positive_int, default=10, metavar="N",
                      help="read an inbox after at most N mail arrivals that did not raise its count (default 10)")
    poll.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="SECONDS",
                      help=argparse.SUPPRESS)
    poll.add_argument("--page-budget", type=options.non_negative_int, default=DEFAULT_PAGE_BUDGET, metavar="N",
                      help="most backward pages one catch-up walk may read")

    out = p.add_argument_group("output")
    out.add_argument("--emit", choices=("stdout-jsonl", "exec-per-event"), default="stdout-jsonl",
                     help="NDJSON lines (default) or run --exec once per event")
    out.add_argument("--exec", dest="exec_command", metavar="CMD",
                     help="with --emit exec-per-event: shell command run per event with KIJITOMON_* variables; "
                          "its exit status 0 acknowledges the message (10 s timeout)")
    out.add_argument("--format", choices=("json", "line"), default="json",
                     help="stdout format: NDJSON (default) or one readable line per event")
    out.add_argument("--events-file", metavar="PATH", help="append NDJSON to this owned, size-rotated file")
    out.add_argument("--events-file-template", metavar="TPL",
                     help="one events file per persona; TPL contains {persona}")
    out.add_argument("--max-bytes", type=int, default=5_000_000, metavar="N",
                     help="rotate events files at N bytes (default 5000000; <=0 disables)")
    out.add_argument("--keep-logs", type=_positive_int, default=5, metavar="N", help="rotated files kept (5)")
    out.add_argument("--ack-stdin", action="store_true",
                     help="wait for {\"ack\": EVENT_ID} on stdin before acknowledging each message "
                          "(the pi extension's protocol; {\"sweep\": true} pulls at once)")
    # How long --ack-stdin waits for one confirmation before it releases the message (it is offered again
    # later); no lock is held meanwhile, so a long wait delays only what follows in this session.
    out.add_argument("--ack-timeout", type=float, default=300.0, metavar="SECONDS", help=argparse.SUPPRESS)
    out.add_argument("--interrupt", choices=INTERRUPT_POLICIES, metavar="POLICY",
                     help="with --ack-stdin: mark each message deliver_as steer (may reach a busy agent) or "
                          "followUp (waits for the end of its run) by this policy, the project's "
                          "'inbox interrupt:' line (all | urgent | turn-end)")
    out.add_argument("--content-chars", type=options.non_negative_int, default=220, metavar="N",
                     help="clip content in events to N characters (default 220)")
    out.add_argument("--no-content", action="store_true", help="omit message content from events")
    out.add_argument("--suppress-author", action="append", default=[], metavar="NAME",
                     help="acknowledge mail by this author silently (repeatable); the persona's own is always")

    alarm = p.add_argument_group("alarms")
    alarm.add_argument("--alert-after", type=_positive_int, default=3, metavar="N",
                       help="consecutive failures before a source is DOWN (default 3)")
    alarm.add_argument("--heartbeat", type=_positive_int, default=None, metavar="SECONDS",
                       help="emit a heartbeat event every N seconds")
    alarm.add_argument("--no-stranded-alerts", action="store_true",
                       help="silence only the stranded-mail alarm")
    alarm.add_argument("--no-urgent-alerts", action="store_true",
                       help="silence only the unanswered-urgent-mail alarm")
    alarm.add_argument("--urgent-after", type=_positive_int, default=900, metavar="SECONDS",
                       help="urgent mail unread this long raises an alarm (default 900)")

    start = p.add_argument_group("start")
    start.add_argument("--self-test", action="store_true",
                       help="probe the API and emit a synthetic event through the sink, then exit 0 or 1")
    start.add_argument("--seed-at", type=options.non_negative_int, metavar="ID",
                       help="set each persona's cursor to ID (the last message already handled) before starting")
    start.add_argument("--max-replay", type=options.non_negative_int, default=DEFAULT_MAX_REPLAY, metavar="N",
                       help=f"on first contact deliver at most N visible unread (default {DEFAULT_MAX_REPLAY})")
    options.add_connection(p)
    operations.add(p, stale_default="the larger of 180 and 3 x --poll-seconds")
    p.set_defaults(run=run)


def _positive_int(text: str) -> int:
    value = options.non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def requested_personas(args: argparse.Namespace) -> list[str]:
    names = list(args.persona or [])
    for group in args.personas or []:
        names.extend(n.strip() for n in group.split(",") if n.strip())
    seen: set[str] = set()
    out = []
    for name in names:
        config.validate_persona(name)
        if name.casefold() not in seen:  # case-insensitive dedupe, first spelling kept for the wire
            seen.add(name.casefold())
            out.append(name)
    return out


def build_sink(args: argparse.Namespace, env: Environment, loop: queue.Queue) -> Sink:
    if args.events_file and args.events_file_template:
        raise config.ConfigError("--events-file and --events-file-template are mutually exclusive")
    if args.emit == "exec-per-event":
        if not args.exec_command:
            raise config.ConfigError("--emit exec-per-event needs --exec CMD")
        from kijito_pull.sinks.exec import ExecSink
        return ExecSink(args.exec_command, env.environ, stderr=env.stderr)
    if args.exec_command:
        raise config.ConfigError("--exec needs --emit exec-per-event")
    if args.interrupt and not args.ack_stdin:
        raise config.ConfigError("--interrupt needs --ack-stdin")
    if args.ack_stdin:
        from kijito_pull.harnesses.pi.acksink import AckSink, StdinCommands

        commands = StdinCommands(env.stdin, loop, env.stderr)
        commands.start()
        sink = AckSink(env.stdout, commands, timeout=args.ack_timeout, errors=env.stderr, interrupt=args.interrupt)
        # The controller (pi) confirms each message itself: a pending hand-over held by this process,
        # claimed back at once if it dies, and never waited for under the cursor's lock.
        me = process.me()
        sink.holder = Holder(f"ack-stdin:{me.pid}", me.pid, me.start, ttl=args.ack_timeout + 60)
        return sink
    if args.events_file or args.events_file_template:
        from kijito_pull.sinks.eventsfile import EventsFileSink, template_path
        if args.events_file_template:
            template = args.events_file_template
            if "{persona}" not in template:
                raise config.ConfigError("--events-file-template must contain {persona}")
            return EventsFileSink(lambda persona: template_path(template, persona), args.max_bytes, args.keep_logs)
        fixed = Path(args.events_file).expanduser()
        return EventsFileSink(lambda persona: fixed, args.max_bytes, args.keep_logs)
    if args.format == "line":
        from kijito_pull.sinks.lines import LineSink
        return LineSink(env.stdout)
    return NdjsonSink(env.stdout)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    personas = requested_personas(args)
    all_personas = args.all_personas or not personas
    settings = Settings(env.environ, replace(options.flags(args), personas=()))  # watch's own persona rules
    consumer, _ = settings.consumer, settings.source or settings.connection()  # checked before anything starts
    if settings.source is not None and not personas:
        raise config.ConfigError("watch --source needs --persona (or --personas): a Redis source has no persona "
                                 "directory")
    loop: queue.Queue = queue.Queue()
    sink = build_sink(args, env, loop)
    stale_after = max(180.0, 3.0 * args.poll_seconds)
    if settings.source is not None:
        stop = threading.Event()
        with StopSignals(stop, _hangups(sink)):
            ops = (metrics.Metrics("watch", "watch (Redis)", float("inf")) if args.self_test
                   else operations.start(args, env, "watch", "watch (Redis)", stale_after))
            own = Settings(env.environ, replace(options.flags(args), personas=tuple(personas)))
            return watch_source(args, env, own, personas, sink, stop, loop, ops)
    ctx = Context(settings)
    client, notify_client, factory = ctx.client, ctx.new_client(), ctx.factory

    def make_engine(persona: str) -> Engine:
        return ctx.engine(persona, max_replay=args.max_replay, page_budget=args.page_budget,
                          lock_timeout=args.lock_timeout, suppress_authors=args.suppress_author)

    if args.self_test:
        if all_personas and not personas:
            with errors.about("self-test: cannot list the account's personas"):
                personas = [p.persona for p in client.personas()]
        return self_test(client, personas, sink, factory, env)

    stop = threading.Event()
    with StopSignals(stop, _hangups(sink)) as signals:  # first: a stop while seeding is a clean stop too
        ops = operations.start(args, env, "watch", "watch", stale_after)
        watch_options = WatchOptions(
            consumer=consumer, wait=args.wait, poll_seconds=args.poll_seconds, resync_every=args.resync_every,
            rediscover_every=args.rediscover_every, all_personas=all_personas, alert_after=args.alert_after,
            heartbeat=args.heartbeat, stranded_alerts=not args.no_stranded_alerts,
            urgent_alerts=not args.no_urgent_alerts, urgent_after=args.urgent_after,
            content_chars=None if args.no_content else args.content_chars, no_content=args.no_content,
            cursors_dir=settings.paths.cursors_dir)
        watcher = Watcher(client=client, notify_client=notify_client, make_engine=make_engine, sink=sink,
                          factory=factory, options=watch_options, personas=personas, stop=stop, loop=loop,
                          errors=env.stderr, ops=ops)
        if args.seed_at is not None:
            for target in watcher.targets.values():
                with errors.about(f"{target.name}: cannot seed the cursor"):
                    seed(target.engine, args.seed_at, watcher)
        code = operations.run_watcher(watcher, ops, env)
        if code != ExitCode.OK:
            return code
    ctx.close()
    if signals.received == signal.SIGINT:  # Ctrl-C: 130, as for every command; SIGTERM is a clean stop, 0
        env.error("interrupted")
        return ExitCode.INTERRUPTED
    return ExitCode.OK


def watch_source(args: argparse.Namespace, env: Environment, settings: Settings, personas: list[str], sink: Sink,
                 stop: threading.Event, loop: queue.Queue, ops: metrics.Metrics) -> ExitCode:
    """`watch --source redis://...`: the watch loop (watch/loop.py) over each persona's consumer group, woken
    by their streams' wake (sources/redis_wake.py: one XREAD BLOCK over them all, on a connection of its
    own) and sweeping every --poll-seconds (entries given back or claimed back wake nobody). Kijito is sent
    nothing (docs/fleets.md). `personas` is not empty (`run` checked)."""
    from kijito_pull.sources import redis_streams, redis_wake

    # The hold is --wait (1 s at least), and within --stale-after, so the idle loop's answers keep the
    # health and systemd's watchdog fed.
    hold = max(1.0, min(float(args.wait), ops.stale_after / 2))
    with Context(settings) as ctx:
        sources = {p: ctx.redis_source(p) for p in personas}
        first = sources[personas[0]]
        waker = redis_streams.connect(settings.redis_url(settings.source), timeout=hold + 5)
        try:
            wake = redis_wake.several(sources.values(), hold, waker)

            def after_pull(persona: str, source: redis_streams.RedisSource) -> None:
                if ops.serving:
                    ops.groups(persona, source.lag())

            watcher = Watcher(
                client=None, notify_client=None, make_engine=sources.__getitem__, sink=sink, factory=ctx.factory,
                personas=personas, stop=stop, loop=loop, errors=env.stderr, ops=ops,
                options=WatchOptions(consumer=settings.consumer, poll_seconds=args.poll_seconds,
                                     heartbeat=args.heartbeat, stranded_alerts=False, urgent_alerts=False,
                                     content_chars=None if args.no_content else args.content_chars,
                                     no_content=args.no_content),
                source_wake=SourceWake(wake, "redis", {"redis": first.where}, after_pull))
            return operations.run_watcher(watcher, ops, env)
        finally:
            waker.close()


def seed(engine: Engine, seed_at: int, watcher: Watcher) -> None:
    """--seed-at: the cursor becomes ID (overriding any state); a seed above the newest mail is announced."""
    newest = engine.client.inbox(engine.persona).newest_id
    with engine.store.locked(engine.lock_timeout):
        engine.store.save(CursorState(cursor=seed_at))
    if newest is not None and seed_at > newest:
        watcher.emit("seed_ahead", engine.persona, seeded=seed_at, current_max=newest)


def self_test(client: KijitoClient, personas: list[str], sink: Sink, factory: EventFactory,
              env: Environment) -> ExitCode:
    """Probe everything a running watch depends on, then push one synthetic event through the real sink."""
    failures = []
    try:
        client.notify_pending()
    except SourceFailed as exc:  # each probe's failure is listed; the others are still tried
        if getattr(exc, "status", None) != 404:
            failures.append(f"notify/pending: {exc}")
    for persona in personas:
        try:
            client.inbox(persona, limit=1)
        except SourceFailed as exc:
            failures.append(f"{persona}: {exc}")
    event = factory.signal("heartbeat", personas[0] if personas else "*", self_test=True,
                           api_base=client.api_base)
    if not sink.deliver(event, None):  # type: ignore[arg-type]
        failures.append("the configured sink did not take the synthetic event")
    for failure in failures:
        env.error(f"self-test: {failure}")
    if not failures:
        noun = "persona" if len(personas) == 1 else "personas"
        env.stderr.write(f"kijito-pull: self-test passed ({len(personas)} {noun}, {client.api_base})\n")
    return ExitCode.SOURCE_FAILED if failures else ExitCode.OK


def _hangups(sink: Sink) -> dict:
    """SIGHUP reopens an events file (after external rotation), where the sink writes one; for any
    other sink it is ignored (a watch outlives the terminal that started it)."""
    reopen = getattr(sink, "reopen", None) or (lambda: None)
    return {signal.SIGHUP: reopen} if hasattr(signal, "SIGHUP") else {}
