#!/usr/bin/env python3
"""Fleets (Redis Streams, docs/fleets.md): relay throughput and the wake latency through Redis, side by side
with the direct long-poll, as markdown tables. A real redis-server (AOF, appendfsync always) and an
in-process sandbox; the relay and both watchers are real subprocesses (bench/bench_watch.py's Proc).

(1) Relay throughput: a relay past its first contact, then N messages sent as fast as the sandbox takes
    them; messages/s = N / (first send -> the stream holds all N).
(2) Wake latency, send -> `new` line read: `relay` (woken by the notify/pending long-poll) + `watch
    --source redis://` (woken by XREAD BLOCK) against `watch` long-polling the sandbox directly, one
    message at a time with seeded random gaps, both running at once (each message goes to both; the
    order of the two watchers does not matter: each reads its own).

    .venv/bin/python bench/bench_fleet.py --messages 500 --wakes 20

bench/bench_fleet_scale.py measures 1,000 personas on one relay and the hooks' wall time with a Redis source.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_watch import Proc, git_state  # noqa: E402 - bench/ is on the path of a bench script
from stats import percentile  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402
from kijito_pull.sources import redis_streams  # noqa: E402
from tests.clirunner import Cli  # noqa: E402
from tests.redisserver import RedisServer  # noqa: E402

PERSONA = "fleetbench"
TOKEN = "bench-fleet-token-9c1d"


def argv_env(cli: Cli, *args: str) -> tuple[list[str], dict[str, str]]:
    return [sys.executable, "-m", "kijito_pull", *args], {**cli.environ, "PYTHONPATH": str(REPO)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--wakes", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.2, help="the relay's --interval")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp, Sandbox(token=TOKEN).start() as sb:
        root = Path(tmp)
        sb.add_persona(PERSONA, memory_count=1)
        server = RedisServer(shutil.which("redis-server"), root / "redis").start()
        r = server.client()
        relay_cli = Cli(sb.url, TOKEN, root / "relay")
        relay = Proc(*argv_env(relay_cli, "relay", "--redis", server.url, "--persona", PERSONA,
                               "--interval", str(args.interval)))
        fleet = Proc(*argv_env(Cli("https://kijito.invalid/api", "", root / "member"), "watch", "--persona",
                               PERSONA, "--source", server.url, "--consumer", "bench"))
        direct = Proc(*argv_env(Cli(sb.url, TOKEN, root / "direct"), "watch", "--persona", PERSONA))
        try:
            first = sb.send(PERSONA, "river", "first contact")
            stream = redis_streams.stream_key(PERSONA)
            while r.xlen(stream) < 1:
                time.sleep(0.05)
            for p in (fleet, direct):
                assert p.wait_for(lambda e: e.get("id") == first, 60) is not None, p.stderr_lines[-5:]
            started = time.monotonic()
            for i in range(args.messages):
                sb.send(PERSONA, "river", f"burst {i}")
            while r.xlen(stream) < args.messages + 1:
                time.sleep(0.01)
            relayed = time.monotonic() - started
            time.sleep(2.0)
            lat = {"redis": [], "direct": []}
            for i in range(args.wakes):
                time.sleep(rng.uniform(0.3, 1.0))
                marks = {k: len(p.events) for k, p in (("redis", fleet), ("direct", direct))}
                sent = time.monotonic()
                mid = sb.send(PERSONA, "river", f"wake {i}")
                for key, p in (("redis", fleet), ("direct", direct)):
                    got = p.wait_for(lambda e, mid=mid: e.get("event") == "new" and e.get("id") == mid, 15,
                                     marks[key])
                    if got is not None:
                        lat[key].append(got[0] - sent)
        finally:
            for p in (fleet, direct, relay):
                p.stop()
            server.stop()
    print(f"\n### Fleets: relay throughput and wake latency ({git_state()}, relay --interval {args.interval:g})\n")
    rate = args.messages / relayed
    print("| relay throughput |\n|---|")
    print(f"| {args.messages} messages in {relayed:.2f} s: {rate:.0f} messages/s |")
    print("\n| wake, send -> event line | p50 | p90 | max | received |")
    print("|---|---|---|---|---|")
    for key, label in (("redis", "relay + watch --source redis://"), ("direct", "watch (long-poll)")):
        v = lat[key]
        if v:
            print(f"| {label} | {percentile(v, 0.5) * 1000:.0f} ms | {percentile(v, 0.9) * 1000:.0f} ms | "
                  f"{max(v) * 1000:.0f} ms | {len(v)}/{args.wakes} |")
        else:
            print(f"| {label} | - | - | - | 0/{args.wakes} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
