#!/usr/bin/env python3
"""Soak: the whole system for N minutes under random faults and random kill -9s (issue 6, item 8).

One in-process sandbox; persona `soakbot`, every consumer on the shared consumer group `agent`:

  - `kijito-pull watch`, restarted whenever it dies (each incarnation on stdout or, at random, with
    --events-file, its output in its own file);
  - the pi child (`watch --ack-stdin`, a thread acknowledging each event), restarted when it dies;
  - the hooks (claude-session-start, claude-stop, codex-session-start, codex-stop), one every ~2 s;
  - `kijito-pull --once`, in bursts of 1-4 concurrent runs every ~3 s;
  - a sender thread: mail for the persona from others (some bodies of several KB), noise for other
    inboxes, self-echo;
  - chaos: sandbox fault rules switched on and off at random (5xx, 429/503 with Retry-After, 401, 404,
    a redirect, hangs past the timeouts, resets, closed connections, malformed, shape-invalid and
    endless bodies, self-contradicting pages), on all of /api or only the inbox or the long-poll, for
    a few seconds each; kill -9 of a random running process every ~5 s (mostly watch and the pi child,
    which always run); and a quarter of the hook and --once runs killed at a random moment of their life.

At the end the chaos and the traffic stop, the long-running consumers get time to hand over the rest,
unkilled --once runs sweep up, watch and the pi child are ended cleanly, and it prints one line:

    sent=... delivered=... lost=... duplicated=... max_latency=...s kills=... faults=... minutes=...

delivered counts distinct messages handed over by any consumer (a hook's JSON counts once complete in
its stdout); duplicated counts deliveries beyond the first (each kill may repeat what was in flight,
a hook its whole batch); max_latency is from the send to the first hand-over (faults hold mail back by
design: a pinned cursor is retried every 30 s). Exit status 1 on any loss, on mail delivered that should
not be (self-echo, another inbox's), on a lock left held, or on a process that would not end.

    .venv/bin/python scripts/soak.py --minutes 10
"""

from __future__ import annotations

import argparse
import datetime
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
    PI_CHILD,
    PiChild,
    System,
    hook_ids,
    ndjson_events,
)

PERSONA = "soakbot"
SENDERS = ("river", "loom", "argus")
WATCH_ARGS = ("--wait", "10", "--alert-after", "3", "--timeout", "2")
ONCE_ARGS = ("--timeout", "2", "--lock-timeout", "30")

FAULTS = [
    {"kind": "status", "status": 500},
    {"kind": "status", "status": 502},
    {"kind": "status", "status": 503, "headers": {"Retry-After": "1"}},
    {"kind": "status", "status": 429, "headers": {"Retry-After": "2"}},
    {"kind": "status", "status": 401},
    {"kind": "status", "status": 404},
    {"kind": "status", "status": 302, "headers": {"Location": "http://127.0.0.1:9/"}},
    {"kind": "hang", "seconds": 2.5},
    {"kind": "hang", "seconds": 6},
    {"kind": "reset"},
    {"kind": "close"},
    {"kind": "body", "body": '{"result": [{"id": 1,'},
    {"kind": "body", "body": "<html>maintenance</html>", "status": 200},
    {"kind": "huge"},
    {"kind": "mutate", "rows": "id_string"},
    {"kind": "mutate", "rows": "dup_first"},
    {"kind": "mutate", "rows": "result_not_list"},
    {"kind": "mutate", "delete": ["next_before_id"]},
    {"kind": "mutate", "set": {"next_before_id": 1}},
    {"kind": "mutate", "rows": "drop_oldest"},
]
SCOPES = (None, "/api/inbox", "/api/notify/pending")


@dataclass
class Proc:
    kind: str
    out: Path
    err: Path
    popen: subprocess.Popen | None = None
    pi: PiChild | None = None
    started: float = 0.0
    ended: float | None = None  # wall clock
    returncode: int | None = None
    killed: bool = False
    mode: str = ""


@dataclass
class Stats:
    kills: dict[str, int] = field(default_factory=dict)
    faults: int = 0
    restarts: int = 0


class Soak:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.token = "soak-" + secrets.token_hex(12)
        self.work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kijito-soak-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.sandbox = Sandbox(token=self.token, window_limit=20, content_budget=16384).start()
        self.sandbox.add_persona(PERSONA, memory_count=1)
        self.system = System(self.sandbox.url, self.token, self.work, PERSONA)
        self.sent_at: dict[int, float] = {}  # expected id -> wall time of the send
        self.self_echo: set[int] = set()
        self.procs: list[Proc] = []
        self.lock = threading.Lock()
        self.stats = Stats()
        self.problems: list[str] = []
        self.chaos_on = threading.Event()
        self.traffic_on = threading.Event()
        self.callers_on = threading.Event()
        self.supervise = threading.Event()

    # -- processes ------------------------------------------------------------------------------------

    def _register(self, proc: Proc) -> Proc:
        proc.started = time.time()
        with self.lock:
            self.procs.append(proc)
        return proc

    def _finish(self, proc: Proc, code: int | None) -> None:
        proc.returncode = code
        proc.ended = time.time()
        proc.killed = code == -signal.SIGKILL

    def short(self, kind: str) -> None:
        """A hook or a --once, waited for (it may be killed meanwhile by the chaos thread)."""
        out, err = self.system.next_paths(kind)
        if kind in HOOKS:
            popen = self.system.spawn_hook(kind, out, err, session_id=f"soak-{self.rng.randrange(3)}")
        else:
            popen = self.system.spawn(self.system.once_argv(*ONCE_ARGS), out, err)
        proc = self._register(Proc(kind, out, err, popen=popen))
        if self.chaos_on.is_set() and self.rng.random() < self.args.short_kill:
            # Aimed at its short life (start-up, fetch, the write, the ack, the exit), like crash_trials.py.
            threading.Timer(self.rng.uniform(0.0, 0.8), self._kill, args=(proc,)).start()
        try:
            code = popen.wait(120)
        except subprocess.TimeoutExpired:
            popen.kill()
            code = popen.wait()
            self.problems.append(f"{kind} {out.name} did not exit within 120 s (deadlock?)")
        self._finish(proc, code)

    def long_running(self, kind: str) -> None:
        """Keep one watch (kind "watch") or one pi child running until told to stop; restart it when it dies."""
        first = True
        while self.supervise.is_set():
            if not first:
                self.stats.restarts += 1
            first = False
            if kind == PI_CHILD:
                child = PiChild.start(self.system, *WATCH_ARGS, tag="pi")
                proc = self._register(Proc(kind, child.out, child.err, popen=child.proc, pi=child))
            else:
                out, err = self.system.next_paths("watch")
                events_file = self.rng.random() < 0.5
                argv = [*WATCH_ARGS] + (["--events-file", str(out)] if events_file else [])
                stdout = out.with_suffix(".stdout") if events_file else out
                popen = self.system.spawn(self.system.watch_argv(*argv), stdout, err)
                proc = self._register(Proc(kind, out, err, popen=popen,
                                           mode="events-file" if events_file else "stdout"))
            while self.supervise.is_set() and proc.popen.poll() is None:
                time.sleep(0.1)
            if proc.popen.poll() is None:  # the end: stop it the way its controller does
                if proc.pi is not None:
                    code = proc.pi.close(timeout=30)
                else:
                    proc.popen.send_signal(signal.SIGTERM)
                    try:
                        code = proc.popen.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.popen.kill()
                        code = proc.popen.wait()
                        self.problems.append(f"{kind} did not exit within 30 s of SIGTERM")
                self._finish(proc, code)
                if code != 0:
                    self.problems.append(f"{kind} {proc.out.name} exited {code} when ended")
                return
            if proc.pi is not None:
                proc.pi.kill()
            self._finish(proc, proc.popen.returncode)
            if not proc.killed:
                self.problems.append(f"{kind} {proc.out.name} died by itself ({proc.returncode}): "
                                     f"{proc.err.read_text(errors='replace')[-300:]!r}")
            time.sleep(0.5)  # the pi extension's first restart delay

    # -- load and chaos ---------------------------------------------------------------------------------

    def sender(self) -> None:
        n = 0
        while self.traffic_on.is_set():
            r = self.rng.random()
            if r < 0.1:
                self.sandbox.send(to=self.rng.choice(("elsewhere", "noise")), sender="river", content="noise")
            elif r < 0.13:
                self.self_echo.add(self.sandbox.send(to=PERSONA, sender=PERSONA, content=f"echo {n}"))
            else:
                size = self.rng.choice((10, 80, 300)) if self.rng.random() < 0.97 else self.rng.randint(2000, 6000)
                at = time.time()
                mid = self.sandbox.send(to=PERSONA, sender=self.rng.choice(SENDERS), content=f"soak {n} " + "s" * size)
                self.sent_at[mid] = at
            n += 1
            time.sleep(self.rng.expovariate(1 / self.args.send_interval))

    def hooks_caller(self) -> None:
        while self.callers_on.is_set():
            self.short(self.rng.choice(HOOKS))
            time.sleep(self.rng.uniform(0.5, 3.5))

    def once_caller(self) -> None:
        while self.callers_on.is_set():
            burst = [threading.Thread(target=self.short, args=("once",)) for _ in range(self.rng.randint(1, 4))]
            for t in burst:
                t.start()
            for t in burst:
                t.join()
            time.sleep(self.rng.uniform(1.0, 5.0))

    def faults(self) -> None:
        while self.chaos_on.is_set():
            time.sleep(self.rng.uniform(2.0, 12.0))
            if not self.chaos_on.is_set():
                break
            rule = dict(self.rng.choice(FAULTS))
            scope = self.rng.choice(SCOPES)
            if scope and rule["kind"] != "mutate":
                rule["path"] = scope
            if self.rng.random() < 0.3:
                rule["times"] = self.rng.randint(1, 5)
            self.sandbox.add_fault(rule)
            self.stats.faults += 1
            time.sleep(self.rng.uniform(1.0, 10.0))
            self.sandbox.clear_faults()

    def _kill(self, victim: Proc) -> None:
        if victim.popen is None or victim.popen.poll() is not None:
            return
        try:
            victim.popen.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            return
        with self.lock:
            self.stats.kills[victim.kind] = self.stats.kills.get(victim.kind, 0) + 1

    def killer(self) -> None:
        while self.chaos_on.is_set():
            time.sleep(self.rng.expovariate(1 / self.args.kill_interval))
            with self.lock:
                running = [p for p in self.procs if p.ended is None and p.popen is not None
                           and p.popen.poll() is None]
            if not running:
                continue
            self._kill(self.rng.choice(running))

    # -- the run ----------------------------------------------------------------------------------------

    def run(self) -> dict:
        started = time.monotonic()
        first = self.system.run(self.system.once_argv())
        if first.code != 0:
            raise SystemExit(f"first pull failed: {first.stderr}")
        for flag in (self.chaos_on, self.traffic_on, self.callers_on, self.supervise):
            flag.set()
        supervisors = [threading.Thread(target=self.long_running, args=(k,)) for k in ("watch", PI_CHILD)]
        load = [threading.Thread(target=f) for f in (self.sender, self.hooks_caller, self.once_caller)]
        chaos = [threading.Thread(target=f) for f in (self.faults, self.killer)]
        for t in supervisors + load + chaos:
            t.start()
        end = started + self.args.minutes * 60
        report = started + 60
        while time.monotonic() < end:
            time.sleep(1.0)
            if not self.args.quiet and time.monotonic() >= report:
                report += 60
                print(f"  {time.monotonic() - started:.0f} s: sent {len(self.sent_at)}, kills "
                      f"{sum(self.stats.kills.values())}, faults {self.stats.faults}", file=sys.stderr)
        self.chaos_on.clear()
        self.traffic_on.clear()
        self.callers_on.clear()
        for t in chaos + load:
            t.join(300)
        self.sandbox.clear_faults()
        # Let watch and the pi child hand over what is left (a pinned cursor is retried every 30 s).
        deadline = time.monotonic() + self.args.settle
        while time.monotonic() < deadline and set(self.sent_at) - set(self.deliveries()):
            time.sleep(0.5)
        self.supervise.clear()
        for t in supervisors:
            t.join(120)
        for _ in range(10):  # then unkilled --once runs until one hands over nothing
            before = len(self.procs)
            self.short("once")
            last = self.procs[before]
            if last.returncode == 0 and not self._ids(last):
                break
        return self.summary(time.monotonic() - started)

    # -- counting ---------------------------------------------------------------------------------------

    def _ids(self, proc: Proc) -> list[tuple[int, float]]:
        """(message id, wall time it was handed over) for one process's output."""
        if proc.pi is not None:
            events = proc.pi.events
            return [(e["id"], _ts(e)) for e in events if e.get("event") == "new"]
        if not proc.out.exists():
            return []
        text = proc.out.read_text(errors="replace")
        if proc.kind in HOOKS:
            try:
                ids = hook_ids(text, self.sent_at)
            except (AssertionError, ValueError):
                if not proc.killed:
                    self.problems.append(f"{proc.kind} {proc.out.name}: stdout is not one JSON object: {text[:200]!r}")
                return []  # cut by the kill: the harness could not read it, and it was not acknowledged
            when = proc.out.stat().st_mtime
            return [(i, when) for i in ids]
        events, _torn = ndjson_events(text)
        return [(e["id"], _ts(e)) for e in events if e.get("event") == "new" and e.get("persona") == PERSONA]

    def deliveries(self) -> list[int]:
        with self.lock:
            procs = list(self.procs)
        return [i for p in procs for i, _ in self._ids(p)]

    def summary(self, elapsed: float) -> dict:
        first_at: dict[int, float] = {}
        count: dict[int, int] = {}
        only_killed_hooks: dict[int, bool] = {}
        for proc in self.procs:
            for i, when in self._ids(proc):
                count[i] = count.get(i, 0) + 1
                first_at[i] = min(first_at.get(i, when), when)
                killed_hook = proc.kind in HOOKS and proc.killed
                only_killed_hooks[i] = only_killed_hooks.get(i, True) and killed_hook
            if not proc.killed and proc.kind in HOOKS and proc.returncode != 0:
                self.problems.append(f"{proc.kind} {proc.out.name} exited {proc.returncode}")
        expected = set(self.sent_at)
        lost = sorted(expected - set(count))
        echoed = sorted(self.self_echo & set(count))
        unknown = sorted(set(count) - expected - self.self_echo)
        if lost:
            self.problems.append(f"lost {len(lost)}: {lost[:20]}")
        if echoed:
            self.problems.append(f"self-echo delivered: {echoed[:20]}")
        if unknown:
            self.problems.append(f"delivered ids never sent to {PERSONA}: {unknown[:20]}")
        rows = self.system.lock_rows()
        lock = rows[0].get("lock") if len(rows) == 1 else rows
        if lock != "free":
            self.problems.append(f"lock not free at the end: {lock}")
        latencies = [first_at[i] - self.sent_at[i] for i in expected & set(first_at)]
        latencies.sort()
        return {
            "sent": len(expected),
            "delivered": len(expected & set(count)),
            "lost": len(lost),
            "duplicated": sum(c - 1 for c in count.values()),
            "max_latency_s": round(max(latencies, default=0.0), 1),
            "p50_latency_s": round(latencies[len(latencies) // 2], 2) if latencies else None,
            "p99_latency_s": round(latencies[int(len(latencies) * 0.99)], 2) if latencies else None,
            "kills": sum(self.stats.kills.values()),
            "kills_by_kind": self.stats.kills,
            "faults": self.stats.faults,
            "restarts": self.stats.restarts,
            "runs": {k: sum(1 for p in self.procs if p.kind == k) for k in sorted({p.kind for p in self.procs})},
            "only_in_killed_hooks": sum(1 for v in only_killed_hooks.values() if v),
            "self_echo_sent": len(self.self_echo),
            "lock": lock,
            "minutes": self.args.minutes,
            "elapsed_s": round(elapsed, 1),
            "seed": self.args.seed,
            "problems": self.problems,
            "workdir": str(self.work),
        }


def _ts(event: dict) -> float:
    return datetime.datetime.fromisoformat(event["ts"]).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the chaos runs (default 10)")
    parser.add_argument("--send-interval", type=float, default=0.1, help="mean seconds between sends")
    parser.add_argument("--kill-interval", type=float, default=5.0,
                        help="mean seconds between kill -9s of a random running process (default 5)")
    parser.add_argument("--short-kill", type=float, default=0.25,
                        help="share of hook and --once runs killed at a random moment of their life (0.25)")
    parser.add_argument("--settle", type=float, default=90.0, help="seconds given to hand over the rest")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--workdir", help="keep outputs here (default: a temp dir, removed on success)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = secrets.randbelow(2**31)
    soak = Soak(args)
    try:
        s = soak.run()
    finally:
        soak.sandbox.stop()
    ok = not s["problems"]
    if ok and not args.workdir:
        shutil.rmtree(soak.work, ignore_errors=True)
        s["workdir"] = None
    if args.json:
        print(json.dumps(s))
    else:
        print(f"sent={s['sent']} delivered={s['delivered']} lost={s['lost']} duplicated={s['duplicated']} "
              f"max_latency={s['max_latency_s']}s kills={s['kills']} faults={s['faults']} "
              f"minutes={s['minutes']:g} seed={s['seed']}")
        if not args.quiet:
            print(f"  p50_latency={s['p50_latency_s']}s p99_latency={s['p99_latency_s']}s "
                  f"kills_by_kind={s['kills_by_kind']} restarts={s['restarts']} runs={s['runs']} "
                  f"only_in_killed_hooks={s['only_in_killed_hooks']} lock={s['lock']}", file=sys.stderr)
        for p in s["problems"][:50]:
            print("PROBLEM: " + p, file=sys.stderr)
        if not ok:
            print(f"outputs kept in {soak.work}", file=sys.stderr)
    return 0 if s["lost"] == 0 and ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
