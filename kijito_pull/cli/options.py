"""Flags shared by several commands, and turning them into a validated connection and persona list."""

from __future__ import annotations

import argparse
from typing import Any

from kijito_pull.cli.environment import Environment
from kijito_pull.core import config
from kijito_pull.core.api import DEFAULT_TIMEOUT, KijitoClient


def add_connection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument("--api-base", metavar="URL",
                       help=f"Kijito API base URL (default: ${config.BASE_ENV}, else {config.DEFAULT_API_BASE}); "
                            "plain http:// only to loopback")
    group.add_argument("--token-file", metavar="FILE",
                       help=f"read the token from FILE (mode 0600); default: ${config.TOKEN_ENV}")
    group.add_argument("--auth-header", metavar="NAME",
                       help="send the raw token in header NAME instead of 'Authorization: Bearer'")
    group.add_argument("--timeout", type=_positive_float, default=None, metavar="SECONDS",
                       help=f"per-request timeout (default {DEFAULT_TIMEOUT:g})")


def add_personas(parser: argparse.ArgumentParser, *, many: bool = True) -> None:
    group = parser.add_argument_group("inbox")
    group.add_argument("--persona", action="append" if many else "store", metavar="NAME",
                       help=f"the persona (inbox) to read{'; repeatable' if many else ''} "
                            f"(default: ${config.PERSONA_ENV})")


def add_consumer(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--consumer", metavar="NAME", default=None,
                        help=f"consumer group owning the cursor (default {config.DEFAULT_CONSUMER!r}; the hooks, "
                             "watch loop and pi extension share it, so the first to deliver wins)")


def _positive_float(text: str) -> float:
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


def file_settings(env: Environment) -> dict[str, Any]:
    return config.load_config_file(env.environ)


def connection(args: argparse.Namespace, env: Environment) -> config.Connection:
    settings = file_settings(env)
    api_base = config.resolve_api_base(args.api_base, env.environ, settings.get("api_base"))
    token = config.resolve_token(args.token_file, env.environ, settings.get("token_file"))
    header = config.validate_auth_header(args.auth_header or settings.get("auth_header"))
    return config.Connection(api_base, token, header)


def client(conn: config.Connection, args: argparse.Namespace) -> KijitoClient:
    return KijitoClient(conn.api_base, conn.token, auth_header=conn.auth_header,
                        timeout=getattr(args, "timeout", None) or DEFAULT_TIMEOUT)


def personas(args: argparse.Namespace, env: Environment) -> list[str]:
    given = args.persona if isinstance(args.persona, list) else ([args.persona] if args.persona else [])
    if not given:
        fallback = env.environ.get(config.PERSONA_ENV, "").strip() or file_settings(env).get("persona")
        if not fallback:
            raise config.ConfigError(f"no persona: pass --persona NAME or set {config.PERSONA_ENV}")
        given = [fallback]
    out: list[str] = []
    for name in given:
        config.validate_persona(name)
        if name not in out:
            out.append(name)
    return out


def consumer(args: argparse.Namespace, env: Environment) -> str:
    # An explicit --consumer "" (say, from an unset shell variable) is an error, not the agent's own cursor.
    name: str | None = args.consumer if args.consumer is not None else (
        file_settings(env).get("consumer") or config.DEFAULT_CONSUMER)
    return config.validate_consumer(str(name))
