#!/usr/bin/env python3
"""`kijito-pull watch` side by side with kijito-inbox-monitor (the watcher it replaces), as markdown tables.

Both tools run as real subprocesses against the same kind of in-process fake server (a fresh one per
run), with NDJSON on a stdout pipe that a reader thread timestamps line by line (time.monotonic()).
`--server` picks it:
    sandbox  kijito_pull/sandbox (the default): the full fake, with its request log, fault rules and
             SQLite store; its own work per request is part of what is measured.
    plain    bench/plainserver.py: in-memory rows behind a bare stdlib HTTP/1.1 keep-alive server that
             answers only what a watcher calls, so the measurement is of the clients. Use it for the
             side-by-side latency ratio.

(1) Wake latency: one watched persona (`--persona lat`); after its `armed` event and a settle delay
    (the long-poll is then held), N messages are sent one at a time with seeded random gaps
    (the same gap sequence for both tools). Latency = the moment the `new` line carrying that
    message id is read, minus the moment just before `Sandbox.send`. Target p50 <= 50 ms, p99 <= 250 ms.
(2) Requests per idle minute with 1, 100 and 1,000 personas: personas added to the directory
    (every 10th one also gets a message before start), the tool started in all-personas mode,
    armed when every persona has its `armed` event, then a settle delay, then the sandbox request
    log is cleared and the tool left idle for the window. Requests that *arrive* in the window are
    counted by path and scaled to one minute. Target: flat in the persona count (one long-poll per hold).
(3) Peak memory: VmHWM from /proc/<pid>/status at the end of the idle window, and ru_maxrss from
    wait4() after the tool exits. Target (1,000 personas) <= 60 MiB.
(4) Idle cost: in the same idle window, CPU time and times scheduled in (wake-ups) of every thread
    (/proc/<pid>/task/*/schedstat), scaled to a minute, printed side by side with the wake p50 (issue 28:
    idle CPU no worse than the reference's with 1 and 1,000 personas, wake latency unchanged or better).
    `--before-exe PATH` adds kijito-pull at another commit as a third tool, for a before / after in one run:
    e.g. a shell script `PYTHONPATH=DIR exec .venv/bin/python -P -m kijito_pull "$@"` over
    `git archive COMMIT kijito_pull | tar -x -C DIR` (-P: else `-m` puts the working directory, this
    checkout, first on sys.path, and the "before" tool silently runs today's code).

    .venv/bin/python bench/bench_watch.py                     # full run (100 messages, 60 s windows)
    .venv/bin/python bench/bench_watch.py --quick             # 20 messages, 20 s windows (scaled to /min)
    .venv/bin/python bench/bench_watch.py --only latency --tools ours
    .venv/bin/python bench/bench_watch.py --only latency --server plain --messages 40 --rounds 3
                                   # the side-by-side ratio: the tools alternate, order flipped each round
    .venv/bin/python bench/bench_watch.py --only latency --server plain --messages 40 --strace /tmp/tr
                                   # what each tool does per wake: requests, syscalls, thread hops
    .venv/bin/python bench/bench_watch.py --server plain --sizes 1,1000 --messages 40 --rounds 2 \
        --before-exe /tmp/kp-before --before-label 6437a94
                                   # idle cost and wake p50 side by side, with kijito-pull at 6437a94 too

Requests per wake are counted by the server; with `--strace DIR` each latency run is also traced
(`strace -f`, attached after arming, detached before the tool stops; bench/stracewake.py reads it):
syscalls per message, and on the critical path of a wake (the long-poll answer read -> the `new` line
written) and after it (-> the next long-poll sent). A traced run's latencies are slowed by strace: read
its counts, and measure latency in a run without --strace. On a busy machine read ratios from
interleaved rounds (`--rounds`), not absolute figures from one run.

The reference is expected in its own venv, where `bash scripts/install-reference` puts it
(.harness/kim/, from PyPI, pinned to 0.6.1), or pass --ref-exe. The sandbox runs in this process
(threads), so its own work competes with both tools for the same cores.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import os
import platform
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from stats import percentile  # noqa: E402 - bench/ is on the path of a bench script

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from plainserver import PlainServer  # noqa: E402
from stracewake import Tracer, analyse  # noqa: E402
from stracewake import report as report_strace  # noqa: E402

from kijito_pull.sandbox import Sandbox  # noqa: E402

TOKEN = "bench-watch-token-5f2e"
SENDER = "bench-sender"
LAT_PERSONA = "lat"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Where scripts/install-reference installs kijito-inbox-monitor 0.6.1 (keep the two in step).
REFERENCE_EXE = Path(os.environ.get("KIJITO_PULL_HARNESS_DIR") or REPO / ".harness") / "kim" / "bin" / \
    "kijito-inbox-monitor"


# -- the two tools ---------------------------------------------------------------------------------


class Tool:
    key = ""
    label = ""

    def __init__(self, exe: str):
        self.exe = exe

    def argv(self, api_base: str, tmp: Path, personas: list[str] | None) -> list[str]:
        raise NotImplementedError

    def env(self, api_base: str, tmp: Path) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp / "home"),
                "KIJITOMON_TOKEN": TOKEN, "LANG": "C.UTF-8"}

    def version(self) -> str:
        out = subprocess.run([self.exe, "--version"], capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


class Ours(Tool):
    key = "ours"
    label = "kijito-pull watch"

    def argv(self, api_base, tmp, personas):
        who = ["--all-personas"] if personas is None else [a for p in personas for a in ("--persona", p)]
        return [self.exe, "watch", "--api-base", api_base, *who]

    def env(self, api_base, tmp):
        return {**super().env(api_base, tmp), "KIJITO_PULL_STATE_DIR": str(tmp / "state"),
                "KIJITO_PULL_CONFIG": os.devnull}


class Before(Ours):
    """kijito-pull at another commit (`--before-exe`: e.g. a wrapper running `python -m kijito_pull` from a
    worktree of that commit), so a change is measured beside the code it replaces in the same run."""

    key = "before"

    def __init__(self, exe: str, label: str):
        super().__init__(exe)
        self.label = label


class Reference(Tool):
    key = "ref"
    label = "kijito-inbox-monitor 0.6.1"

    def argv(self, api_base, tmp, personas):
        who = ["--all-personas"] if personas is None else [a for p in personas for a in ("--persona", p)]
        return [self.exe, "--api-base", api_base, *who, "--state-file", str(tmp / "kim" / "watch.state")]

    def version(self) -> str:
        py = Path(self.exe).parent / "python"
        out = subprocess.run([str(py), "-c", "import importlib.metadata as m; "
                              "print(m.version('kijito-inbox-monitor'))"], capture_output=True, text=True)
        return "kijito-inbox-monitor " + (out.stdout.strip() or "?")


# -- a running tool: stdout lines timestamped as they are read -------------------------------------


class Proc:
    def __init__(self, argv: list[str], env: dict[str, str]):
        self.argv = argv
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.bad_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self.cond = threading.Condition()
        self.eof = False
        self.rusage = None
        self.exit_code: int | None = None
        self.exit_after: float | None = None
        self.killed = False
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        for raw in iter(self.proc.stdout.readline, b""):
            ts = time.monotonic()
            try:
                event = json.loads(raw)
            except ValueError:
                self.bad_lines.append(raw.decode("utf-8", "replace"))
                continue
            with self.cond:
                self.events.append((ts, event))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def _read_err(self) -> None:
        for raw in iter(self.proc.stderr.readline, b""):
            self.stderr_lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float, start: int = 0):
        """(timestamp, event) of the first event from index `start` matching predicate, or None at the deadline."""
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.events):
                    ts, event = self.events[i]
                    if predicate(event):
                        return ts, event
                    i += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.eof:
                    return None
                self.cond.wait(remaining)

    def wait_armed(self, names: set[str], timeout: float) -> float | None:
        """Seconds from start until every persona in `names` has its `armed` event (None: timed out)."""
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        i = 0
        with self.cond:
            while True:
                while i < len(self.events):
                    ts, event = self.events[i]
                    if event.get("event") == "armed" and event.get("persona") in names:
                        seen.add(event["persona"])
                        if seen == names:
                            return ts - self.started
                    i += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.eof:
                    return None
                self.cond.wait(remaining)

    def kinds(self) -> collections.Counter:
        with self.cond:
            return collections.Counter(e.get("event") for _, e in self.events)

    def status(self) -> dict[str, int]:
        """VmHWM / VmRSS in KiB from /proc, while the process lives."""
        out = {}
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
        except OSError:
            pass
        return out

    def schedstat(self) -> tuple[int, int]:
        """(ns on a CPU, times scheduled in), summed over the tool's threads (/proc/<pid>/task/*/schedstat):
        a count-like measure of its work that a busy machine disturbs far less than wall-clock latency."""
        ns = slices = 0
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return 0, 0
        for tid in tasks:
            try:
                run, _wait, n = Path(f"/proc/{self.pid}/task/{tid}/schedstat").read_text().split()[:3]
            except (OSError, ValueError):
                continue
            ns, slices = ns + int(run), slices + int(n)
        return ns, slices

    def cpu_seconds(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM; SIGKILL after `grace` s. Reaps with wait4 for the child's own ru_maxrss."""
        if self.exit_code is not None:
            return
        sent = time.monotonic()
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        while True:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid == self.pid:
                break
            if time.monotonic() - sent > grace and not self.killed:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
            time.sleep(0.02)
        self.exit_after = time.monotonic() - sent
        self.exit_code = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.exit_code
        self.rusage = usage


# -- the benchmarks ---------------------------------------------------------------------------------


def make_server(kind: str) -> Sandbox | PlainServer:
    """A fresh fake server, started: the sandbox or the plain one (module docstring)."""
    if kind == "plain":
        return PlainServer(token=TOKEN, window_limit=20).start()
    return Sandbox(token=TOKEN, window_limit=20).start()


def bench_latency(tool: Tool, messages: int, gaps: list[float], settle: float, server: str = "sandbox",
                  trace: Path | None = None) -> dict[str, Any]:
    with make_server(server) as sb, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        sb.add_persona(LAT_PERSONA, memory_count=1)
        sb.add_persona(SENDER, memory_count=1)
        p = Proc(tool.argv(sb.url, tmp, [LAT_PERSONA]), tool.env(sb.url, tmp))
        try:
            if p.wait_armed({LAT_PERSONA}, 60) is None:
                raise RuntimeError(f"{tool.label} did not arm: {p.stderr_lines[-10:]}")
            time.sleep(settle)
            tracer = Tracer(p.pid, trace) if trace is not None else None
            startup = collections.Counter(r["path"] for r in sb.requests)
            sb.clear_requests()
            cpu0 = p.schedstat()
            latencies: list[float] = []
            lat_gaps: list[float] = []  # the gap before each measured message
            missed: list[int] = []
            new_fields: set[str] = set()
            sent_ids: list[int] = []
            for i in range(messages):
                time.sleep(gaps[i])
                index = len(p.events)
                sent = time.monotonic()
                mid = sb.send(to=LAT_PERSONA, sender=SENDER, content=f"wake {i}")
                sent_ids.append(mid)
                got = p.wait_for(lambda e, mid=mid: e.get("event") == "new" and e.get("id") == mid, 10.0, index)
                if got is None:
                    missed.append(mid)
                    continue
                latencies.append(got[0] - sent)
                lat_gaps.append(gaps[i])
                new_fields |= set(got[1])
            time.sleep(0.2)  # the last wake's acknowledgement and next hold belong to the window too
            cpu1 = p.schedstat()
            log = sb.requests
            if tracer is not None:
                tracer.stop()
            by_path = collections.Counter(r["path"] for r in log)
            duplicates = sum(n - 1 for n in collections.Counter(
                e.get("id") for _, e in p.events if e.get("event") == "new").values() if n > 1)
        finally:
            p.stop()
        delivered = collections.Counter(e.get("id") for _, e in p.events if e.get("event") == "new")
        return {"tool": tool.key, "server": server, "messages": messages, "latencies": latencies, "gaps": lat_gaps,
                "missed": missed, "never_delivered": sum(1 for i in sent_ids if i not in delivered),
                "startup_requests": dict(startup),
                "cpu_us_per_message": (cpu1[0] - cpu0[0]) / 1000 / max(messages, 1),
                "slices_per_message": (cpu1[1] - cpu0[1]) / max(messages, 1),
                "other_requests": len(log) - by_path.get("/api/notify/pending", 0) - by_path.get("/api/inbox", 0),
                "strace": analyse(trace, p.pid, messages) if trace is not None else None,
                "p50": percentile(latencies, 0.5) if latencies else None,
                "p90": percentile(latencies, 0.9) if latencies else None,
                "p99": percentile(latencies, 0.99) if latencies else None,
                "max": max(latencies) if latencies else None, "min": min(latencies) if latencies else None,
                "requests": dict(by_path), "duplicates": duplicates, "new_fields": sorted(new_fields),
                "kinds": dict(p.kinds()), "exit_code": p.exit_code, "exit_after": p.exit_after,
                "killed": p.killed, "stderr_tail": p.stderr_lines[-5:]}


def bench_idle(tool: Tool, personas: int, window: float, settle: float, server: str = "sandbox") -> dict[str, Any]:
    names = [f"p{i:04d}" for i in range(personas)]
    with make_server(server) as sb, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for i, name in enumerate(names):
            sb.add_persona(name, memory_count=1)
            if i % 10 == 0:
                sb.send(to=name, sender=SENDER, content=f"before start for {name}")
        p = Proc(tool.argv(sb.url, tmp, None), tool.env(sb.url, tmp))
        try:
            arm_seconds = p.wait_armed(set(names), 60 + personas * 0.5)
            if arm_seconds is None:
                raise RuntimeError(f"{tool.label} did not arm {personas} personas; saw {dict(p.kinds())}; "
                                   f"stderr {p.stderr_lines[-10:]}")
            time.sleep(settle)
            startup = sb.requests
            startup_kinds = dict(p.kinds())
            sb.clear_requests()
            cpu0, sched0 = p.cpu_seconds(), p.schedstat()
            time.sleep(window)
            log = sb.requests
            cpu1, sched1 = p.cpu_seconds(), p.schedstat()
            mem = p.status()
            idle_kinds = p.kinds() - collections.Counter(startup_kinds)
        finally:
            p.stop()
        by_path = collections.Counter(r["path"] for r in log)
        scale = 60.0 / window
        return {"tool": tool.key, "personas": personas, "window": window, "arm_seconds": arm_seconds,
                "startup_requests": dict(collections.Counter(r["path"] for r in startup)),
                "idle_requests": dict(by_path),
                "per_minute": {k: v * scale for k, v in by_path.items()},
                "per_minute_total": len(log) * scale,
                "held_at_end": sum(1 for r in log if r["status"] is None),
                "idle_notify_queries": [r["query"] for r in log if r["path"] == "/api/notify/pending"],
                "cpu_seconds_per_minute": None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) * scale,
                # schedstat: ns on a CPU and times scheduled in, every thread (the clock ticks above round
                # an idle minute's few milliseconds to 0 or 10 ms)
                "cpu_ms_per_minute": (sched1[0] - sched0[0]) / 1e6 * scale,
                "wakeups_per_minute": (sched1[1] - sched0[1]) * scale,
                "vm_hwm_kib": mem.get("VmHWM"), "vm_rss_kib": mem.get("VmRSS"),
                "maxrss_kib": p.rusage.ru_maxrss if p.rusage else None,
                "startup_kinds": startup_kinds, "idle_kinds": dict(idle_kinds),
                "stderr_lines": len(p.stderr_lines), "stderr_tail": p.stderr_lines[-3:],
                "exit_code": p.exit_code, "exit_after": p.exit_after, "killed": p.killed}


def git_state() -> str:
    """The commit benchmarked, and whether kijito_pull/ had uncommitted changes (other engineers work here)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "kijito_pull"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "git state unknown"
    return f"repo at {head or '?'}" + (" with uncommitted changes under kijito_pull/" if dirty else "")


# -- report -----------------------------------------------------------------------------------------


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.1f} ms"


def mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.1f} MiB"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def report_latency(results: list[dict], tools: dict[str, Tool], gaps: list[float]) -> None:
    server = results[0]["server"]
    traced = " (traced by strace: slowed, read the counts)" if results[0]["strace"] else ""
    print(f"\n### Wake latency, send to event line ({results[0]['messages']} messages, one persona, "
          f"gaps {min(gaps):.2f}-{max(gaps):.2f} s, seeded; {server} server){traced}\n")
    print("| tool | run | p50 | p90 | p99 | max | max after a gap < 0.5 s / >= 0.5 s | missed / never / duplicates | "
          "requests per message (notify / inbox / other) | CPU per message (times scheduled in) | "
          "target p50 <= 50 ms, p99 <= 250 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ok = r["p50"] is not None and r["p50"] <= 0.050 and r["p99"] <= 0.250 and not r["missed"]
        req = r["requests"]
        n = max(r["messages"], 1)
        short = [lat for lat, gap in zip(r["latencies"], r["gaps"]) if gap < 0.5]
        long_ = [lat for lat, gap in zip(r["latencies"], r["gaps"]) if gap >= 0.5]
        print(f"| {tools[r['tool']].label} | {r.get('round', 0) + 1} | {ms(r['p50'])} | {ms(r['p90'])} | "
              f"{ms(r['p99'])} | {ms(r['max'])} | "
              f"{ms(max(short) if short else None)} / {ms(max(long_) if long_ else None)} | "
              f"{len(r['missed'])} / {r['never_delivered']} / {r['duplicates']} | "
              f"{req.get('/api/notify/pending', 0) / n:.2f} / {req.get('/api/inbox', 0) / n:.2f} / "
              f"{r['other_requests'] / n:.2f} | {r['cpu_us_per_message']:.0f} us ({r['slices_per_message']:.1f}) | "
              f"{verdict(ok)} |")
    print("\nThe gap is the pause between reading one message's event line and sending the next. Requests are "
          "those that arrived from the first send to 0.2 s after the last `new` line (the next hold included); CPU is "
          "the tool's, all threads, over the same window (/proc/<pid>/task/*/schedstat).")
    for other in ("ref", "before"):
        if "ours" not in tools or other not in tools:
            continue
        rounds = sorted({r.get("round", 0) for r in results})
        ratios = []
        for k in rounds:
            pair = {r["tool"]: r for r in results if r.get("round", 0) == k}
            if pair.get("ours", {}).get("p50") and pair.get(other, {}).get("p50"):
                ratios.append(pair["ours"]["p50"] / pair[other]["p50"])
        pooled = {key: [x for r in results if r["tool"] == key for x in r["latencies"]] for key in ("ours", other)}
        if ratios and pooled["ours"] and pooled[other]:
            p_ours, p_other = percentile(pooled["ours"], 0.5), percentile(pooled[other], 0.5)
            print(f"\np50 ratio ours / {tools[other].label}: per round {', '.join(f'{x:.2f}x' for x in ratios)}; "
                  f"pooled over {len(rounds)} round(s) {ms(p_ours)} / {ms(p_other)} = **{p_ours / p_other:.2f}x**")


def report_idle(results: list[dict], tools: dict[str, Tool]) -> None:
    window = results[0]["window"]
    scaled = "" if window == 60 else f", counted over {window:g} s and scaled x{60 / window:g} to per minute"
    print(f"\n### Requests per idle minute, all-personas mode{scaled}\n")
    print("| tool | personas | notify/pending | inbox | personas | other | total / min | CPU ms / min | "
          "times scheduled in / min | time to arm | startup requests | target: flat |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in tools:
        rows = [r for r in results if r["tool"] == key]
        # One long-poll per 50 s hold and nothing else: at most ceil(window / 50) arrivals in the window.
        flat = bool(rows) and all(
            sum(r["idle_requests"].values()) <= math.ceil(r["window"] / 50)
            and sum(r["idle_requests"].values()) == r["idle_requests"].get("/api/notify/pending", 0)
            for r in rows)
        for j, r in enumerate(rows):
            pm = r["per_minute"]
            other = sum(v for k, v in pm.items() if k not in ("/api/notify/pending", "/api/inbox", "/api/personas"))
            print(f"| {tools[key].label} | {r['personas']:,} | {pm.get('/api/notify/pending', 0):g} | "
                  f"{pm.get('/api/inbox', 0):g} | {pm.get('/api/personas', 0):g} | {other:g} | "
                  f"{r['per_minute_total']:g} | {r['cpu_ms_per_minute']:.1f} | {r['wakeups_per_minute']:.0f} | "
                  f"{r['arm_seconds']:.1f} s | "
                  f"{sum(r['startup_requests'].values())} | {verdict(flat) if j == len(rows) - 1 else ''} |")


def report_side_by_side(lat: list[dict], idle: list[dict], tools: dict[str, Tool]) -> None:
    """Issue 28's comparison in one table: idle CPU and wake-ups per minute at each size, and wake p50."""
    if not lat or not idle:
        return
    sizes = sorted({r["personas"] for r in idle})
    print("\n### Idle cost and wake latency, side by side (one run)\n")
    head = " | ".join(f"idle CPU ms / min, {n:,} | times scheduled in / min, {n:,}" for n in sizes)
    print(f"| tool | {head} | wake p50 (pooled) |")
    print("|---|" + "---|" * (2 * len(sizes) + 1))
    by: dict[str, dict[int, dict]] = {k: {r["personas"]: r for r in idle if r["tool"] == k} for k in tools}
    p50 = {k: percentile([x for r in lat if r["tool"] == k for x in r["latencies"]], 0.5) for k in tools
           if any(r["tool"] == k and r["latencies"] for r in lat)}
    for key, tool in tools.items():
        cells = " | ".join(f"{by[key][n]['cpu_ms_per_minute']:.1f} | {by[key][n]['wakeups_per_minute']:.0f}"
                           if n in by[key] else "- | -" for n in sizes)
        print(f"| {tool.label} | {cells} | {ms(p50.get(key))} |")
    if "ours" in tools and "ref" in tools:
        worse = [n for n in sizes if n in by["ours"] and n in by["ref"]
                 and by["ours"][n]["cpu_ms_per_minute"] > by["ref"][n]["cpu_ms_per_minute"]]
        ratio = p50["ours"] / p50["ref"] if p50.get("ours") and p50.get("ref") else None
        print(f"\nIdle CPU no worse than the reference's at every size: {verdict(not worse)}"
              f"{f' (worse at {worse})' if worse else ''}; wake p50 ours / reference: "
              f"{'-' if ratio is None else f'{ratio:.2f}x'}. CPU and times scheduled in are "
              f"/proc/<pid>/task/*/schedstat over the idle window, every thread, scaled to a minute.")


def report_memory(results: list[dict], tools: dict[str, Tool]) -> None:
    print("\n### Memory (all-personas mode, idle)\n")
    print("| tool | personas | VmHWM at end of idle window | VmRSS then | ru_maxrss (wait4, after exit) | "
          "target <= 60 MiB at 1,000 |")
    print("|---|---|---|---|---|---|")
    for r in results:
        target = ""
        if r["personas"] == 1000:
            peak = max(x for x in (r["vm_hwm_kib"], r["maxrss_kib"]) if x is not None)
            target = verdict(peak <= 60 * 1024)
        print(f"| {tools[r['tool']].label} | {r['personas']:,} | {mib(r['vm_hwm_kib'])} | {mib(r['vm_rss_kib'])} | "
              f"{mib(r['maxrss_kib'])} | {target} |")
    print("\nVmHWM is the figure to read. ru_maxrss can be higher than the tool ever was: Linux folds the "
          "pre-exec address space (here this benchmark process, which holds the sandbox) into the child's "
          "maxrss at exec.")


def report_behaviour(lat: list[dict], idle: list[dict], tools: dict[str, Tool]) -> None:
    print("\n### Events and shutdown\n")
    print("| tool | run | events at startup | events while idle | stderr lines | SIGTERM -> exit |")
    print("|---|---|---|---|---|---|")
    for r in idle:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["startup_kinds"].items()))
        idle_k = ", ".join(f"{k} {v}" for k, v in sorted(r["idle_kinds"].items())) or "none"
        exit_ = ("killed after 5 s" if r["killed"] else f"{r['exit_code']} in {r['exit_after']:.2f} s")
        run = f"{r['personas']:,} persona{'s' if r['personas'] != 1 else ''}"
        print(f"| {tools[r['tool']].label} | {run} | {kinds} | {idle_k} | {r['stderr_lines']} | {exit_} |")
    for r in lat:
        exit_ = ("killed after 5 s" if r["killed"] else f"{r['exit_code']} in {r['exit_after']:.2f} s")
        print(f"| {tools[r['tool']].label} | latency | fields of `new`: {' '.join(r['new_fields'])} | "
              f"duplicates {r['duplicates']} | | {exit_} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short run: 20 messages, 20 s idle windows")
    parser.add_argument("--messages", type=int, help="messages for the latency run (default 100; quick 20)")
    parser.add_argument("--idle-seconds", type=float, help="idle window (default 60; quick 20)")
    parser.add_argument("--sizes", default="1,100,1000", help="persona counts for the idle runs (1,100,1000)")
    parser.add_argument("--gap-min", type=float, default=0.05, help="shortest gap between sends (0.05 s)")
    parser.add_argument("--gap-max", type=float, default=1.0, help="longest gap between sends (1.0 s)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the gap sequence (7)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds after arming before measuring (2)")
    parser.add_argument("--tools", default="ours,ref", help="comma-separated: ours, ref")
    parser.add_argument("--only", choices=("latency", "idle"), help="run one benchmark only")
    parser.add_argument("--ours-exe", default=str(REPO / ".venv" / "bin" / "kijito-pull"))
    parser.add_argument("--ref-exe", default=str(REFERENCE_EXE),
                        help="the reference's console script (default: where scripts/install-reference puts it)")
    parser.add_argument("--before-exe", metavar="PATH",
                        help="also run kijito-pull from another commit (an executable taking kijito-pull's "
                             "arguments), as a third tool")
    parser.add_argument("--before-label", default="the base commit", metavar="TEXT",
                        help="how the tables name --before-exe's commit")
    parser.add_argument("--server", choices=("sandbox", "plain"), default="sandbox",
                        help="the fake server both tools talk to: sandbox (kijito_pull/sandbox, default) or "
                             "plain (bench/plainserver.py: bare and in-memory, so the clients are measured)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="latency runs per tool, interleaved (ours, ref / ref, ours / ...): ratios per "
                             "round and pooled over the rounds (1)")
    parser.add_argument("--strace", metavar="DIR",
                        help="trace each latency run with strace -f into DIR and report syscalls and thread "
                             "hops per wake (slows the run: use the counts, not its latencies)")
    parser.add_argument("--json", metavar="FILE", help="also write every measurement as JSON")
    args = parser.parse_args(argv)
    messages = args.messages or (20 if args.quick else 100)
    window = args.idle_seconds or (20.0 if args.quick else 60.0)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    available = {"ours": Ours(args.ours_exe), "ref": Reference(args.ref_exe)}
    if args.before_exe:
        available["before"] = Before(args.before_exe, f"kijito-pull watch at {args.before_label}")
        if "before" not in args.tools.split(","):
            args.tools += ",before"
    tools = {k: available[k] for k in args.tools.split(",") if k}
    for tool in tools.values():
        if not Path(tool.exe).exists():
            hint = " (run: bash scripts/install-reference)" if tool.key == "ref" else ""
            raise SystemExit(f"{tool.label}: {tool.exe} not found{hint}")

    rng = random.Random(args.seed)
    gaps = [rng.uniform(args.gap_min, args.gap_max) for _ in range(messages)]
    print(f"`{' '.join(shlex.quote(a) for a in [os.path.relpath(sys.executable, REPO), *sys.argv])}`  ")
    print(f"{datetime.datetime.now().astimezone().isoformat(timespec='seconds')}, {os.cpu_count()} cores "
          f"({platform.processor() or platform.machine()}), {platform.system()} {platform.release()}, "
          f"Python {platform.python_version()}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start  ")
    print("; ".join(f"{t.label}: `{t.version()}` ({t.exe})" for t in tools.values()) + f"; {git_state()}")
    sys.stdout.flush()

    lat: list[dict] = []
    idle: list[dict] = []
    trace_dir = Path(args.strace) if args.strace else None
    if trace_dir is not None:
        trace_dir.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "latency"):
        for k in range(max(1, args.rounds)):
            order = list(tools.values()) if k % 2 == 0 else list(tools.values())[::-1]
            for tool in order:
                print(f"  latency: {tool.label}, round {k + 1} ...", file=sys.stderr, flush=True)
                trace = trace_dir / f"{tool.key}-{k + 1}.trace" if trace_dir is not None else None
                lat.append({**bench_latency(tool, messages, gaps, args.settle, args.server, trace), "round": k})
        lat.sort(key=lambda r: (r["round"], list(tools).index(r["tool"])))
        report_latency(lat, tools, gaps)
        if trace_dir is not None:
            report_strace([(f"{tools[r['tool']].label} ({r['round'] + 1})", r["strace"]) for r in lat])
    if args.only in (None, "idle"):
        for n in sizes:
            for tool in tools.values():
                print(f"  idle: {tool.label}, {n} personas ...", file=sys.stderr, flush=True)
                idle.append(bench_idle(tool, n, window, args.settle, args.server))
        idle.sort(key=lambda r: (list(tools).index(r["tool"]), r["personas"]))
        report_idle(idle, tools)
        report_memory(idle, tools)
        report_side_by_side(lat, idle, tools)
    report_behaviour(lat, idle, tools)
    if args.json:
        Path(args.json).write_text(json.dumps({"latency": lat, "idle": idle, "gaps": gaps}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
