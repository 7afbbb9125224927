#!/usr/bin/env python3
"""kill -9 crash-consistency trials for `kijito-pull --once --json` (design.md, "Delivery contract").

An in-process sandbox (threads) serves the API; each trial sends a random batch, starts
`python -m kijito_pull --once --json --persona P` with stdout appended to a file this script opened
(so every line the child wrote and flushed survives its death), and SIGKILLs it after a random delay
spread over the whole life of a run: interpreter start, imports, fetch and backward walk, delivery,
and the state write after each delivery. After the trials, unkilled pulls run until one delivers
nothing. Then the stdout files are checked:

  lost        sent mail for P never delivered (must be 0)
  order       each run delivers strictly increasing ids, and no run delivers id N+1 while an
              older message for P is still undelivered (a consumer never sees N+1 before N)
  self-echo   mail P wrote itself is never delivered
  duplicates  a message delivered twice can only come from a kill between its delivery and its ack,
              so per killed run we count the ids it delivered that a later run delivered again;
              with one ack per message that is at most 1 per kill

    .venv/bin/python scripts/crash_trials.py --trials 2000 --seed 1

Exit status 0 only if nothing was lost, order held, no trial caused more than one duplicate, every
unkilled run exited 0 and the cursor's lock is free at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402

PERSONA = "crashbot"
OTHERS = ("elsewhere", "noise")
SENDERS = ("river", "loom", "argus")


@dataclass
class Run:
    """One child process: a trial (maybe killed), a calibration run or a drain run."""

    index: int
    kind: str  # "calibrate" | "trial" | "drain"
    out: Path
    err: Path
    batch: int = 0
    delay: float | None = None  # seconds before SIGKILL; None = not killed
    returncode: int | None = None
    elapsed: float = 0.0
    ids: list[int] = field(default_factory=list)
    torn: bool = False  # the last line was cut by the kill
    events: int = 0

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


class Trials:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.token = "crash-" + secrets.token_hex(12)
        self.work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kijito-crash-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.state_dir = self.work / "state"
        self.out_dir = self.work / "runs"
        self.out_dir.mkdir(exist_ok=True)
        self.sandbox = Sandbox(token=self.token, window_limit=args.window, content_budget=args.budget).start()
        self.env = {
            "KIJITOMON_TOKEN": self.token,
            "KIJITO_BASE": self.sandbox.url,
            "KIJITO_PULL_STATE_DIR": str(self.state_dir),
            "KIJITO_PULL_CONFIG": os.devnull,
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": args.pythonpath or str(REPO),
            "HOME": str(self.work),
        }
        self.expected: set[int] = set()  # mail for P from others: must be delivered
        self.self_echo: set[int] = set()  # mail P wrote itself: must never be delivered
        self.runs: list[Run] = []
        self.base_s = 0.3
        self.per_msg_s = 0.004
        # Load from other work on the machine changes run times; this scale follows it so that about
        # three runs in four are killed (x1.02 after a kill, x0.94 after a run that finished first).
        self.scale = 1.0

    # -- driving -----------------------------------------------------------------------------------

    def send_batch(self, n: int) -> None:
        for _ in range(n):
            r = self.rng.random()
            if r < 0.15:  # other inboxes' mail: P's ids have gaps
                self.sandbox.send(to=self.rng.choice(OTHERS), sender=self.rng.choice(SENDERS), content="x")
                continue
            size = self.rng.choice((8, 40, 200)) if self.rng.random() < 0.95 else self.rng.randint(1000, 6000)
            body = f"m{len(self.expected)} " + "y" * size
            if r < 0.18:
                self.self_echo.add(self.sandbox.send(to=PERSONA, sender=PERSONA, content=body))
            else:
                self.expected.add(self.sandbox.send(to=PERSONA, sender=self.rng.choice(SENDERS), content=body))

    def batch_size(self) -> int:
        if self.rng.random() < self.args.big_share:
            return self.rng.randint(self.args.max_batch + 1, self.args.big_batch)
        return self.rng.randint(1, self.args.max_batch)

    def spawn(self, kind: str, delay: float | None, batch: int) -> Run:
        index = len(self.runs)
        run = Run(index, kind, self.out_dir / f"{index:05d}.out", self.out_dir / f"{index:05d}.err", batch, delay)
        argv = [sys.executable, "-m", "kijito_pull", "--once", "--json", "--persona", PERSONA,
                "--lock-timeout", "30"]
        with open(run.out, "ab") as out, open(run.err, "ab") as err:
            started = time.monotonic()
            proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    cwd=str(self.work))
        try:
            if delay is not None:
                try:
                    proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
            run.returncode = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise SystemExit(f"run {index} did not finish within 120 s (deadlock?)") from None
        run.elapsed = time.monotonic() - started
        self.runs.append(run)
        return run

    def calibrate(self) -> None:
        """Time unkilled runs with no mail and with a full batch, so kill delays cover a whole run."""
        small, large = [], []
        for _ in range(3):
            small.append(self.spawn("calibrate", None, 0).elapsed)
        for _ in range(3):
            n = self.args.max_batch
            self.send_batch(n)
            large.append((self.spawn("calibrate", None, n).elapsed, n))
        self.base_s = statistics.median(small)
        per = [(t - self.base_s) / n for t, n in large]
        self.per_msg_s = max(0.0005, statistics.median(per))

    def estimate(self, pending: int) -> float:
        return (self.base_s + self.per_msg_s * pending) * self.scale

    def trial(self) -> Run:
        n = self.batch_size()
        self.send_batch(n)
        # Mail left undelivered by an earlier kill is pending too; estimate the whole run.
        pending = len(self.expected) - len({i for r in self.runs for i in r.ids})
        estimate = self.estimate(max(pending, n))
        if self.rng.random() < 0.5:
            delay = self.rng.uniform(0.0, estimate * 1.1)  # anywhere: start, imports, fetch, delivery, exit
        else:
            # Most of a run is interpreter start; aim half the kills at the fetch/deliver/ack stretch.
            delay = self.rng.uniform(self.base_s * self.scale * 0.8, estimate * 1.05)
        run = self.spawn("trial", delay, n)
        self.scale = min(4.0, max(0.25, self.scale * (1.02 if run.killed else 0.94)))
        self.parse(run)
        return run

    def drain(self) -> None:
        for _ in range(self.args.drain_limit):
            run = self.spawn("drain", None, 0)
            self.parse(run)
            if not run.ids:
                return
        raise SystemExit(f"drain: still delivering after {self.args.drain_limit} unkilled runs")

    # -- checking ----------------------------------------------------------------------------------

    def parse(self, run: Run) -> None:
        data = run.out.read_bytes()
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        elif lines:
            run.torn = True  # no newline at the end: the kill cut a write short; ignore it
            lines.pop()
        for line in lines:
            event = json.loads(line)  # a complete line that is not JSON is a real failure
            run.events += 1
            if event.get("event") == "new":
                if event.get("persona") != PERSONA:
                    raise SystemExit(f"run {run.index}: event for another persona: {event!r}")
                run.ids.append(event["id"])

    def check(self) -> dict:
        problems, delivered_at, per_run = audit_delivery(self.runs, self.expected, self.self_echo)
        duplicates = sum(len(w) - 1 for w in delivered_at.values())
        kills = sum(1 for r in self.runs if r.killed)
        check_one_ack_per_kill(self.runs, per_run, duplicates, kills, problems)
        lock = self.lock_status()
        if lock != "free":
            problems.append(f"lock not free at the end: {lock}")
        trials = [r for r in self.runs if r.kind == "trial"]
        return {
            "trials": len(trials),
            "kills": kills,
            "killed_before_output": sum(1 for r in trials if r.killed and r.events == 0),
            "killed_during_delivery": sum(1 for r in trials if r.killed and r.ids),
            "exited_before_kill": sum(1 for r in trials if not r.killed),
            "torn_lines": sum(1 for r in self.runs if r.torn),
            "sent": len(self.expected),
            "self_echo_sent": len(self.self_echo),
            "delivered": len(set(delivered_at) & self.expected),
            "deliveries": sum(len(w) for w in delivered_at.values()),
            "lost": len(self.expected - set(delivered_at)),
            "duplicates": duplicates,
            "max_dup_per_kill": max(per_run.values(), default=0),
            "backward_pages": None,
            "drain_runs": sum(1 for r in self.runs if r.kind == "drain"),
            "stale_tmp_files": len(list((self.state_dir / "cursors").glob(".*.tmp"))),
            "calibration": {"base_s": round(self.base_s, 4), "per_msg_s": round(self.per_msg_s, 5),
                            "final_scale": round(self.scale, 3)},
            "child_seconds": round(sum(r.elapsed for r in self.runs), 1),
            "seed": self.args.seed,
            "elapsed_s": None,
            "problems": problems,
            "workdir": str(self.work),
        }

    def lock_status(self):
        proc = subprocess.run([sys.executable, "-m", "kijito_pull", "status", "--json", "--persona", PERSONA],
                              env=self.env, capture_output=True, text=True, timeout=60)
        rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        if proc.returncode != 0 or len(rows) != 1:
            return f"status failed ({proc.returncode}): {proc.stdout!r} {proc.stderr!r}"
        return rows[0].get("lock")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--max-batch", type=int, default=40, help="usual batch: 1..N messages (default 40)")
    parser.add_argument("--big-share", type=float, default=0.1, help="share of trials with a big batch")
    parser.add_argument("--big-batch", type=int, default=150, help="big batch: up to N messages (default 150)")
    parser.add_argument("--window", type=int, default=20, help="sandbox window_limit (default 20)")
    parser.add_argument("--budget", type=int, default=16384, help="sandbox content budget in bytes")
    parser.add_argument("--drain-limit", type=int, default=10)
    parser.add_argument("--pythonpath", help="run the kijito_pull found here instead of this checkout's "
                                             "(to check that the trials catch a deliberately broken copy)")
    parser.add_argument("--workdir", help="keep state and per-run output here (default: a temp dir, "
                                          "removed on success)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = secrets.randbelow(2**31)
    started = time.monotonic()
    t = Trials(args)
    try:
        # An established cursor first (first contact has its own, separately tested rules).
        first = t.spawn("calibrate", None, 0)
        if first.returncode != 0:
            raise SystemExit(f"first pull failed: {first.err.read_text()}")
        t.calibrate()
        for r in t.runs:
            t.parse(r)
        for n in range(args.trials):
            t.trial()
            if not args.json and (n + 1) % 100 == 0:
                print(f"  {n + 1}/{args.trials} trials, {time.monotonic() - started:.0f} s", file=sys.stderr)
        t.drain()
        walks = sum(1 for e in t.sandbox.requests if e["path"] == "/api/inbox" and "before_id" in e["query"])
        summary = t.check()
        summary["backward_pages"] = walks
        summary["elapsed_s"] = round(time.monotonic() - started, 1)
    finally:
        t.sandbox.stop()
    ok = not summary["problems"]
    if ok and not args.workdir:
        shutil.rmtree(t.work, ignore_errors=True)
        summary["workdir"] = None
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"trials={summary['trials']} kills={summary['kills']} sent={summary['sent']} "
              f"delivered={summary['delivered']} lost={summary['lost']} duplicates={summary['duplicates']} "
              f"max_dup_per_kill={summary['max_dup_per_kill']} seed={summary['seed']} "
              f"elapsed={summary['elapsed_s']}s")
        print(f"  kills before any output={summary['killed_before_output']}, during delivery="
              f"{summary['killed_during_delivery']}, runs finished before their kill={summary['exited_before_kill']}, "
              f"torn last lines={summary['torn_lines']}, backward pages={summary['backward_pages']}, "
              f"self-echo sent={summary['self_echo_sent']}, stale temp files={summary['stale_tmp_files']}")
        for p in summary["problems"][:50]:
            print("PROBLEM: " + p)
        if not ok:
            print(f"outputs kept in {t.work}")
    return 0 if ok else 1



def check_one_ack_per_kill(runs: list, per_run: dict[int, int], duplicates: int, kills: int,
                           problems: list[str]) -> None:
    """With one ack per message, a repeat comes only from the run that delivered it, killed before its ack
    was saved: at most one per kill, and none from a run that was not killed."""
    for index, count in per_run.items():
        run = runs[index]
        if not run.killed:
            problems.append(f"run {index} ({run.kind}) was not killed yet {count} of its ids came again")
        elif count > 1:
            problems.append(f"run {index} (killed after {run.delay:.3f} s) caused {count} duplicates")
    if duplicates > kills:
        problems.append(f"{duplicates} duplicates > {kills} kills")


def audit_delivery(runs: list, expected: set[int], self_echo: set[int]) -> tuple[list[str], dict, dict]:
    """What every crash-trial script checks of its runs' output (each run has index, ids, killed, kind,
    returncode, err): order within and across runs, nothing lost, no self-echo, nothing unknown.

    `run.ids` are the ids that reached the consumer: the lines of --once's or watch's output (written and
    flushed, so read), what the pi controller acknowledged, a completed hook's answer (the harness gives
    it to the model). A killed hook's answer is not among them: the harness drops it. Mail that reached
    no consumer is lost, whatever output it appeared in.

    Returns (problems, delivered_at: id -> run indexes, per_run: run index -> ids it delivered that a
    later run delivered again, i.e. the duplicates attributed to that run's kill).
    """
    problems: list[str] = []
    delivered_at: dict[int, list[int]] = {}
    for run in runs:
        for i in run.ids:
            delivered_at.setdefault(i, []).append(run.index)
    # Every id is sent before any run that could deliver it, and ids grow, so "all older mail for P
    # was delivered first" means: at each delivery, the oldest undelivered expected id is not older.
    order = sorted(expected)
    seen: set[int] = set()
    low = 0
    for run in runs:
        if any(b <= a for a, b in zip(run.ids, run.ids[1:])):
            problems.append(f"run {run.index}: ids not strictly increasing: {run.ids[:40]}")
        for i in run.ids:
            while low < len(order) and order[low] in seen:
                low += 1
            if low < len(order) and order[low] < i:
                problems.append(f"run {run.index}: delivered {i} while older {order[low]} was undelivered")
                break
            seen.add(i)
        if not run.killed and run.returncode != 0:
            problems.append(f"run {run.index} ({run.kind}) exited {run.returncode}: "
                            f"{run.err.read_text(errors='replace')[-500:]}")
    lost = sorted(expected - set(delivered_at))
    if lost:
        problems.append(f"lost {len(lost)} messages: {lost[:20]}")
    echoed = sorted(self_echo & set(delivered_at))
    if echoed:
        problems.append(f"self-echo delivered: {echoed[:20]}")
    unknown = sorted(set(delivered_at) - expected - self_echo)
    if unknown:
        problems.append(f"delivered ids never sent to {PERSONA}: {unknown[:20]}")
    per_run: dict[int, int] = {}
    for where in delivered_at.values():
        for a in where[:-1]:
            per_run[a] = per_run.get(a, 0) + 1
    return problems, delivered_at, per_run

if __name__ == "__main__":
    raise SystemExit(main())
