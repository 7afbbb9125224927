"""Flags shared by several commands; `settings(args, env)` hands them to the composition root
(kijito_pull.context), which resolves them once."""

from __future__ import annotations

import argparse

from kijito_pull.context import Flags, Settings
from kijito_pull.core import config
from kijito_pull.core.api import DEFAULT_TIMEOUT
from kijito_pull.core.environment import Environment


def add_connection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument("--api-base", metavar="URL",
                       help=f"Kijito API base URL (default: ${config.BASE_ENV}, else {config.DEFAULT_API_BASE}); "
                            "plain http:// only to loopback")
    group.add_argument("--token-file", metavar="FILE",
                       help=f"read the token from FILE (mode 0600); default: ${config.TOKEN_ENV}")
    group.add_argument("--auth-header", metavar="NAME",
                       help="send the raw token in header NAME instead of 'Authorization: Bearer'")
    group.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                       help=f"per-request timeout (default {DEFAULT_TIMEOUT:g})")


def add_personas(parser: argparse.ArgumentParser, *, many: bool = True) -> None:
    group = parser.add_argument_group("inbox")
    group.add_argument("--persona", action="append" if many else "store", metavar="NAME",
                       help=f"the persona (inbox) to read{'; repeatable' if many else ''} "
                            f"(default: ${config.PERSONA_ENV})")


def add_on_reset(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--on-reset", choices=("replay", "pin"), default=None,
                        help="when the server's ids start over below the cursor (a reset server): replay its "
                             "unread mail as on first contact and start the cursor again (default), or pin "
                             "the cursor and alert; both raise an alert (config file: on_reset)")


def add_max_attempts(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-attempts", type=non_negative_int, default=None, metavar="N",
                        help="park a message the consumer refused N times (an alert; the cursor moves on, "
                             "`kijito-pull parked` lists it, `--retry ID` hands it over again); default 10, "
                             "0 = hold the cursor on it forever (config file: max_attempts)")


def add_consumer(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--consumer", metavar="NAME", default=None,
                        help=f"consumer group owning the cursor (default {config.DEFAULT_CONSUMER!r}; the hooks, "
                             "watch loop and pi extension share it, so the first to deliver wins)")
    parser.add_argument("--mark-read", action="store_true", default=None,
                        help="once mail is confirmed delivered, mark it read on the server, so a fresh runner "
                             "(a CI container) does not get it again (off by default: other tools read the flag; "
                             "also $KIJITO_PULL_MARK_READ=1 or mark_read = true in the config file)")


def add_source(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("source (fleets, docs/fleets.md)")
    group.add_argument("--source", metavar="URL", default=None,
                       help="read the persona's Redis stream (redis://HOST:PORT/DB) through the consumer group "
                            "named by --consumer, instead of Kijito ($KIJITO_PULL_SOURCE; config file: source)")
    group.add_argument("--claim-after", type=non_negative_float, default=None, metavar="SECONDS",
                       help="with a Redis source: seconds a hand-over stays with its holder before another "
                            "member claims it back (default 900; config file: claim_after)")
    add_redis_password(group)


def add_redis_password(group) -> None:  # noqa: ANN001  (a parser or an argument group)
    group.add_argument("--redis-password-file", metavar="FILE", default=None,
                       help="read the Redis password from FILE (mode 0600); a password is never taken in a URL "
                            "on the command line (ps shows it): also $KIJITO_PULL_REDIS_PASSWORD, or "
                            "redis_password_file in the config file")


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def flags(args: argparse.Namespace) -> Flags:
    """The connection, persona and consumer flags a command was given (absent ones are None)."""
    persona = getattr(args, "persona", None)
    personas = tuple(persona) if isinstance(persona, list) else ((persona,) if persona else ())
    return Flags(api_base=getattr(args, "api_base", None), token_file=getattr(args, "token_file", None),
                 auth_header=getattr(args, "auth_header", None), personas=personas,
                 consumer=getattr(args, "consumer", None), timeout=getattr(args, "timeout", None),
                 on_reset=getattr(args, "on_reset", None), max_attempts=getattr(args, "max_attempts", None),
                 mark_read=getattr(args, "mark_read", None),
                 source=getattr(args, "source", None), claim_after=getattr(args, "claim_after", None),
                 redis_password_file=getattr(args, "redis_password_file", None))


def settings(args: argparse.Namespace, env: Environment) -> Settings:
    """The command's settings, resolved once in kijito_pull.context (flags over environment over file)."""
    return Settings(env.environ, flags(args))
