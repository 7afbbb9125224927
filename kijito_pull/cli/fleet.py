"""`status` and `parked` for a Redis source (`--source redis://...`, docs/fleets.md): what Redis itself says of
each persona's stream (its groups' lag, pending entries and their holders; the dead-letter stream), read
through sources.redis_streams. Nothing changes, but for `parked --retry ID`, which gives one parked message
back to its group (RedisSource.retry_parked); Kijito is sent nothing. (`watch --source` is the one watch
loop, watch/loop.py, wired in cli/watch_cmd.py.)"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kijito_pull.context import Context, Settings
from kijito_pull.core import errors, overview
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.sources import redis_streams


def _each_persona(settings: Settings, rows_of) -> list[dict[str, Any]]:  # noqa: ANN001
    rows: list[dict[str, Any]] = []
    with Context(settings) as ctx:
        for persona in settings.personas:
            with errors.about(persona):
                rows += rows_of(persona, ctx.redis_source(persona))
    return rows


def status(args: argparse.Namespace, env: Environment, settings: Settings) -> ExitCode:
    """Each group of each persona's stream: lag (entries not yet read by the group), pending entries, holders."""
    rows = _each_persona(settings, overview.group_rows)  # the dashboard's rows too
    if args.consumer:
        rows = [r for r in rows if r["group"] == args.consumer]
    for row in rows:
        if args.json:
            env.stdout.write(json.dumps(row) + "\n")
            continue
        holders = ", ".join(f"{name}: {n}" for name, n in sorted(row["holders"].items()))
        env.stdout.write(f"{row['persona']} / group {row['group']} @ {row['source']}: lag {row['lag']}, "
                         f"{row['pending']} pending" + (f" ({holders})" if holders else "") + "\n")
    if not rows and not args.json:
        env.stdout.write("no consumer groups yet\n")
    return ExitCode.OK


def parked(args: argparse.Namespace, env: Environment, settings: Settings) -> ExitCode:
    """The group's parked mail (the dead-letter stream); `--retry ID` gives it back to that one group."""
    if args.retry is not None:
        return _retry(args, env, settings)
    rows = _each_persona(settings, lambda persona, source: [
        {"persona": persona, "source": source.where, "consumer": f["group"], "id": int(f["kid"]),
         "since": f.get("since"), "attempts": int(f.get("attempts", 0)), "reason": f.get("reason", ""),
         "retry": False} for f in source.parked(every_group=not args.consumer)])
    for row in rows:
        if args.json:
            env.stdout.write(json.dumps(row) + "\n")
            continue
        env.stdout.write(f"{row['persona']} / {row['consumer']}: message {row['id']} parked since {row['since']} "
                         f"after {row['attempts']} attempts ({row['reason']}) in {row['source']}\n")
    if not rows and not args.json:
        env.stdout.write("no parked mail\n")
    return ExitCode.OK


def _retry(args: argparse.Namespace, env: Environment, settings: Settings) -> ExitCode:
    """`parked --retry ID --persona P [--consumer G]`: message ID back in group G's pending list, handed over
    once by the next pull of any member of G (RedisSource.retry_parked); no other group gets it again."""
    persona, group = settings.personas[0], settings.consumer
    with Context(settings) as ctx:
        source = ctx.redis_source(persona)
        with errors.about(persona, "nothing changed"):
            outcome = source.retry_parked(args.retry)
    if outcome == "not parked":
        env.error(f"message {args.retry} is not parked for {persona} (group {group}) in {source.where}; "
                  f"`kijito-pull parked --source ...` lists what is")
        return ExitCode.SOURCE_FAILED
    if outcome == "trimmed":
        env.error(f"message {args.retry} is no longer in {redis_streams.stream_key(persona)} (trimmed), so it "
                  f"cannot be handed over again from Redis; it stays parked")
        return ExitCode.SOURCE_FAILED
    env.stdout.write(f"message {args.retry} will be handed over again on the next pull of group {group} "
                     f"({persona} in {source.where})\n")
    return ExitCode.OK
