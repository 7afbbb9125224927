#!/usr/bin/env python3
"""Fleets at scale (Redis Streams, docs/fleets.md), as markdown tables: one relay serving many personas,
and the hooks' wall time with a Redis source. A real redis-server (AOF, appendfsync always) and an
in-process sandbox; the relay and the hooks are real subprocesses.

(1) One relay, every persona of an account of N personas (`relay --redis URL`, no --persona): the time
    until every persona is past its first contact (a relay cursor file each), then an idle window of W
    seconds: the requests Kijito and the commands Redis received in it (scaled to a minute), the VmHWM /
    VmRSS at its end. `--compare DIR` runs the same against another checkout of kijito-pull (say the
    relay before it ran on the watch loop) in the same run, side by side.
(2) Hook wall time, nothing new, as Claude Code runs its hooks (`kijito-pull hook NAME`, JSON on stdin,
    interpreter start-up included): against the sandbox directly, and with `KIJITO_PULL_SOURCE=redis://`
    (a consumer group that has read everything), with the Kijito requests each run sent.

    .venv/bin/python bench/bench_fleet_scale.py --personas 1000 --idle 60 --runs 30
    .venv/bin/python bench/bench_fleet_scale.py --compare /work/base      # and another checkout's relay
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_hooks import ms, time_hook  # noqa: E402 - bench/ is on the path of a bench script
from bench_watch import Proc, git_state  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402
from tests.clirunner import Cli  # noqa: E402
from tests.e2e import claude_helpers as ch  # noqa: E402
from tests.redisserver import RedisServer  # noqa: E402

TOKEN = "bench-fleet-scale-token-51ab"


def redis_calls(observer) -> collections.Counter:  # noqa: ANN001
    """Commands redis-server ran so far, by name (INFO commandstats; the observer's own INFO left out)."""
    stats = observer.info("commandstats")
    return collections.Counter({k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()
                                if k != "cmdstat_info"})


def relay_at_scale(repo: Path, personas: int, idle: float, root: Path, redis_bin: str) -> dict:
    """One relay of the checkout `repo` over every persona of a fresh account of `personas` personas."""
    with Sandbox(token=TOKEN).start() as sb:
        names = [f"p{n:04d}" for n in range(personas)]
        for name in names:
            sb.add_persona(name, memory_count=1)
        for name in names[::10]:  # some personas have mail waiting, most have none
            sb.send(name, "loom", f"waiting for {name}")
        server = RedisServer(redis_bin, root / "redis").start()
        try:
            cli = Cli(sb.url, TOKEN, root / "state")
            sb.clear_requests()
            started = time.monotonic()
            # -P: the checkout on PYTHONPATH (--compare's), not the current directory's
            relay = Proc([sys.executable, "-P", "-m", "kijito_pull", "relay", "--redis", server.url],
                         {**cli.environ, "PYTHONPATH": str(repo)})
            cursors = root / "state" / "cursors"
            armed = None
            while time.monotonic() - started < 600 and relay.proc.poll() is None:
                if len(list(cursors.glob("*.relay.*.json"))) >= personas:
                    armed = time.monotonic() - started
                    break
                time.sleep(0.2)
            if armed is None:
                relay.stop()
                raise SystemExit(f"{repo}: the relay did not reach every persona: {relay.stderr_lines[-5:]}")
            time.sleep(3)  # past the last first contact's writes
            observer = server.client()
            before = redis_calls(observer)
            sb.clear_requests()
            time.sleep(idle)
            requests = collections.Counter(r["path"] for r in sb.requests)
            redis = redis_calls(observer) - before
            mem = relay.status()
            stream_ok = all(server.client().exists(f"kijito:{{{n}}}:mail") for n in names[::10])
            relay.stop()
            return {"armed": armed, "requests": requests, "redis": redis, "hwm": mem.get("VmHWM"),
                    "rss": mem.get("VmRSS"), "exit": relay.proc.returncode, "streams": stream_ok}
        finally:
            server.stop()


def hooks_with_redis(runs: int, root: Path, redis_bin: str) -> list[tuple[str, str, list[float], str]]:
    """claude-session-start and claude-stop, nothing new: direct, then from a Redis group."""
    rows = []
    with Sandbox(token=ch.TOKEN).start() as sb:
        server = RedisServer(redis_bin, root / "redis-hooks").start()
        try:
            project = ch.make_project(root, opted_in=True, name="opted")
            direct = {**ch.hook_env(sb.url, root / "state-direct"), "CLAUDE_CODE_ENTRYPOINT": "sdk-cli"}
            redis_env = {**ch.hook_env("https://kijito.invalid/api", root / "state-redis"),
                         "CLAUDE_CODE_ENTRYPOINT": "sdk-cli", "KIJITO_PULL_SOURCE": server.url,
                         "KIJITO_PULL_CONSUMER": "bench"}
            for env in (direct, redis_env):
                for key in [k for k in env if k.startswith("KIJITO_PULL_MODE")]:
                    env.pop(key)
            sb.send(ch.PERSONA, "loom", "already read")
            relay = Cli(sb.url, ch.TOKEN, root / "relay").spawn("relay", "--redis", server.url, "--persona",
                                                               ch.PERSONA, stdout=None, stderr=None)
            try:
                deadline = time.monotonic() + 60
                while not server.client().exists(f"kijito:{{{ch.PERSONA}}}:mail") and time.monotonic() < deadline:
                    time.sleep(0.1)
            finally:
                relay.terminate()
                relay.wait(20)
            for label, env in (("direct (the sandbox)", direct), ("--source redis://", redis_env)):
                time_hook("claude-stop", project, env, {"session_id": "bench-0", "cwd": str(project)}, 1)  # settle
                for name, extra in (("claude-session-start", {"source": "startup"}),
                                    ("claude-stop", {"stop_hook_active": False})):
                    payload = {"session_id": "bench-1", "cwd": str(project), "hook_event_name": "x", **extra}
                    sb.clear_requests()
                    times, out = time_hook(name, project, env, payload, runs)
                    assert out == "", (label, name, out)
                    rows.append((label, name, times, f"{len(sb.requests) / runs:g} Kijito request(s) per run"))
        finally:
            server.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--personas", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of the idle window (default 60)")
    parser.add_argument("--runs", type=int, default=30, help="runs per hook (default 30)")
    parser.add_argument("--compare", type=Path, metavar="DIR", help="another checkout whose relay runs too")
    parser.add_argument("--skip-hooks", action="store_true")
    args = parser.parse_args(argv)
    redis_bin = shutil.which("redis-server")
    if not redis_bin:
        raise SystemExit("needs redis-server (Debian: apt-get install redis-server)")
    print(f"command: bench/bench_fleet_scale.py {' '.join(sys.argv[1:])}; {git_state()}\n")
    checkouts = [("this checkout", REPO)] + ([(f"{args.compare}", args.compare)] if args.compare else [])
    print(f"One relay, every persona of an account of {args.personas:,} (one in ten with a message waiting); "
          f"an idle window of {args.idle:g} s after every persona's first contact:\n")
    print("| relay | time to first contact of all | Kijito requests / idle min | of which inbox | notify/pending "
          "| Redis commands / idle min | of which HMGET | VmHWM | VmRSS | exit on SIGTERM |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, repo in checkouts:
        with tempfile.TemporaryDirectory() as tmp:
            got = relay_at_scale(repo, args.personas, args.idle, Path(tmp), redis_bin)
        per_min = 60.0 / args.idle
        total = sum(got["requests"].values()) * per_min
        inbox = got["requests"].get("/api/inbox", 0) * per_min
        notify = got["requests"].get("/api/notify/pending", 0) * per_min
        assert got["streams"], f"{label}: a persona's waiting mail never reached its stream"
        redis_total = sum(got["redis"].values()) * per_min
        hmget = got["redis"].get("hmget", 0) * per_min
        print(f"| {label} | {got['armed']:.1f} s | {total:,.0f} | {inbox:,.0f} | {notify:,.0f} | "
              f"{redis_total:,.0f} | {hmget:,.0f} | {got['hwm'] / 1024:.1f} MiB | {got['rss'] / 1024:.1f} MiB "
              f"| {got['exit']} |")
    if not args.skip_hooks:
        with tempfile.TemporaryDirectory() as tmp:
            rows = hooks_with_redis(args.runs, Path(tmp), redis_bin)
        print(f"\nHook wall time, nothing new ({args.runs} runs each, interpreter start-up included):\n")
        print("| source | hook | p50 (ms) | p95 (ms) | max (ms) | requests |")
        print("|---|---|---|---|---|---|")
        for label, name, times, note in rows:
            print(f"| {label} | `hook {name}` | {ms(times, 0.5)} | {ms(times, 0.95)} | {max(times) * 1000:.0f} "
                  f"| {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
