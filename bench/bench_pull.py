#!/usr/bin/env python3
"""Benchmarks for `kijito-pull --once`, printed as a markdown table.

(a) Nothing new: the CLI as a subprocess against an in-process sandbox, cursor already established.
    Wall time per run including interpreter start (p50, p95) and requests per run (from the sandbox's
    request log). Targets: p50 <= 250 ms, 1 request.
(b) Catch-up: cursor established, then a gap of 10,000 messages with a 50-row window, pulled by one
    `--once --json` (stdout to a file). Requests (target ceil(gap/limit)+1), wall time (target <= 5 s),
    the child's peak RSS (from wait4's rusage).

    .venv/bin/python bench/bench_pull.py               # both, default sizes
    .venv/bin/python bench/bench_pull.py --profile     # also cProfile the catch-up and print the top

The sandbox runs in this process (threads), so its own work competes for the same 2 cores.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stats import percentile  # noqa: E402 - bench/ is on the path of a bench script

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402

TOKEN = "bench-token-0d5e"
PERSONA = "benchbot"


class Runner:
    def __init__(self, sandbox: Sandbox, state_dir: Path, via: str):
        self.sandbox = sandbox
        self.env = {
            "KIJITOMON_TOKEN": TOKEN,
            "KIJITO_BASE": sandbox.url,
            "KIJITO_PULL_STATE_DIR": str(state_dir),
            "KIJITO_PULL_CONFIG": os.devnull,
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(state_dir),
        }
        script = Path(sys.executable).parent / "kijito-pull"
        if via == "script" and script.exists():
            self.prefix = [str(script)]
        else:
            self.prefix = [sys.executable, "-m", "kijito_pull"]
            self.env["PYTHONPATH"] = str(REPO)

    def run(self, *argv: str, stdout=subprocess.DEVNULL, profile: str | None = None):
        """Run once; returns (wall seconds, peak RSS KiB, CPU seconds user+sys) of the child."""
        cmd = [*self.prefix, *argv]
        if profile:
            cmd = [sys.executable, "-m", "cProfile", "-o", profile, "-m", "kijito_pull", *argv]
        with tempfile.TemporaryFile() as errfile:
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, env=self.env, stdout=stdout, stderr=errfile, stdin=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage, not all children's
            elapsed = time.perf_counter() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
            errfile.seek(0)
            err = errfile.read().decode("utf-8", "replace")
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err}")
        return elapsed, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def bench_idle(runs: int, via: str, profile_imports: bool = False) -> dict:
    with Sandbox(token=TOKEN, window_limit=20).start() as sb, tempfile.TemporaryDirectory() as tmp:
        r = Runner(sb, Path(tmp), via)
        for i in range(30):
            sb.send(to=PERSONA, sender="river", content=f"old {i}")
        r.run("--once", "--json", "--persona", PERSONA)  # first contact: the cursor is established
        for _ in range(3):  # warm the page cache
            r.run("--once", "--json", "--persona", PERSONA)
        times, cpu, requests, inbox = [], [], [], []
        for _ in range(runs):
            sb.clear_requests()
            elapsed, _, cpu_s = r.run("--once", "--json", "--persona", PERSONA)
            times.append(elapsed)
            cpu.append(cpu_s)
            log = sb.requests
            requests.append(len(log))
            inbox.append(sum(1 for e in log if e["path"] == "/api/inbox"))
        # Context for the wall time: the interpreter alone, and the interpreter importing requests.
        base = []
        for _ in range(10):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            base.append(time.perf_counter() - t)
        req = []
        for _ in range(10):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import requests"], check=True)
            req.append(time.perf_counter() - t)
        importtime = None
        if profile_imports:
            proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "kijito_pull", "--once", "--json",
                                   "--persona", PERSONA], env={**r.env, "PYTHONPATH": str(REPO)},
                                  capture_output=True, text=True, check=True)
            importtime = proc.stderr
        return {"runs": runs, "p50": percentile(times, 0.5), "p95": percentile(times, 0.95),
                "cpu_p50": percentile(cpu, 0.5), "importtime": importtime,
                "min": min(times), "max": max(times),
                "requests": sorted(set(requests)), "inbox_requests": sorted(set(inbox)),
                "python_p50": statistics.median(base), "python_requests_p50": statistics.median(req)}


def bench_catchup(gap: int, limit: int, via: str, profile: str | None) -> dict:
    with Sandbox(token=TOKEN, window_limit=limit).start() as sb, tempfile.TemporaryDirectory() as tmp:
        r = Runner(sb, Path(tmp), via)
        sb.send(to=PERSONA, sender="river", content="before the gap")
        r.run("--once", "--json", "--persona", PERSONA)
        for i in range(gap):
            sb.send(to=PERSONA, sender="river", content=f"gap message {i}: status report, all green")
        sb.clear_requests()
        out_path = Path(tmp) / "out.ndjson"
        with open(out_path, "wb") as out:
            elapsed, rss_kib, cpu_s = r.run("--once", "--json", "--persona", PERSONA, stdout=out)
        lines = out_path.read_bytes().count(b"\n")
        log = sb.requests
        result = {"gap": gap, "limit": limit, "elapsed": elapsed, "rss_mib": rss_kib / 1024, "cpu": cpu_s,
                  "requests": len(log), "inbox_requests": sum(1 for e in log if e["path"] == "/api/inbox"),
                  "target_requests": math.ceil(gap / limit) + 1, "lines": lines}
        if profile:
            sb.send(to=PERSONA, sender="river", content="reset")
            r.run("--once", "--json", "--persona", PERSONA)
            for i in range(gap):
                sb.send(to=PERSONA, sender="river", content=f"gap message {i}: status report, all green")
            with open(os.devnull, "wb") as out:
                r.run("--once", "--json", "--persona", PERSONA, stdout=out, profile=profile)
        return result


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30, help="nothing-new runs (default 30)")
    parser.add_argument("--gap", type=int, default=10_000, help="catch-up gap (default 10000)")
    parser.add_argument("--limit", type=int, default=50, help="window limit for the catch-up (default 50)")
    parser.add_argument("--via", choices=("script", "module"), default="script",
                        help="run the installed console script (default) or `python -m kijito_pull`")
    parser.add_argument("--only", choices=("idle", "catchup"), help="run one benchmark only")
    parser.add_argument("--profile", metavar="FILE", nargs="?", const="/tmp/kijito-catchup.prof",
                        help="also run the catch-up under cProfile, write FILE and print the top 25")
    args = parser.parse_args(argv)

    print(f"`{' '.join(shlex.quote(a) for a in [os.path.relpath(sys.executable, REPO), *sys.argv])}`  ")
    print(f"{datetime.date.today().isoformat()}, Python {platform.python_version()}, "
          f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start\n")
    print("| benchmark | metric | result | target | |")
    print("|---|---|---|---|---|")
    if args.only in (None, "idle"):
        a = bench_idle(args.runs, args.via, args.profile is not None)
        ms = 1000
        print(f"| `--once`, nothing new ({a['runs']} runs) | wall p50 | {a['p50'] * ms:.0f} ms | <= 250 ms | "
              f"{verdict(a['p50'] <= 0.250)} |")
        print(f"| | wall p95 | {a['p95'] * ms:.0f} ms | | |")
        print(f"| | wall min / max | {a['min'] * ms:.0f} / {a['max'] * ms:.0f} ms | | |")
        print(f"| | child CPU (user+sys) p50 | {a['cpu_p50'] * ms:.0f} ms | | |")
        print(f"| | requests per run | {', '.join(map(str, a['requests']))} | 1 | "
              f"{verdict(a['requests'] == [1])} |")
        print(f"| | for scale: `python -c pass` / `-c 'import requests'` p50 | {a['python_p50'] * ms:.0f} / "
              f"{a['python_requests_p50'] * ms:.0f} ms | | |")
    if args.only in (None, "catchup"):
        b = bench_catchup(args.gap, args.limit, args.via, args.profile)
        name = f"catch-up of {b['gap']:,} with a {b['limit']}-row window"
        print(f"| {name} | requests | {b['requests']} ({b['inbox_requests']} inbox) | "
              f"{b['target_requests']} | {verdict(b['requests'] <= b['target_requests'])} |")
        print(f"| | wall time | {b['elapsed']:.2f} s | <= 5 s | {verdict(b['elapsed'] <= 5)} |")
        print(f"| | per message | {b['elapsed'] / b['gap'] * 1000:.2f} ms | | |")
        print(f"| | child CPU (user+sys) | {b['cpu']:.2f} s | | |")
        print(f"| | peak RSS (child) | {b['rss_mib']:.1f} MiB | | |")
        print(f"| | events written | {b['lines']} | {b['gap']} | {verdict(b['lines'] == b['gap'])} |")
        if args.profile:
            import pstats

            print(f"\ncProfile of the catch-up ({args.profile}), top by cumulative time:\n```")
            pstats.Stats(args.profile, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
            print("```")
    if args.profile and args.only in (None, "idle") and a.get("importtime"):
        print("\n`-X importtime` of one nothing-new run, the heaviest imports (cumulative µs):\n```")
        rows = []
        for line in a["importtime"].splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].strip().isdigit():
                rows.append((int(parts[1]), parts[2].rstrip()))
        for cumulative, name in sorted(rows, reverse=True)[:20]:
            print(f"{cumulative:>9}  {name}")
        print("```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
