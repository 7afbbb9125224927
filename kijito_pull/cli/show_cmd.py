"""`kijito-pull show ID`: one whole message, for when the text an agent was handed clipped it."""

from __future__ import annotations

import argparse
import json

from kijito_pull.cli import options
from kijito_pull.context import Context
from kijito_pull.core import errors, render
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("show", help="show one message in full (never marks it read)",
                            description="Show one message of the persona's inbox in full. Read-only: the "
                                        "message is not marked read and no cursor moves.")
    parser.add_argument("id", type=options.non_negative_int, metavar="ID", help="the message id")
    parser.add_argument("--json", action="store_true", help="print the message as one JSON object")
    options.add_personas(parser, many=False)
    options.add_connection(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    settings = options.settings(args, env)
    persona = settings.personas[0]
    ctx = Context(settings)
    client = ctx.client
    try:
        with errors.about(persona):
            # The newest row older than ID+1 is ID itself, if ID is in this inbox: one request, no walk.
            page = client.inbox(persona, before_id=args.id + 1, limit=1)
    finally:
        ctx.close()
    message = next((m for m in page.messages if m.id == args.id), None)
    if message is None:
        env.error(f"message {args.id} is not in {persona}'s inbox")
        return ExitCode.SOURCE_FAILED
    if args.json:
        env.stdout.write(json.dumps({"id": message.id, "from": message.sender, "content": message.content,
                                     "created": message.created, "read": message.read,
                                     "clipped_by_server": page.size_truncated}, ensure_ascii=False) + "\n")
    else:
        env.stdout.write(render.for_terminal([message], persona=persona))
        if page.size_truncated:
            env.stdout.write("(the server clipped this message's body to fit its size budget)\n")
    return ExitCode.OK
