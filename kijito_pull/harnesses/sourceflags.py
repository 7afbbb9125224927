"""`install HARNESS --source URL --consumer NAME`: the mail source a harness's hooks read, written into
each hook's command line (`kijito-pull hook NAME --source URL --consumer NAME`, which the hook gate,
harnesses/hookgate.py, takes). A URL with a password is refused (context.refuse_password_in_argv): a
command line is visible to every process on the machine."""

from __future__ import annotations

from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses.installkit import InstallError


def add_source_arguments(parser: Any) -> None:
    """`install HARNESS --source URL --consumer NAME`: written into each hook's command line."""
    parser.add_argument("--source", metavar="URL",
                        help="the hooks read the persona's Redis stream at URL (redis://HOST:PORT/DB, no password: "
                             "a command line is visible to every process) instead of Kijito (docs/fleets.md)")
    parser.add_argument("--consumer", metavar="NAME", help="the hooks' consumer (with --source: its consumer group)")


def source_flags(request: Any) -> list[str]:
    """The hook command line's `--source URL --consumer NAME` words an install was asked for (InstallError,
    exit 2, for a URL that is not a Redis one or that carries a password, or a bad consumer)."""
    from kijito_pull import context
    from kijito_pull.core import config
    from kijito_pull.sources import redis_streams

    out: list[str] = []
    source, consumer = request.option("source"), request.option("consumer")
    if source:
        try:
            redis_streams.check_url(source)
        except ValueError as exc:
            raise InstallError(f"--source: {exc}", ExitCode.USAGE) from None
        try:  # a hook's command line is visible to every process on the machine (ps), as any argv is
            context.refuse_password_in_argv(source, "--source")
        except config.ConfigError as exc:
            raise InstallError(str(exc), ExitCode.USAGE) from None
        out += ["--source", source]
    if consumer:
        try:
            config.validate_consumer(consumer)
        except config.ConfigError as exc:
            raise InstallError(f"--consumer: {exc}", ExitCode.USAGE) from None
        out += ["--consumer", consumer]
    return out

