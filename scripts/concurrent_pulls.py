#!/usr/bin/env python3
"""Concurrent `kijito-pull --once` runs on one persona and consumer while mail keeps arriving.

Each round starts N `--once --json` processes at once against an in-process sandbox while a thread
keeps sending; in some rounds the sandbox holds the first inbox request (a `hang` fault), so the
puller holding the cursor's lock is slow and the others must wait on it. After the last round,
unkilled pulls sweep up the rest. Then:

  exactly once   the union of all outputs holds every message sent to the persona once, no more
  order          each run's ids are strictly increasing
  exits          every process exited 0 within --bound seconds (no deadlock; lock waits are bounded
                 by --lock-timeout)
  lock           `kijito-pull status --json` shows the lock free at the end

    .venv/bin/python scripts/concurrent_pulls.py --procs 8 --rounds 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402

PERSONA = "concbot"
CONSUMER = "shared"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--lock-timeout", type=float, default=30.0)
    parser.add_argument("--bound", type=float, default=60.0, help="every process must exit within this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    rng = random.Random(seed)
    token = "conc-" + secrets.token_hex(8)
    problems: list[str] = []
    runs: list[list[int]] = []
    expected: list[int] = []
    waits = 0
    started = time.monotonic()
    with Sandbox(token=token, window_limit=20).start() as sb, tempfile.TemporaryDirectory() as tmp:
        env = {"KIJITOMON_TOKEN": token, "KIJITO_BASE": sb.url, "KIJITO_PULL_STATE_DIR": f"{tmp}/state",
               "KIJITO_PULL_CONFIG": os.devnull, "PATH": os.environ.get("PATH", ""),
               "PYTHONPATH": str(REPO), "HOME": tmp}
        pull = [sys.executable, "-m", "kijito_pull", "--once", "--json", "--persona", PERSONA,
                "--consumer", CONSUMER, "--lock-timeout", str(args.lock_timeout)]

        outputs = Path(tmp) / "out"
        outputs.mkdir()

        def start() -> subprocess.Popen:
            # Output to files, not pipes: a puller blocked on a full pipe nobody reads yet would hold
            # the cursor's lock and make the others time out (a harness deadlock, not the product's).
            n = len(list(outputs.iterdir())) // 2
            with open(outputs / f"{n:05d}.out", "wb") as out, open(outputs / f"{n:05d}.err", "wb") as err:
                proc = subprocess.Popen(pull, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            proc.files = (outputs / f"{n:05d}.out", outputs / f"{n:05d}.err")  # type: ignore[attr-defined]
            return proc

        def finish(procs: list[subprocess.Popen], deadline: float) -> None:
            for p in procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    problems.append(f"pid {p.pid} still running after {args.bound} s (deadlock?)")
                out, err = (f.read_text("utf-8", "replace") for f in p.files)  # type: ignore[attr-defined]
                if p.returncode != 0:
                    problems.append(f"pid {p.pid} exited {p.returncode}: {err.strip()[-300:]}")
                ids = []
                for line in out.splitlines():
                    if line.strip():
                        event = json.loads(line)
                        if event["event"] == "new":
                            ids.append(event["id"])
                runs.append(ids)

        finish([start()], time.monotonic() + args.bound)  # establish the cursor
        for _ in range(args.rounds):
            expected.extend(sb.send(to=PERSONA, sender="river", content="before") for _ in range(rng.randint(0, 60)))
            for _ in range(rng.randint(0, 10)):
                sb.send(to="elsewhere", sender="river", content="noise")
            if rng.random() < 0.5:
                waits += 1
                sb.add_fault({"kind": "hang", "seconds": rng.uniform(0.2, 1.5), "path": "/api/inbox",
                              "persona": PERSONA, "times": 1})
            stop = threading.Event()

            def keep_sending(stop=stop):
                for _ in range(rng.randint(20, 150)):
                    if stop.is_set():
                        break
                    expected.append(sb.send(to=PERSONA, sender="loom", content="during"))
                    stop.wait(rng.uniform(0.0, 0.03))

            sender = threading.Thread(target=keep_sending)
            sender.start()
            procs = [start() for _ in range(args.procs)]
            try:
                finish(procs, time.monotonic() + args.bound)
            finally:
                stop.set()
                sender.join()
            sb.clear_faults()
        for _ in range(5):
            before = len(runs)
            finish([start()], time.monotonic() + args.bound)
            if not runs[before]:
                break
        status = subprocess.run([sys.executable, "-m", "kijito_pull", "status", "--json", "--persona", PERSONA],
                                env=env, capture_output=True, text=True, timeout=60)
        rows = [json.loads(line) for line in status.stdout.splitlines() if line.strip()]
        lock = rows[0].get("lock") if len(rows) == 1 else f"status said {status.stdout!r} {status.stderr!r}"
        if lock != "free":
            problems.append(f"lock not free at the end: {lock}")

    delivered = [i for run in runs for i in run]
    dups = len(delivered) - len(set(delivered))
    lost = sorted(set(expected) - set(delivered))
    extra = sorted(set(delivered) - set(expected))
    if dups:
        problems.append(f"{dups} duplicate deliveries")
    if lost:
        problems.append(f"lost {len(lost)}: {lost[:20]}")
    if extra:
        problems.append(f"delivered ids never sent: {extra[:20]}")
    for n, run in enumerate(runs):
        if any(b <= a for a, b in zip(run, run[1:])):
            problems.append(f"run {n}: ids out of order")
    summary = {"rounds": args.rounds, "procs": args.procs, "runs": len(runs), "held_rounds": waits,
               "sent": len(expected), "delivered": len(set(delivered) & set(expected)), "duplicates": dups,
               "lost": len(lost), "runs_that_delivered": sum(1 for r in runs if r), "lock": lock, "seed": seed,
               "elapsed_s": round(time.monotonic() - started, 1), "problems": problems}
    if args.json:
        print(json.dumps(summary))
    else:
        print(" ".join(f"{k}={v}" for k, v in summary.items() if k != "problems"))
        for p in problems[:50]:
            print("PROBLEM: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
