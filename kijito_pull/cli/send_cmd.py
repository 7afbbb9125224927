"""`kijito-pull send`: post a message (POST /api/send), for scripts, tests and the demo; with `--wait seen`,
wait for the recipient's receipt.

The receipt is Kijito's read flag, which a recipient that emits receipts sets only once its harness's own
record confirms the model has the message (core/receipts.py); with a Redis source (`--source`), the
consumer group's acknowledgement. While it waits, the read flag is asked with backoff (0.1 s growing to
1 s, so a receipt is seen within about a second), together with what this machine's cursors say
(core/journey.py via cli/track_cmd.py); the wait is bounded by `--timeout`. A recipient this machine knows
emits no receipts is said so at once, not waited for.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from kijito_pull.cli import options
from kijito_pull.context import Context
from kijito_pull.core import config, errors, journey
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode

MAX_CONTENT_BYTES = 1024 * 1024
DEFAULT_WAIT = 300.0
FIRST_DELAY, MAX_DELAY = 0.1, 1.0  # the read flag is asked this often: from 0.1 s, growing to 1 s

EPILOG = """\
examples:
  kijito-pull send --to river --from loom --urgent 'build is red'
  kijito-pull send --to river --from loom --wait seen --timeout 120 'deploy at 5?'
  kijito-pull send --to river --wait seen --json 'ping'     # the states it went through, with times

--wait seen: exit 0 once river's model has the message (its read receipt), 1 when --timeout passes first
or when this machine knows river emits no receipts (saying what is known: still unread at Kijito, handed
over but not confirmed, parked), 2 for a usage error. A receipt exists only where the recipient emits
them: the operator turns them on once per persona ([personas.river] mark_read = true in the config file
of the machine that runs river); with a Redis source, the group's acknowledgement is the receipt.
See docs/delivery.md, "Read receipts"; `kijito-pull track ID --persona river` shows a journey later.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("send", help="send a message to a persona (--wait seen: until its model has it)",
                            description="Send a message. TEXT '-' reads the body from stdin. With --wait seen, "
                                        "wait until the recipient's model has it (its read receipt).",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", metavar="TEXT", help="the message body, or - to read it from stdin")
    parser.add_argument("--to", required=True, metavar="PERSONA", help="recipient persona")
    parser.add_argument("--from", dest="sender", metavar="PERSONA",
                        help="author persona (default: the token's identity)")
    parser.add_argument("--urgent", action="store_true", help="mark the message urgent")
    parser.add_argument("--json", action="store_true",
                        help="print {\"id\": ..., \"to\": ...}; with --wait, also the result, receipts and the "
                             "states seen, with times")
    parser.add_argument("--wait", choices=("seen",), default=None,
                        help="seen: wait for the recipient's receipt (its model has the message)")
    wait = parser.add_argument_group("waiting in a fleet (with --wait; docs/fleets.md)")
    wait.add_argument("--source", metavar="URL", default=None,
                      help="the Redis source the recipient reads (redis://HOST:PORT/DB): its consumer group's "
                           "acknowledgement is the receipt ($KIJITO_PULL_SOURCE; config file: source)")
    wait.add_argument("--consumer", metavar="NAME", default=None,
                      help="with a Redis source: the group whose acknowledgement is the receipt (default 'agent')")
    options.add_redis_password(wait)
    options.add_connection(parser)
    for action in parser._actions:
        if action.dest == "timeout":
            action.help = (f"with --wait: seconds to wait for the receipt (default {DEFAULT_WAIT:g}); "
                           "without: the per-request timeout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    config.validate_persona(args.to)
    if args.sender:
        config.validate_persona(args.sender)
    wait_for = None
    if args.wait:
        wait_for = args.timeout or DEFAULT_WAIT
        args.timeout = None  # with --wait, --timeout bounds the wait; requests keep their own timeout
    elif args.source or args.consumer:
        raise config.ConfigError("--source and --consumer say where a receipt is waited for: use them with "
                                 "--wait seen")
    text = env.stdin.read(MAX_CONTENT_BYTES + 1) if args.text == "-" else args.text
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONTENT_BYTES:
        raise config.ConfigError("the message is larger than 1 MiB")
    settings = options.settings(args, env)
    if wait_for is not None:
        settings.source  # noqa: B018 - a wrong --source is a usage error before anything is sent
        settings.consumer  # noqa: B018
    with Context(settings) as ctx:
        with errors.about("send failed", "it was not retried, so it was sent at most once"):
            result = ctx.client.send(args.to, text, sender=args.sender, urgent=args.urgent)
        if wait_for is None:
            if args.json:
                env.stdout.write(json.dumps({"id": result.id, "to": result.to}) + "\n")
            elif not args.quiet:  # -q: the exit status says it was sent; --json output is data, kept
                env.stdout.write(f"sent message {result.id} to {result.to}\n")
            return ExitCode.OK
        if not args.json and not args.quiet:
            env.stdout.write(f"sent message {result.id} to {result.to}\n")
            env.stdout.flush()
        return _wait_seen(ctx, args, env, result.id, result.to, wait_for)


def _wait_seen(ctx: Context, args: argparse.Namespace, env: Environment, ident: int, to: str,
               bound: float) -> ExitCode:
    """Ask until the receipt comes, `bound` passes, or the recipient is known to emit none."""
    from kijito_pull.cli.track_cmd import Tracker, text

    started, sent_at = time.monotonic(), time.time()
    tracker = Tracker(ctx, to, ident, consumer=args.consumer if ctx.settings.source is not None else None)
    states: list[dict[str, Any]] = [{"state": "sent", "at": journey.iso(sent_at)}]
    receipts = tracker.receipts()
    if receipts.emitted is None and not args.quiet and not args.json:
        env.error(f"note: {receipts.why}; waiting up to {bound:g} s for it")
    delay = FIRST_DELAY
    while True:
        if receipts.emitted is None and tracker.calls % tracker.rescan == 0:
            receipts = tracker.receipts()  # the recipient may have started here since (its cursor, its marker)
        found = tracker.gather(kijito=ctx.settings.source is None)
        found.receipts = receipts
        _note_states(states, found)
        waited = time.monotonic() - started
        if found.seen:
            outcome = "seen"
            break
        if receipts.emitted is False:
            outcome = "no_receipts"
            break
        if waited >= bound:
            outcome = "timeout"
            break
        time.sleep(min(delay, max(0.0, bound - waited)))
        delay = min(delay * 2, MAX_DELAY)
    if args.json:
        env.stdout.write(json.dumps({"id": ident, "to": to, "wait": "seen", "seen": outcome == "seen",
                                     "result": outcome, "waited": round(waited, 3), "states": states,
                                     "journey": found.as_json()}) + "\n")
    elif outcome == "seen":
        if not args.quiet:
            env.stdout.write(f"seen: {to}'s model has message {ident} ({found.summary()}; after {waited:.1f} s)\n")
    else:
        head = (f"not seen: {receipts.why}" if outcome == "no_receipts"
                else f"not seen within {bound:g} s" + (f" ({tracker.problem})" if tracker.problem else ""))
        env.error(f"{head}; what is known:\n{text(found).rstrip()}")
    return ExitCode.OK if outcome == "seen" else ExitCode.SOURCE_FAILED


def _note_states(states: list[dict[str, Any]], found: Any) -> None:
    """Each state a step reaches, the first time it is seen: with the record's time when it keeps one, else
    the time it was observed."""
    known = {(s["state"], s.get("where"), s.get("consumer")) for s in states}
    for step in found.steps:
        key = (step.state, step.where, step.consumer)
        if key in known or step.state == "unknown":
            continue
        known.add(key)
        row = {"state": step.state, "where": step.where, "at": step.at or journey.iso(time.time()),
               "observed": journey.iso(time.time())}
        if step.consumer:
            row["consumer"] = step.consumer
        if step.holder:
            row["holder"] = step.holder
        states.append(row)


