"""`kijito-pull parked`: list poison mail that was parked, and hand one message over again.

A message a consumer refused `--max-attempts` times (an `--exec` command that keeps failing, an events
file that cannot be written, an agent session that never confirms it) is parked: an alert said so, the
cursor moved on so later mail flows, and it is kept here until someone retries it (docs/delivery.md).
Listing reads local files only; `--retry` marks the message so the cursor's next pull hands it over
first (it is fetched from the server by id). With a Redis source (`--source`), the group's dead-letter
stream is listed, and `--retry` puts the message back in that group's pending entries only, so the next
pull of any of its members hands it over (docs/fleets.md).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kijito_pull.cli import options
from kijito_pull.context import Context
from kijito_pull.core import errors
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import SourceFailed
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.core.files import listed
from kijito_pull.core.paths import Paths
from kijito_pull.core.state import StateStore

EPILOG = """\
examples:
  kijito-pull parked                                   every parked message, per persona and consumer
  kijito-pull parked --persona river --json            one JSON object per parked message
  kijito-pull parked --retry 4242 --persona river      hand 4242 over again on river's next pull
  kijito-pull parked --retry 4242 --persona river --consumer daemon
  kijito-pull parked --retry 4242 --persona river --consumer ci --source redis://10.0.0.5:6379/0
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("parked", help="list parked (poison) mail, or hand one message over again",
                            description=__doc__.split("\n\n", 1)[1].strip(), epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--persona", action="append", metavar="NAME",
                        help="only this persona (repeatable); with --retry, the persona whose cursor it is")
    parser.add_argument("--consumer", metavar="NAME", help="only this consumer (with --retry: default agent)")
    parser.add_argument("--retry", type=options.non_negative_int, metavar="ID",
                        help="hand parked message ID over again on the cursor's next pull")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    options.add_connection(parser)
    options.add_source(parser)  # with it: the group's dead-letter stream in Redis
    parser.set_defaults(run=run)


def _rows(env: Environment, personas: list[str] | None, consumer: str | None) -> list[dict[str, Any]]:
    directory = Paths(env.environ).cursors_dir
    rows = []
    for path in listed(directory, "*.json"):
        try:
            store = StateStore.existing(path)
        except SourceFailed:  # not a cursor file that can be read: status names it
            continue
        state = store.load().state
        ident = store.identity
        if state is None or (personas and ident["persona"] not in personas) or (
                consumer and ident["consumer"] != consumer):
            continue
        for message_id, record in state.parked.items():
            rows.append({"persona": ident["persona"], "consumer": ident["consumer"], "api_base": ident["api_base"],
                         "id": message_id, **record})
    return rows


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    settings = options.settings(args, env)
    if args.retry is not None and (not args.persona or len(args.persona) != 1):
        raise errors.UsageError("--retry needs exactly one --persona (whose cursor or stream the message is "
                                "parked on)")
    if settings.source is not None:
        from kijito_pull.cli import fleet

        return fleet.parked(args, env, settings)
    if args.retry is not None:
        return _retry(args, env)
    rows = _rows(env, args.persona, args.consumer)
    if args.json:
        for row in rows:
            env.stdout.write(json.dumps(row) + "\n")
        return ExitCode.OK
    if not rows:
        env.stdout.write("no parked mail\n")
        return ExitCode.OK
    for row in rows:
        again = "; to be handed over again on the next pull" if row["retry"] else ""
        env.stdout.write(f"{row['persona']} / {row['consumer']}: message {row['id']} parked since {row['since']} "
                         f"after {row['attempts']} attempts ({row.get('reason', '')}){again}\n")
    return ExitCode.OK


def _retry(args: argparse.Namespace, env: Environment) -> ExitCode:
    settings = options.settings(args, env)
    persona = settings.personas[0]
    store = Context(settings).store(persona)
    with errors.about(persona):
        with store.locked(5.0):
            state = store.load().state
            record = state.parked.get(args.retry) if state is not None else None
            if record is None:
                env.error(f"message {args.retry} is not parked for {persona} (consumer {settings.consumer}); "
                          f"`kijito-pull parked` lists what is")
                return ExitCode.SOURCE_FAILED
            state.parked[args.retry] = {**record, "retry": True}
            store.save(state)
    env.stdout.write(f"message {args.retry} will be handed over again on {persona}'s next pull "
                     f"(consumer {settings.consumer})\n")
    return ExitCode.OK
