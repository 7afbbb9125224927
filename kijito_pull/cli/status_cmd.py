"""`kijito-pull status`: where each cursor stands (local files only; no token, no network), or with a Redis
source (`--source redis://...`) what Redis says of each consumer group (cli/fleet.py)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kijito_pull.cli import options
from kijito_pull.core import overview
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.core.paths import Paths


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("status", help="show cursor, pin, lock and pending hand-overs of each cursor",
                            description="Show every cursor under the state directory (or only --persona's): "
                                        "position, pin, lock holder, a damaged file read from its last good copy, "
                                        "and the hand-overs to agent sessions not yet confirmed (holder, since "
                                        "when, how many times handed over). "
                                        "Reads local files only.")
    parser.add_argument("--persona", action="append", metavar="NAME", help="only this persona; repeatable")
    parser.add_argument("--consumer", metavar="NAME", help="only this consumer")
    parser.add_argument("--json", action="store_true", help="one JSON object per cursor, one per line")
    options.add_source(parser)  # with it: each group's lag, pending entries and holders, from Redis
    parser.set_defaults(run=run)


def _pending_text(rows: list[dict[str, Any]]) -> str:
    parts = []
    for r in rows:
        ids = ", ".join(map(str, r["ids"][:5])) + (", ..." if len(r["ids"]) > 5 else "")
        if r["holder"] is None:
            parts.append(f"{len(r['ids'])} released, unseen again ({ids}; handed over up to {r['handovers']}x)")
        else:
            parts.append(f"{len(r['ids'])} pending with {r['holder']} since {r['since']} ({ids}; "
                         f"handed over up to {r['handovers']}x)")
    return "; ".join(parts)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    settings = options.settings(args, env)
    if settings.source is not None:
        from kijito_pull.cli import fleet

        return fleet.status(args, env, settings)
    directory = Paths(env.environ).cursors_dir
    if args.consumer:
        settings.consumer  # noqa: B018 - validates --consumer
    rows = overview.cursor_rows(directory, args.persona, args.consumer)  # the dashboard's rows too
    if args.json:
        for row in rows:
            env.stdout.write(json.dumps(row) + "\n")
        return ExitCode.OK
    if not rows:
        env.stdout.write(f"no cursors yet under {directory}\n")
        return ExitCode.OK
    for row in rows:
        if row["status"] == "corrupt" and "persona" not in row:
            env.stdout.write(f"{row['file']}: corrupt ({row['reason']})\n")
            continue
        lock = row["lock"] if row["lock"] == "free" else f"held by {row['lock']['holder']}"
        head = f"{row['persona']} / {row['consumer']} @ {row['api_base']}"
        if row["status"] == "corrupt":
            env.stdout.write(f"{head}: corrupt ({row['reason']}); lock {lock}\n")
            continue
        pin = f"; PINNED since {row['pin']['since']}: {row['pin']['reason']}" if row["pin"] else ""
        pending = f"; {_pending_text(row['pending'])}" if row["pending"] else ""
        restored = (f"; DAMAGED ({row['restored']}), restored from its last good copy (.prev); the next pull "
                    "rewrites it") if row["restored"] else ""
        env.stdout.write(f"{head}: cursor {row['cursor']}, {row['delivered_above']} delivered above the cursor, "
                         f"lock {lock}{pin}{pending}{restored}\n")
    return ExitCode.OK
