#!/usr/bin/env python3
"""Every entry point on one persona and one consumer at once, while mail keeps arriving (issue 6, item 4).

One in-process sandbox; on persona `concbot`, consumer `agent` (the one the hooks, watch and the pi
extension share), for --seconds of traffic:

  - `kijito-pull watch` (NDJSON to a file);
  - the pi child, `kijito-pull watch --ack-stdin`, its events acknowledged by a thread as they come;
  - `kijito-pull hook claude-session-start`, `hook claude-stop`, `hook codex-session-start` and
    `hook codex-stop`, each called again and again;
  - waves of 16 concurrent `kijito-pull --once --json --lock-timeout 30`;
  - a sender thread: mail for the persona from others, noise for other inboxes, and self-echo (mail the
    persona wrote itself, which is never delivered).

Then the traffic stops, the long-running consumers are given time to hand over the rest, one last
`--once` sweeps up, and everything is ended (end of stdin for the pi child, SIGTERM for watch). Every
process's stdout goes to a file (a pipe nobody reads would block its writer, which holds the lock).

Checked (exit status 1 on any failure):
  exactly once   the union of every consumer's deliveries is every message sent to the persona by
                 others, each once: what watch and --once printed, what the pi child had acknowledged,
                 and the message ids named in the hooks' additionalContext / Stop reason
  order          within each run (and each long-running consumer) ids increase
  exits          every process exits 0 within its bound (no deadlock); none is left running
  lock           `kijito-pull status --json` shows the cursor's lock free at the end

    .venv/bin/python scripts/concurrency_all.py --seconds 60
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402
from tests.entrypoints import (  # noqa: E402
    HOOKS,
    ONCE,
    FileEvents,
    PiChild,
    System,
    hook_ids,
    ndjson_events,
    new_ids,
    stderr_problems,
)

PERSONA = "concbot"
SENDERS = ("river", "loom", "argus")
PROC_BOUND = 90.0  # seconds any one short-lived process may take (--lock-timeout is 30)


@dataclass
class ShortRun:
    kind: str
    out: Path
    err: Path
    code: int | None = None
    seconds: float = 0.0
    ids: list[int] = field(default_factory=list)


class Concurrency:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.token = "conc-" + secrets.token_hex(12)
        self.work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kijito-conc-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.sandbox = Sandbox(token=self.token, window_limit=20).start()
        self.sandbox.add_persona(PERSONA, memory_count=1)
        self.system = System(self.sandbox.url, self.token, self.work, PERSONA)
        self.expected: list[int] = []
        self.self_echo: list[int] = []
        self.runs: list[ShortRun] = []
        self.runs_lock = threading.Lock()
        self.problems: list[str] = []
        self.stop_traffic = threading.Event()
        self.stop_callers = threading.Event()

    # -- the parts ----------------------------------------------------------------------------------

    def sender(self) -> None:
        n = 0
        while not self.stop_traffic.is_set():
            r = self.rng.random()
            if r < 0.1:
                self.sandbox.send(to=self.rng.choice(("elsewhere", "noise")), sender="river", content=f"noise {n}")
            elif r < 0.13:
                self.self_echo.append(self.sandbox.send(to=PERSONA, sender=PERSONA, content=f"echo {n}"))
            else:
                self.expected.append(self.sandbox.send(to=PERSONA, sender=self.rng.choice(SENDERS),
                                                       content=f"mail {n} " + "z" * self.rng.choice((5, 60, 300))))
            n += 1
            self.stop_traffic.wait(self.rng.uniform(0.0, 2 * self.args.send_interval))

    def _short(self, kind: str, spawn) -> ShortRun:
        out, err = self.system.next_paths(kind)
        run = ShortRun(kind, out, err)
        started = time.monotonic()
        proc = spawn(out, err)
        try:
            run.code = proc.wait(PROC_BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            run.code = None
            self.problems.append(f"{kind} run {out.name} did not exit within {PROC_BOUND:g} s (deadlock?)")
        run.seconds = time.monotonic() - started
        with self.runs_lock:
            self.runs.append(run)
        return run

    def hook_caller(self, entry: str) -> None:
        n = 0
        while not self.stop_callers.is_set():
            n += 1
            sid = f"sess-{entry}-{n % 3}"
            self._short(entry, lambda out, err, sid=sid: self.system.spawn_hook(entry, out, err, session_id=sid))
            self.stop_callers.wait(self.rng.uniform(0.0, 0.3))

    def once_waves(self) -> None:
        while not self.stop_callers.is_set():
            threads = [threading.Thread(target=self._short, args=(ONCE, lambda out, err: self.system.spawn(
                self.system.once_argv("--lock-timeout", "30"), out, err))) for _ in range(self.args.once)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    # -- the run ------------------------------------------------------------------------------------

    def run(self) -> dict:
        started = time.monotonic()
        first = self.system.run(self.system.once_argv())  # the cursor exists before the crowd arrives
        if first.code != 0:
            raise SystemExit(f"first pull failed: {first.stderr}")
        watch_out, watch_err = self.system.next_paths("watch")
        watch = self.system.spawn(self.system.watch_argv("--wait", "20"), watch_out, watch_err)
        watch_events = FileEvents(watch_out)
        pi = PiChild.start(self.system, "--wait", "20")
        if watch_events.wait_for(lambda e: e["event"] == "armed", 30) is None or \
                pi.wait_for(lambda e: e["event"] == "armed", 30) is None:
            raise SystemExit("watch or the pi child never armed")
        workers = [threading.Thread(target=self.sender)]
        workers += [threading.Thread(target=self.hook_caller, args=(e,)) for e in HOOKS]
        workers += [threading.Thread(target=self.once_waves)]
        for t in workers:
            t.start()
        time.sleep(self.args.seconds)
        self.stop_traffic.set()
        self.stop_callers.set()
        for t in workers:
            t.join(PROC_BOUND * 2)
            if t.is_alive():
                self.problems.append(f"{t.name} did not finish (a process never exited?)")
        traffic_s = time.monotonic() - started

        # Give the long-running consumers time to hand over what is left, then sweep with --once.
        expected = set(self.expected)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not expected <= self._delivered_set(watch_events, pi):
            time.sleep(0.2)
        settle_s = time.monotonic() - started - traffic_s
        time.sleep(1.0)  # a late duplicate from watch or the pi child would land now
        sweep = self._short("sweep", lambda out, err: self.system.spawn(self.system.once_argv(), out, err))

        # End them the way their controllers do; a bound on each is the deadlock check.
        pi_code = pi.close(timeout=30)
        watch.send_signal(signal.SIGTERM)
        try:
            watch_code = watch.wait(30)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch_code = watch.wait()
            self.problems.append("watch did not exit within 30 s of SIGTERM")
        if pi_code != 0:
            self.problems.append(f"the pi child exited {pi_code} at the end of its stdin")
        if watch_code != 0:
            self.problems.append(f"watch exited {watch_code} on SIGTERM")
        for path in (watch_err, pi.err):
            self.problems += [f"{path.name}: {p}" for p in stderr_problems(path.read_text(errors="replace"))]
        return self.check(watch_events, pi, sweep, traffic_s, settle_s, time.monotonic() - started)

    def _delivered_set(self, watch_events: FileEvents, pi: PiChild) -> set[int]:
        ids = set(watch_events.new_ids()) | set(pi.acked_ids())
        with self.runs_lock:
            runs = list(self.runs)
        for run in runs:
            ids |= set(self._parse(run))
        return ids

    def _parse(self, run: ShortRun) -> list[int]:
        if run.ids or run.code is None:
            return run.ids
        text = run.out.read_text(errors="replace")
        if run.kind in HOOKS:
            try:
                run.ids = hook_ids(text, self.expected)
            except (AssertionError, ValueError) as exc:
                self.problems.append(f"{run.out.name}: not one JSON object the harness reads ({exc})")
                run.ids = [i for line in text.splitlines() if line.strip() for i in hook_ids(line, self.expected)]
        else:
            events, torn = ndjson_events(text)
            if torn:
                self.problems.append(f"{run.out.name}: torn last line")
            run.ids = new_ids(events)
        return run.ids

    # -- checking -----------------------------------------------------------------------------------

    def check(self, watch_events: FileEvents, pi: PiChild, sweep: ShortRun, traffic_s: float, settle_s: float,
              elapsed: float) -> dict:
        per_consumer: dict[str, list[list[int]]] = {"watch": [watch_events.new_ids()], "pi-child": [pi.acked_ids()]}
        for run in self.runs:
            ids = self._parse(run)
            per_consumer.setdefault(run.kind, []).append(ids)
            if run.code != 0:
                self.problems.append(f"{run.kind} run {run.out.name} exited {run.code}: "
                                     f"{run.err.read_text(errors='replace')[-400:]!r}")
            stderr = run.err.read_text(errors="replace")
            self.problems += [f"{run.out.name}: {p}" for p in stderr_problems(stderr)]
        everything = [i for runs in per_consumer.values() for ids in runs for i in ids]
        for kind, runs in per_consumer.items():
            for ids in runs:
                if ids != sorted(ids):
                    self.problems.append(f"{kind}: ids out of order: {ids[:40]}")
        counts: dict[int, int] = {}
        for i in everything:
            counts[i] = counts.get(i, 0) + 1
        duplicated = sorted(i for i, c in counts.items() if c > 1)
        lost = sorted(set(self.expected) - set(counts))
        echoed = sorted(set(self.self_echo) & set(counts))
        unknown = sorted(set(counts) - set(self.expected) - set(self.self_echo))
        if duplicated:
            where = {i: [k for k, runs in per_consumer.items() for ids in runs if i in ids] for i in duplicated[:10]}
            self.problems.append(f"delivered more than once: {len(duplicated)} messages, e.g. {where}")
        if lost:
            self.problems.append(f"lost {len(lost)} messages: {lost[:20]}")
        if echoed:
            self.problems.append(f"self-echo delivered: {echoed[:20]}")
        if unknown:
            self.problems.append(f"delivered ids never sent to {PERSONA}: {unknown[:20]}")
        rows = self.system.lock_rows()
        lock = rows[0].get("lock") if len(rows) == 1 else rows
        if lock != "free":
            self.problems.append(f"lock not free at the end: {lock}")
        delivered_by = {k: sum(len(ids) for ids in runs) for k, runs in per_consumer.items()}
        return {
            "seconds": self.args.seconds,
            "sent": len(self.expected),
            "self_echo_sent": len(self.self_echo),
            "delivered": len(set(counts) & set(self.expected)),
            "deliveries": len(everything),
            "duplicated": len(duplicated),
            "lost": len(lost),
            "delivered_by": delivered_by,
            "runs": {k: len(v) for k, v in per_consumer.items()},
            "sweep_delivered": len(sweep.ids),
            "max_run_s": round(max((r.seconds for r in self.runs), default=0.0), 2),
            "max_hook_s": round(max((r.seconds for r in self.runs if r.kind in HOOKS),
                                    default=0.0), 2),
            "lock": lock,
            "traffic_s": round(traffic_s, 1),
            "settle_s": round(settle_s, 1),
            "elapsed_s": round(elapsed, 1),
            "seed": self.args.seed,
            "problems": self.problems,
            "workdir": str(self.work),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long mail keeps arriving (default 60)")
    parser.add_argument("--once", type=int, default=16, help="concurrent --once runs per wave (default 16)")
    parser.add_argument("--send-interval", type=float, default=0.03, help="mean seconds between sends")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--workdir", help="keep outputs here (default: a temp dir, removed on success)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = secrets.randbelow(2**31)
    c = Concurrency(args)
    try:
        summary = c.run()
    finally:
        c.sandbox.stop()
    ok = not summary["problems"]
    if ok and not args.workdir:
        shutil.rmtree(c.work, ignore_errors=True)
        summary["workdir"] = None
    if args.json:
        print(json.dumps(summary))
    else:
        by = " ".join(f"{k}={v}" for k, v in summary["delivered_by"].items())
        print(f"seconds={summary['seconds']:g} sent={summary['sent']} delivered={summary['delivered']} "
              f"duplicated={summary['duplicated']} lost={summary['lost']} lock={summary['lock']} "
              f"max_hook_s={summary['max_hook_s']} elapsed={summary['elapsed_s']}s seed={summary['seed']}")
        print(f"  delivered by: {by}; runs: {summary['runs']}")
        for p in summary["problems"][:50]:
            print("PROBLEM: " + p)
        if not ok:
            print(f"outputs kept in {c.work}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
