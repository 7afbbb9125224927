"""`kijito-pull track ID --persona P`: what is known of one message's journey (core/journey.py).

Kijito's read flag (one request that marks nothing), this machine's cursors of P (taken, handed over to
which session and harness, since when, confirmed when, parked), and with a Redis source each consumer
group's view (not relayed, pending with which member, acknowledged when, parked). `gather` is shared with
`send --wait` (cli/send_cmd.py).
"""

from __future__ import annotations

import argparse
import json

from kijito_pull.cli import options
from kijito_pull.context import Context
from kijito_pull.core import config, journey
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import SourceFailed
from kijito_pull.core.exitcodes import ExitCode

EPILOG = """\
states, least to furthest: unread (at Kijito), waiting (a cursor here has not reached it), taken (a
script's cursor moved past it), given_back (handed over, never confirmed, unseen again), handed_over
(pending with an agent session: harness:session), parked, confirmed (the harness's record showed the
model has it), acknowledged (Redis: the group's XACK), seen (read at Kijito: the receipt, when the
recipient emits them; docs/delivery.md, "Read receipts").

examples:
  kijito-pull track 42 --persona river
  kijito-pull track 42 --persona river --json
  kijito-pull track 42 --persona river --source redis://fleet:6379/0 --consumer agent
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("track", help="what is known of one message: read, taken, handed over, confirmed",
                            description="What is known of message ID of persona P: read or unread at Kijito, "
                                        "taken by which consumer, handed over to which agent session and harness, "
                                        "since when, confirmed when, parked; from this machine's cursor files, and "
                                        "from Redis when a source is set. Read-only: nothing is marked read.",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("id", type=options.non_negative_int, metavar="ID", help="the message id")
    parser.add_argument("--json", action="store_true", help="one JSON object: state, receipts and every step")
    parser.add_argument("--consumer", metavar="NAME", default=None,
                        help="only this consumer's cursor (or Redis group); default: all of them")
    options.add_personas(parser, many=False)
    options.add_connection(parser)
    options.add_source(parser)
    parser.set_defaults(run=run)


class Tracker:
    """Gathers one message's journey again and again (send --wait asks every second): the cursor files of
    the persona are found once and again every `rescan` calls, so a poll reads only those."""

    def __init__(self, ctx: Context, persona: str, ident: int, consumer: str | None = None, rescan: int = 10):
        self.ctx, self.persona, self.ident, self.consumer = ctx, persona, ident, consumer
        self.rescan = rescan
        self.calls = 0
        self.found: list[journey.Cursor] = []
        self.problem: str | None = None  # why the last look at Kijito or Redis failed

    def _cursors(self) -> list[journey.Cursor]:
        if self.calls % self.rescan == 0:
            s = self.ctx.settings
            self.found = [c for c in journey.cursors(s.paths.cursors_dir, s.api_base, self.persona)
                          if self.consumer in (None, c.consumer)]
        self.calls += 1
        return self.found

    def receipts(self) -> journey.Receipts:
        """Whether the persona emits receipts, as far as this machine can tell (core/journey.py)."""
        s = self.ctx.settings
        if s.source is not None:
            group = self.consumer or s.consumer
            groups = self._redis_groups()
            if group in groups:
                return journey.Receipts(True, f"group {group} of {self.persona}'s stream acknowledges what its "
                                              f"members confirm: that acknowledgement is the receipt")
            return journey.Receipts(None, f"no group {group} reads {self.persona}'s stream yet; its acknowledgement "
                                          f"will be the receipt once a member runs")
        on, origin = s.mark_read_origin(self.persona)
        own = (on, origin) if "[personas." in origin else None
        machine = (on, origin) if own is None and on else None
        return journey.receipts_known(self.persona, own, self._cursors(), machine)

    def _redis_groups(self) -> list[str]:
        from kijito_pull.sources.redis_streams import failures, stream_key

        source = self.ctx.redis_source(self.persona)
        try:
            with failures(source.where):
                if not source.client.exists(stream_key(self.persona)):
                    return []
                return [g["name"] for g in source.client.xinfo_groups(stream_key(self.persona))]
        except SourceFailed:
            return []  # Redis is down: no group is known (the journey's own step says why)

    def gather(self, kijito: bool = True) -> journey.Journey:
        """The journey now. A failure to ask Kijito or Redis becomes a step saying so (and `problem`)."""
        found = journey.Journey(self.ident, self.persona)
        self.problem = None
        s = self.ctx.settings
        if kijito:
            try:
                found.steps.append(journey.at_kijito(self.ctx.client, self.persona, self.ident))
            except SourceFailed as exc:  # a step that says so
                self.problem = f"Kijito could not be asked ({exc})"
                found.steps.append(journey.Step(journey.KIJITO, "unknown", self.problem))
        found.steps.extend(journey.on_this_machine(self._cursors(), self.ident))
        if s.source is not None:
            from kijito_pull.sources import redis_journey

            source = self.ctx.redis_source(self.persona)
            try:
                found.steps.extend(redis_journey.steps(source.client, self.persona, self.ident,
                                                       group=self.consumer, where=source.where))
            except SourceFailed as exc:  # a step that says so
                self.problem = f"Redis could not be asked ({exc})"
                found.steps.append(journey.Step(journey.REDIS, "unknown", self.problem))
        return found


def text(found: journey.Journey) -> str:
    """The journey for a person: a summary line, then one line per step."""
    lines = [f"message {found.id} of {found.persona}: {found.summary()}"]
    for step in found.steps:
        at = f" at {step.at}" if step.at else ""
        lines.append(f"  {step.where}: {step.state.replace('_', ' ')}{at}: {step.detail}")
    if found.receipts is not None:
        lines.append(f"  receipts: {found.receipts.why}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    settings = options.settings(args, env)
    persona = settings.personas[0]
    if args.consumer is not None:
        settings.consumer  # noqa: B018 - validates --consumer
    with Context(settings) as ctx:
        tracker = Tracker(ctx, persona, args.id, consumer=args.consumer)
        # With a Redis source Kijito is asked only when a token is given; one that is given must be good.
        ask_kijito = settings.source is None or bool(
            args.token_file or env.environ.get(config.TOKEN_ENV, "").strip() or settings.file.get("token_file"))
        if ask_kijito:
            settings.token  # noqa: B018 - checked before any request (ConfigError: exit 2)
        found = tracker.gather(kijito=ask_kijito)
        found.receipts = tracker.receipts()
    env.stdout.write(json.dumps(found.as_json()) + "\n" if args.json else text(found))
    return ExitCode.SOURCE_FAILED if tracker.problem else ExitCode.OK
