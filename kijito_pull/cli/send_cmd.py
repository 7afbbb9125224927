"""`kijito-pull send`: post a message (POST /api/send), for scripts, tests and the demo."""

from __future__ import annotations

import argparse
import json

from kijito_pull.cli import options
from kijito_pull.context import Context
from kijito_pull.core import config, errors
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode

MAX_CONTENT_BYTES = 1024 * 1024


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("send", help="send a message to a persona",
                            description="Send a message. TEXT '-' reads the body from stdin.",
                            epilog="example:\n  kijito-pull send --to river --from loom --urgent 'build is red'",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", metavar="TEXT", help="the message body, or - to read it from stdin")
    parser.add_argument("--to", required=True, metavar="PERSONA", help="recipient persona")
    parser.add_argument("--from", dest="sender", metavar="PERSONA",
                        help="author persona (default: the token's identity)")
    parser.add_argument("--urgent", action="store_true", help="mark the message urgent")
    parser.add_argument("--json", action="store_true", help="print {\"id\": ..., \"to\": ...}")
    options.add_connection(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    config.validate_persona(args.to)
    if args.sender:
        config.validate_persona(args.sender)
    text = env.stdin.read(MAX_CONTENT_BYTES + 1) if args.text == "-" else args.text
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONTENT_BYTES:
        raise config.ConfigError("the message is larger than 1 MiB")
    ctx = Context(options.settings(args, env))
    client = ctx.client
    try:
        with errors.about("send failed", "it was not retried, so it was sent at most once"):
            result = client.send(args.to, text, sender=args.sender, urgent=args.urgent)
    finally:
        ctx.close()
    if args.json:
        env.stdout.write(json.dumps({"id": result.id, "to": result.to}) + "\n")
    elif not args.quiet:  # -q: the exit status says it was sent; --json output is data, kept
        env.stdout.write(f"sent message {result.id} to {result.to}\n")
    return ExitCode.OK
