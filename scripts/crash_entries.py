#!/usr/bin/env python3
"""kill -9 crash trials for the long-running and hook entry points (scripts/crash_trials.py does --once).

    watch                     kijito-pull watch --persona P: NDJSON on stdout, or (every other trial)
                              --events-file, where "took it" is the line fsynced before the state rename
    pi-child                  kijito-pull watch --persona P --ack-stdin, a thread acknowledging each event
    hook-stop                 kijito-pull hook claude-stop
    hook-session-start        kijito-pull hook claude-session-start
    hook-codex-stop           kijito-pull hook codex-stop
    hook-codex-session-start  kijito-pull hook codex-session-start

Per entry point, an in-process sandbox and its own state dir. Each trial sends a random batch (gaps from
other inboxes' mail, self-echo, now and then a body of some KB and a batch over the window, so the pull
walks backward), starts the entry point with its output in a file this script opened (the pi child's is
read by a thread and copied), and SIGKILLs it after a random delay spread over its whole life: start-up,
fetch, each delivery, each state write. watch and the pi child never exit by themselves, so every trial
of theirs ends in a kill, and in some trials more mail arrives while they run. After the trials,
unkilled `--once` runs drain the cursor. Checked, as in crash_trials.py:

  lost        mail for P never delivered (must be 0)
  order       each run delivers increasing ids; no run delivers N while an older message is undelivered
  self-echo   mail P wrote itself is never delivered
  duplicates  only a killed run's deliveries may come again. watch and the pi child acknowledge each
              message: at most 1 duplicate per kill. A hook hands over its whole pull as one JSON object
              and acknowledges it once written: a kill between the write and the state save repeats that
              one batch (N messages), so for hooks the bound is one repeated batch per kill
  exits       unkilled runs exit 0; the lock is free at the end

A hook's JSON counts as handed over once it is complete in its stdout file (the design's "took it"). Claude
Code does not read the output of a hook that did not exit 0, so mail a killed hook wrote and
acknowledged reaches the model only if a later run hands it over again; `only_in_killed_hooks` counts the
ids for which that never happened (reported, not failed: a hook is killed only past its budget).

    .venv/bin/python scripts/crash_entries.py --entry all --kills 400 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import shutil
import signal
import statistics
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
from scripts.crash_trials import audit_delivery  # noqa: E402
from tests.entrypoints import (  # noqa: E402
    CODEX_SESSION_START,
    CODEX_STOP,
    HOOKS,
    PI_CHILD,
    SESSION_START,
    STOP,
    WATCH,
    FileEvents,
    PiChild,
    System,
    hook_ids,
    ndjson_events,
    new_ids,
)

PERSONA = "crashbot"
OTHERS = ("elsewhere", "noise")
SENDERS = ("river", "loom", "argus")
ENTRY_POINTS = (WATCH, PI_CHILD, STOP, SESSION_START, CODEX_STOP, CODEX_SESSION_START)
WATCH_ARGS = ("--wait", "5", "--lock-timeout", "30")


@dataclass
class Run:
    index: int
    kind: str  # "calibrate" | "trial" | "drain"
    out: Path
    err: Path
    mode: str = ""  # watch: "stdout" or "events-file"
    delay: float | None = None
    returncode: int | None = None
    elapsed: float = 0.0
    ids: list[int] = field(default_factory=list)
    torn: bool = False
    late: int = 0  # messages sent while it ran

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


class EntryTrials:
    def __init__(self, entry: str, args: argparse.Namespace, seed: int, work: Path):
        self.entry = entry
        self.args = args
        self.rng = random.Random(seed)
        self.seed = seed
        self.token = "crash-" + secrets.token_hex(12)
        self.work = work
        self.work.mkdir(parents=True, exist_ok=True)
        self.sandbox = Sandbox(token=self.token, window_limit=args.window, content_budget=args.budget).start()
        self.sandbox.add_persona(PERSONA, memory_count=1)
        self.system = System(self.sandbox.url, self.token, self.work, PERSONA,
                             extra_env={"KIJITO_PULL_MAX_STOP_BLOCKS": "100"})
        self.expected: set[int] = set()
        self.self_echo: set[int] = set()
        self.runs: list[Run] = []
        self.problems: list[str] = []
        self.base_s = 0.4
        self.per_msg_s = 0.005
        self.scale = 1.0
        self._send_lock = threading.Lock()

    # -- mail ----------------------------------------------------------------------------------------

    def send_batch(self, n: int, rng: random.Random | None = None) -> None:
        rng = rng or self.rng
        for _ in range(n):
            r = rng.random()
            with self._send_lock:
                if r < 0.15:
                    self.sandbox.send(to=rng.choice(OTHERS), sender=rng.choice(SENDERS), content="x")
                    continue
                size = rng.choice((8, 40, 200)) if rng.random() < 0.95 else rng.randint(1000, 5000)
                body = f"m{len(self.expected)} " + "y" * size
                if r < 0.18:
                    self.self_echo.add(self.sandbox.send(to=PERSONA, sender=PERSONA, content=body))
                else:
                    self.expected.add(self.sandbox.send(to=PERSONA, sender=rng.choice(SENDERS), content=body))

    def batch_size(self) -> int:
        if self.rng.random() < self.args.big_share:
            return self.rng.randint(self.args.max_batch + 1, self.args.big_batch)
        return self.rng.randint(1, self.args.max_batch)

    def pending(self) -> int:
        return len(self.expected) - len({i for r in self.runs for i in r.ids})

    # -- one run -------------------------------------------------------------------------------------

    def spawn(self, kind: str, delay: float | None, late_batch: int = 0) -> Run:
        index = len(self.runs)
        out, err = self.work / "runs" / f"{index:05d}.out", self.work / "runs" / f"{index:05d}.err"
        out.parent.mkdir(exist_ok=True)
        run = Run(index, kind, out, err, delay=delay)
        if kind == "drain":
            self._run_once(run)
        elif self.entry in HOOKS:
            self._run_hook(run)
        else:
            self._run_long(run, late_batch)
        self.runs.append(run)
        self.parse(run)
        return run

    def _wait_or_kill(self, proc: subprocess.Popen, delay: float | None, run: Run) -> None:
        started = time.monotonic()
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
            raise SystemExit(f"{self.entry}: run {run.index} did not finish within 120 s (deadlock?)") from None
        run.elapsed = time.monotonic() - started

    def _run_once(self, run: Run) -> None:
        with open(run.out, "ab") as out, open(run.err, "ab") as err:
            proc = subprocess.Popen(self.system.once_argv("--lock-timeout", "30"), stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, env=self.system.env, cwd=str(self.work))
        self._wait_or_kill(proc, None, run)

    def _run_hook(self, run: Run) -> None:
        proc = self.system.spawn_hook(self.entry, run.out, run.err, session_id="crash-session")
        self._wait_or_kill(proc, run.delay, run)

    def _run_long(self, run: Run, late_batch: int) -> None:
        """watch or the pi child: killed after `delay`, or (delay None) ended cleanly once all is delivered."""
        late = None
        if late_batch:
            at = self.rng.uniform(0.0, run.delay if run.delay is not None else 1.0)
            rng = random.Random(self.rng.random())
            late = threading.Timer(at, self.send_batch, args=(late_batch, rng))
            run.late = late_batch
        started = time.monotonic()
        if self.entry == PI_CHILD:
            child = PiChild.start(self.system, *WATCH_ARGS, tag=f"pi{run.index}")
            proc = child.proc
            run.out, run.err = child.out, child.err
            delivered = lambda: new_ids(child.events)  # noqa: E731
            wait_for = child.wait_for
        else:
            run.mode = "events-file" if run.index % 2 else "stdout"
            argv = [*WATCH_ARGS] + (["--events-file", str(run.out)] if run.mode == "events-file" else [])
            stdout = run.out.with_suffix(".stdout") if run.mode == "events-file" else run.out
            proc = self.system.spawn(self.system.watch_argv(*argv), stdout, run.err)
            events = FileEvents(run.out)
            delivered = events.new_ids
            wait_for = events.wait_for
        if late is not None:
            late.start()
        if run.delay is not None:
            self._wait_or_kill(proc, run.delay, run)
            if late is not None:
                late.join()
            if self.entry == PI_CHILD:
                child.kill()
            run.elapsed = time.monotonic() - started
            return
        # Unkilled: wait until everything pending is delivered, then end it the way its controller does.
        if wait_for(lambda e: e["event"] == "armed", 60) is None:
            self.problems.append(f"run {run.index}: never armed")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.expected <= set(delivered()) | {i for r in self.runs for i in r.ids}:
                break
            time.sleep(0.02)
        run.elapsed = time.monotonic() - started
        if self.entry == PI_CHILD:
            run.returncode = child.close(timeout=30)
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                run.returncode = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                run.returncode = proc.wait()

    # -- trials --------------------------------------------------------------------------------------

    def calibrate(self) -> None:
        small, large = [], []
        for _ in range(3):
            small.append(self.spawn("calibrate", None).elapsed)
        for _ in range(3):
            n = self.args.max_batch
            self.send_batch(n)
            large.append((self.spawn("calibrate", None).elapsed, n))
        self.base_s = statistics.median(small)
        self.per_msg_s = max(0.0005, statistics.median([(t - self.base_s) / n for t, n in large]))

    def trial(self) -> Run:
        n = self.batch_size()
        self.send_batch(n)
        estimate = (self.base_s + self.per_msg_s * max(self.pending(), n)) * self.scale
        if self.rng.random() < 0.5:
            delay = self.rng.uniform(0.0, estimate * 1.1)
        else:
            delay = self.rng.uniform(self.base_s * self.scale * 0.8, estimate * 1.05)
        late = self.batch_size() if self.entry not in HOOKS and self.rng.random() < 0.4 else 0
        run = self.spawn("trial", delay, late)
        if self.entry in HOOKS:  # keep about three runs in four killed whatever the machine's load
            self.scale = min(4.0, max(0.25, self.scale * (1.02 if run.killed else 0.94)))
        return run

    def drain(self) -> None:
        for _ in range(self.args.drain_limit):
            run = self.spawn("drain", None)
            if not run.ids:
                return
        self.problems.append(f"drain: still delivering after {self.args.drain_limit} unkilled runs")

    # -- checking ------------------------------------------------------------------------------------

    def parse(self, run: Run) -> None:
        if self.entry == PI_CHILD and run.kind != "drain":
            data = run.out.read_bytes()
            events, run.torn = ndjson_events(data.decode("utf-8", "replace"))
            run.ids = new_ids(events)  # every complete line was read by the thread: handed to "pi"
            return
        text = run.out.read_text(errors="replace") if run.out.exists() else ""
        if self.entry in HOOKS and run.kind != "drain":
            try:
                run.ids = hook_ids(text, self.expected)
            except (AssertionError, ValueError):
                if not run.killed:
                    self.problems.append(f"run {run.index}: stdout is not one JSON object: {text[:300]!r}")
                run.torn = True  # a write cut by the kill: the harness could not read it, so not handed over
                run.ids = []
            return
        events, run.torn = ndjson_events(text)
        run.ids = new_ids(e for e in events if e.get("persona") == PERSONA)

    def check(self) -> dict:
        found, delivered_at, per_run = audit_delivery(self.runs, self.expected, self.self_echo)
        problems = self.problems
        problems.extend(found)
        duplicates = sum(len(w) - 1 for w in delivered_at.values())
        kills = sum(1 for r in self.runs if r.killed)
        batch = self.entry in HOOKS
        for index, count in per_run.items():
            run = self.runs[index]
            if not run.killed:
                problems.append(f"run {index} ({run.kind}) was not killed yet {count} of its ids came again")
            elif count > 1 and not batch:
                problems.append(f"run {index} (killed after {run.delay:.3f} s) caused {count} duplicates")
        dup_kills = sum(1 for i in per_run if self.runs[i].killed)
        if dup_kills > kills or (not batch and duplicates > kills):
            problems.append(f"{duplicates} duplicates from {dup_kills} runs > {kills} kills")
        only_killed = sum(1 for where in delivered_at.values() if all(self.runs[i].killed for i in where))
        lock = self.lock_status()
        if lock != "free":
            problems.append(f"lock not free at the end: {lock}")
        trials = [r for r in self.runs if r.kind == "trial"]
        watch_modes = {m: sum(1 for r in trials if r.mode == m and r.killed) for m in ("stdout", "events-file")}
        return {
            "entry": self.entry,
            "trials": len(trials),
            "kills": kills,
            "killed_before_output": sum(1 for r in trials if r.killed and not r.ids),
            "killed_during_delivery": sum(1 for r in trials if r.killed and r.ids),
            "exited_before_kill": sum(1 for r in trials if not r.killed),
            "torn": sum(1 for r in self.runs if r.torn),
            "sent": len(self.expected),
            "self_echo_sent": len(self.self_echo),
            "sent_while_running": sum(r.late for r in self.runs),
            "delivered": len(set(delivered_at) & self.expected),
            "lost": len(self.expected - set(delivered_at)),
            "duplicates": duplicates,
            "max_dup_per_kill": max(per_run.values(), default=0),
            "kills_that_caused_duplicates": dup_kills,
            "only_in_killed_hooks": only_killed if batch else None,
            "watch_kills_by_mode": watch_modes if self.entry == WATCH else None,
            "backward_pages": sum(1 for e in self.sandbox.requests
                                  if e["path"] == "/api/inbox" and "before_id" in e["query"]),
            "drain_runs": sum(1 for r in self.runs if r.kind == "drain"),
            "stale_tmp_files": len(list((self.system.state_dir / "cursors").glob(".*.tmp"))),
            "calibration": {"base_s": round(self.base_s, 3), "per_msg_s": round(self.per_msg_s, 5)},
            "seed": self.seed,
            "problems": problems,
        }

    def lock_status(self):
        rows = self.system.lock_rows()
        return rows[0].get("lock") if len(rows) == 1 else rows

    def run_all(self) -> dict:
        started = time.monotonic()
        try:
            first = self.spawn("drain", None)  # an established cursor (first contact has its own rules)
            if first.returncode != 0:
                raise SystemExit(f"{self.entry}: first pull failed: {first.err.read_text()}")
            self.calibrate()
            trials = 0
            while sum(1 for r in self.runs if r.killed) < self.args.kills and trials < self.args.kills * 3:
                self.trial()
                trials += 1
            self.drain()
            summary = self.check()
        finally:
            self.sandbox.stop()
        summary["elapsed_s"] = round(time.monotonic() - started, 1)
        return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entry", action="append", choices=(*ENTRY_POINTS, "all"),
                        help="entry point(s) to kill (repeatable; default all)")
    parser.add_argument("--kills", type=int, default=400, help="SIGKILLs per entry point (default 400)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--max-batch", type=int, default=30)
    parser.add_argument("--big-share", type=float, default=0.1)
    parser.add_argument("--big-batch", type=int, default=80)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--budget", type=int, default=16384)
    parser.add_argument("--drain-limit", type=int, default=10)
    parser.add_argument("--workdir", help="keep state and outputs here (default: a temp dir, removed on success)")
    args = parser.parse_args(argv)
    entries = list(ENTRY_POINTS) if not args.entry or "all" in args.entry else list(dict.fromkeys(args.entry))
    if args.seed is None:
        args.seed = secrets.randbelow(2**31)
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kijito-crash-entries-"))
    started = time.monotonic()
    results: dict[str, dict] = {}

    def one(k: int, entry: str) -> None:
        try:
            results[entry] = EntryTrials(entry, args, args.seed + k, root / entry).run_all()
        except BaseException as exc:  # noqa: BLE001 - reported in the summary
            results[entry] = {"entry": entry, "problems": [f"crashed: {type(exc).__name__}: {exc}"], "kills": 0}

    threads = [threading.Thread(target=one, args=(k, e)) for k, e in enumerate(entries)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    problems = [f"{e}: {p}" for e in entries for p in results[e]["problems"]]
    total = {
        "entries": [results[e] for e in entries],
        "kills": sum(results[e].get("kills", 0) for e in entries),
        "sent": sum(results[e].get("sent", 0) for e in entries),
        "lost": sum(results[e].get("lost", 0) for e in entries),
        "duplicates": sum(results[e].get("duplicates", 0) for e in entries),
        "seed": args.seed,
        "elapsed_s": round(time.monotonic() - started, 1),
        "problems": problems,
        "workdir": str(root),
    }
    if not problems and not args.workdir:
        shutil.rmtree(root, ignore_errors=True)
        total["workdir"] = None
    if args.json:
        print(json.dumps(total))
    else:
        for s in total["entries"]:
            if "sent" not in s:
                print(f"{s['entry']}: {s['problems']}")
                continue
            extra = ""
            if s["only_in_killed_hooks"] is not None:
                extra = (f" dup_batches={s['kills_that_caused_duplicates']}"
                         f" only_in_killed_hooks={s['only_in_killed_hooks']}")
            if s["watch_kills_by_mode"]:
                extra = f" kills_by_mode={s['watch_kills_by_mode']}"
            print(f"{s['entry']}: trials={s['trials']} kills={s['kills']} sent={s['sent']} delivered={s['delivered']} "
                  f"lost={s['lost']} duplicates={s['duplicates']} max_dup_per_kill={s['max_dup_per_kill']}"
                  f"{extra} during_delivery={s['killed_during_delivery']} backward_pages={s['backward_pages']} "
                  f"elapsed={s['elapsed_s']}s")
        print(f"total: kills={total['kills']} sent={total['sent']} lost={total['lost']} "
              f"duplicates={total['duplicates']} seed={args.seed} elapsed={total['elapsed_s']}s")
        for p in problems[:50]:
            print("PROBLEM: " + p)
        if problems:
            print(f"outputs kept in {root}")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
