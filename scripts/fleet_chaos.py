#!/usr/bin/env python3
"""The three-machine chaos trial of a Redis Streams fleet (docs/fleets.md, issue 22).

Three "machines" (a, b, c): each its own HOME, state directory and, where `unshare --uts` works, its own
hostname (so a holder's liveness cannot be checked across them, as on real machines). One persona's mail
goes from an in-process sandbox through two relays at once (on a and b, `relay --redis`) into one real
redis-server, and out through two consumer groups:

    workers   a: watch --source   b: repeated --once --source   c: watch --source
    audit     b: watch --source   c: repeated --once --source

`--messages` messages (and some noise: mail to another inbox, self-echo) are sent in bursts. Meanwhile
relays and watch members are SIGKILLed at random times and started again, --once runs are SIGKILLed at
a random moment of their life, and once, between two bursts' appends, redis-server itself is killed and
started again on the same port and data directory. `--aof always`: appendfsync always, nothing written
is lost. `--aof everysec --lose-tail S`: the AOF is cut back to its size S seconds before the crash (what
an OS crash can cost with everysec: written, never fsynced), so Redis comes back without its tail; the
running relays must notice and re-read that mail from Kijito. Relays are not killed from 3 s before the
crash until 3 s after it is back: a relay that restarts after the loss does not know what it appended
(docs/fleets.md), so one running relay over the loss is what this trial requires. After the last burst
the members keep running until each group has everything (or --settle seconds), then stop; then an
unkilled --once per group drains what killed members left pending (after --claim-after).

Delivered means what reached a member's reader: each complete NDJSON line of its stdout (a file this
script opened), as in scripts/crash_entries.py; a torn last line is not. Checked per group:

  lost        mail sent to the persona, not written by a member of the group (must be 0)
  self-echo   mail the persona wrote itself is never delivered; nothing unknown is
  order       a --once run (one pull) delivers increasing ids; a watch run's ids increase except for mail
              that was in flight elsewhere: pending with a member when it ended, pending right after the
              Redis restart, re-appended by a relay, or delivered more than once
  duplicates  each repeat is charged: to the kill of the run that wrote it (its last line: written, not
              acknowledged), or to the Redis restart (the last line a run wrote before the crash; with a
              lost tail, anything written in the lost seconds). A kill causes at most one
  Kijito      the consumers' Kijito (a second sandbox they are configured for) got 0 requests
  exits       unkilled runs exit 0 (1 allowed for runs that met the Redis outage); Redis ends with 0
              pending and 0 lag in both groups, and the stream holds each message once

    .venv/bin/python scripts/fleet_chaos.py --messages 300 --seed 1
    .venv/bin/python scripts/fleet_chaos.py --aof everysec --lose-tail 1.0 --json
"""

from __future__ import annotations

import argparse
import json
import os
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

import redis  # noqa: E402

from kijito_pull.sandbox import Sandbox  # noqa: E402
from kijito_pull.sources import redis_streams  # noqa: E402
from tests.redisserver import RedisServer  # noqa: E402

PERSONA = "fleetbot"
SENDERS = ("river", "loom")
MEMBERS = {"workers": (("a", "watch"), ("b", "once"), ("c", "watch")), "audit": (("b", "watch"), ("c", "once"))}
RELAYS = ("a", "b")


def hostname_prefix() -> list[str] | None:
    """How to start a process under its own hostname (a UTS namespace), or None where that is not allowed."""
    for extra in ([], ["--user", "--map-root-user"]):
        argv = ["unshare", *extra, "--uts", "sh", "-c", 'hostname "$0" && exec "$@"']
        try:
            if subprocess.run([*argv, "probe", "true"], capture_output=True, timeout=10).returncode == 0:
                return argv
        except (OSError, subprocess.SubprocessError):
            pass
    return None


class Machine:
    """One machine: a HOME, a state directory, a hostname; argv and environment of what runs on it."""

    def __init__(self, name: str, root: Path, prefix: list[str] | None):
        self.name = name
        self.hostname = f"machine-{name}" if prefix else os.uname().nodename
        self.home = root / name / "home"
        self.state = root / name / "state"
        self.home.mkdir(parents=True)
        self.prefix = [*prefix, self.hostname] if prefix else []

    def argv(self, *args: str) -> list[str]:
        return [*self.prefix, sys.executable, "-m", "kijito_pull", *args]

    def env(self, base: str, token: str) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home), "LANG": "C.UTF-8",
                "KIJITO_PULL_STATE_DIR": str(self.state), "KIJITO_PULL_CONFIG": os.devnull,
                "KIJITO_BASE": base, "KIJITOMON_TOKEN": token, "PYTHONPATH": str(REPO)}


@dataclass
class Run:
    """One process: a relay, a watch member, a --once member or a drain."""

    index: int
    machine: str
    group: str  # "" for a relay
    kind: str  # relay | watch | once | drain
    out: Path
    err: Path
    proc: subprocess.Popen | None = None
    started: float = 0.0
    ended: float = 0.0
    returncode: int | None = None
    sent_kill: bool = False
    ids: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # emitted.monotonic of each id (one clock machine-wide)
    torn: bool = False
    orphans: list[int] = field(default_factory=list)  # pending with this member when it ended

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def member(self) -> str:
        return f"{self.host}:{self.proc.pid}" if self.proc else ""

    host: str = ""


class Trial:
    def __init__(self, args: argparse.Namespace, work: Path):
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = work
        self.token = "fleet-" + secrets.token_hex(8)
        self.sandbox = Sandbox(token=self.token).start()
        self.trap = Sandbox(token="trap-" + secrets.token_hex(8)).start()  # the consumers' Kijito: never asked
        for p in (PERSONA, "elsewhere", *SENDERS):
            self.sandbox.add_persona(p, memory_count=1)
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed (apt-get install redis-server)")
        self.redis = RedisServer(binary, work / "redis", appendfsync=args.aof).start()
        self.r = redis.Redis(port=self.redis.port, decode_responses=True, socket_timeout=5)
        prefix = hostname_prefix()
        self.hostnames = bool(prefix)
        self.machines = {n: Machine(n, work, prefix) for n in "abc"}
        self.expected: set[int] = set()
        self.self_echo: set[int] = set()
        self.runs: list[Run] = []
        self.lock = threading.Lock()
        self.sending = threading.Event()
        self.sending.set()
        self.stopping = threading.Event()
        self.no_relay_kills = threading.Event()
        self.live: dict[tuple[str, str, str], Run] = {}  # (kind, machine, group) -> running run
        self.crash_t = self.up_t = None
        self.restart_pending: set[int] = set()
        self.appends_lost = 0
        self.aof_cut = 0
        self.problems: list[str] = []
        self.once_estimate = 0.8

    # -- processes -----------------------------------------------------------------------------------

    def spawn(self, machine: str, group: str, kind: str) -> Run:
        m = self.machines[machine]
        with self.lock:
            index = len(self.runs)
            run = Run(index, machine, group, kind, self.work / "runs" / f"{index:05d}.out",
                      self.work / "runs" / f"{index:05d}.err", host=m.hostname)
            self.runs.append(run)
        run.out.parent.mkdir(exist_ok=True)
        url, claim = self.redis.url, str(self.args.claim_after)
        if kind == "relay":
            argv = m.argv("relay", "--redis", url, "--persona", PERSONA, "--interval", "0.2")
            env = m.env(self.sandbox.url, self.token)
        else:
            common = ("--persona", PERSONA, "--source", url, "--consumer", group, "--claim-after", claim)
            argv = m.argv("watch", *common, "--poll-seconds", "1") if kind == "watch" else \
                m.argv("--once", "--json", *common)
            env = m.env(self.trap.url, self.trap.token)
        with open(run.out, "ab") as out, open(run.err, "ab") as err:
            run.started = time.monotonic()
            run.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                        cwd=str(m.home))
        return run

    def reap(self, run: Run, timeout: float = 120) -> None:
        assert run.proc is not None
        try:
            run.returncode = run.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            run.returncode = run.proc.wait()
            self.problems.append(f"run {run.index} ({run.kind} on {run.machine}) hung: killed")
        run.ended = time.monotonic()
        self.parse(run)
        if run.kind != "relay" and run.returncode != 0:
            run.orphans = self.pending_of(run)

    def kill(self, run: Run) -> None:
        run.sent_kill = True
        try:
            run.proc.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass

    def parse(self, run: Run) -> None:
        if run.kind == "relay":
            return
        text = run.out.read_text(errors="replace")
        lines = text.split("\n")
        run.torn = lines[-1] != ""
        for line in lines[:-1]:
            try:
                event = json.loads(line)
            except ValueError:
                self.problems.append(f"run {run.index}: a line that is not JSON: {line[:200]!r}")
                continue
            if event.get("event") == "new" and event.get("persona") == PERSONA:
                run.ids.append(event["id"])
                run.times.append(event["emitted"]["monotonic"])

    def pending_of(self, run: Run) -> list[int]:
        """The Kijito ids pending with this (ended) member: what another member will claim back."""
        stream = redis_streams.stream_key(PERSONA)
        for _ in range(150):  # Redis may be restarting
            try:
                rows = self.r.xpending_range(stream, run.group, "-", "+", 10_000, consumername=run.member)
                kids = []
                for row in rows:
                    found = self.r.xrange(stream, row["message_id"], row["message_id"])
                    kids += [int(f["kid"]) for _sid, f in found]
                return kids
            except redis.ResponseError as exc:
                if "NOGROUP" in str(exc):
                    return []  # no member of the group got as far as making it (killed early): nothing pending
                time.sleep(0.1)
            except redis.RedisError:
                time.sleep(0.1)
        self.problems.append(f"run {run.index}: could not read what it left pending")
        return []

    # -- actors --------------------------------------------------------------------------------------

    def keep_running(self, kind: str, machine: str, group: str = "") -> None:
        """A relay or watch member: started again after each kill, until the trial stops it."""
        while not self.stopping.is_set():
            run = self.spawn(machine, group, kind)
            self.live[(kind, machine, group)] = run
            while run.proc.poll() is None and not self.stopping.is_set():
                time.sleep(0.05)
            if self.stopping.is_set() and run.proc.poll() is None:
                # Not in the first second of its life: a process signalled before Python has run any of
                # its code dies of SIGTERM, as any program would; from cli.early on, SIGTERM is exit 0.
                time.sleep(max(0.0, run.started + 1.0 - time.monotonic()))
                run.proc.send_signal(signal.SIGTERM)
            self.reap(run, timeout=30)
            if not self.stopping.is_set():
                time.sleep(self.rng.uniform(0.1, 0.8))

    def once_loop(self, machine: str, group: str) -> None:
        while not self.stopping.is_set():
            run = self.spawn(machine, group, "once")
            delay = self.rng.uniform(0.0, self.once_estimate * 1.2) if (
                self.sending.is_set() and self.rng.random() < self.args.once_kill_share) else None
            if delay is not None:
                try:
                    run.proc.wait(delay)
                except subprocess.TimeoutExpired:
                    self.kill(run)
            self.reap(run)
            if not run.sent_kill and run.returncode == 0:
                self.once_estimate = 0.8 * self.once_estimate + 0.2 * (run.ended - run.started)
            time.sleep(self.rng.uniform(0.3, 1.0))

    def chaos(self) -> None:
        while self.sending.is_set():
            time.sleep(self.rng.uniform(0.4, 1.6))
            kinds = [k for k in self.live if k[0] == "watch" or not self.no_relay_kills.is_set()]
            key = self.rng.choice(kinds)
            run = self.live.get(key)
            if run is not None and run.proc.poll() is None:
                self.kill(run)

    def sample_aof(self, samples: list) -> None:
        """(time, AOF tail size, ids appended) every 50 ms: what the crash may cut back to."""
        while self.sending.is_set() and self.crash_t is None:
            tail = self.redis.aof_tail()
            try:
                count = self.r.hlen(redis_streams.ids_key(PERSONA))
            except redis.RedisError:
                count = None
            if tail is not None:
                samples.append((time.monotonic(), tail.stat().st_size, count))
            time.sleep(0.05)

    def crash_redis(self, samples: list) -> None:
        self.crash_t = time.monotonic()
        self.redis.kill()
        if self.args.lose_tail:
            before = [s for s in samples if s[0] <= self.crash_t - self.args.lose_tail]
            tail = self.redis.aof_tail()
            if before and tail is not None:
                self.aof_cut = tail.stat().st_size - before[-1][1]
                os.truncate(tail, before[-1][1])
        time.sleep(0.3)
        counted = [s[2] for s in samples if s[2] is not None]
        self.redis.start()
        self.up_t = time.monotonic()
        stream = redis_streams.stream_key(PERSONA)
        try:
            after = self.r.hlen(redis_streams.ids_key(PERSONA))
            self.appends_lost = max(0, (counted[-1] if counted else 0) - after)
            groups = {g["name"] for g in self.r.xinfo_groups(stream)} if self.r.exists(stream) else set()
            for group in sorted(groups & set(MEMBERS)):  # a group no member made yet holds nothing pending
                for row in self.r.xpending_range(stream, group, "-", "+", 10_000):
                    self.restart_pending |= {int(f["kid"]) for _s, f in
                                             self.r.xrange(stream, row["message_id"], row["message_id"])}
        except redis.RedisError as exc:
            self.problems.append(f"after the Redis restart: {exc}")

    def send(self) -> None:
        """The bursts; Redis is crashed once, after the burst that passes half of the messages."""
        samples: list = []
        threading.Thread(target=self.sample_aof, args=(samples,), daemon=True).start()
        crashed = False
        while len(self.expected) < self.args.messages:
            n = min(self.rng.randint(1, self.args.max_burst), self.args.messages - len(self.expected))
            for _ in range(n):
                body = f"m{len(self.expected)} " + "y" * self.rng.choice((8, 80, 400))
                self.expected.add(self.sandbox.send(PERSONA, self.rng.choice(SENDERS), body))
                if self.rng.random() < 0.1:
                    self.sandbox.send("elsewhere", "river", "x")  # the persona's ids have gaps
                if self.rng.random() < 0.04:
                    self.self_echo.add(self.sandbox.send(PERSONA, PERSONA, "self"))
            if not crashed and len(self.expected) >= self.args.messages // 2:
                crashed = True
                self.no_relay_kills.set()
                time.sleep(3.0)  # relay kills stop here; a relay started just before runs by now
                for _ in range(min(self.args.max_burst, self.args.messages - len(self.expected))):
                    self.expected.add(self.sandbox.send(PERSONA, self.rng.choice(SENDERS), "just before the crash"))
                time.sleep(0.6)  # this burst appended, read, acknowledged: all within the last second
                self.crash_redis(samples)
                time.sleep(3.0)
                self.no_relay_kills.clear()
            time.sleep(self.rng.uniform(0.2, 1.2))

    # -- the trial -----------------------------------------------------------------------------------

    def delivered(self, group: str) -> set[int]:
        out: set[int] = set()
        for run in list(self.runs):
            if run.group == group:
                self.parse_live(run, out)
        return out

    def parse_live(self, run: Run, out: set[int]) -> None:
        text = run.out.read_text(errors="replace") if run.out.exists() else ""
        for line in text.split("\n")[:-1]:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "new":
                out.add(event["id"])

    def run(self) -> dict:
        started = time.monotonic()
        actors = [threading.Thread(target=self.keep_running, args=("relay", m)) for m in RELAYS]
        for group, members in MEMBERS.items():
            for machine, kind in members:
                target, args = (self.keep_running, ("watch", machine, group)) if kind == "watch" else \
                    (self.once_loop, (machine, group))
                actors.append(threading.Thread(target=target, args=args))
        for t in actors:
            t.start()
        # Both relays past their first contact (a cursor file each) before the first message and the first kill.
        first = time.monotonic() + (0 if self.args.no_warmup else 60)
        while time.monotonic() < first and not all(list((self.machines[m].state / "cursors").glob("*.relay.*.json"))
                                                   for m in RELAYS):
            time.sleep(0.1)
        chaos = threading.Thread(target=self.chaos)
        chaos.start()
        try:
            self.send()
        finally:
            self.sending.clear()
            chaos.join()
        deadline = time.monotonic() + self.args.settle
        while time.monotonic() < deadline and not all(self.delivered(g) >= self.expected for g in MEMBERS):
            time.sleep(0.5)
        self.stopping.set()
        for t in actors:
            t.join()
        time.sleep(self.args.claim_after + 0.5)  # what the last kills left pending is claimable now
        for group in MEMBERS:
            for _ in range(5):
                run = self.spawn("a", group, "drain")
                run.kind = "drain"
                run.proc.wait(60)
                self.reap(run)
                if not run.ids:
                    break
        summary = self.check()
        summary["elapsed_s"] = round(time.monotonic() - started, 1)
        return summary

    def close(self) -> None:
        self.sandbox.stop()
        self.trap.stop()
        self.redis.stop()

    # -- checking ------------------------------------------------------------------------------------

    def check(self) -> dict:
        problems = self.problems
        stream = redis_streams.stream_key(PERSONA)
        rows = self.r.xrange(stream, "-", "+")
        kids = [int(f["kid"]) for _sid, f in rows]
        reappended = {k for i, k in enumerate(kids) if i and k < max(kids[:i])}
        if sorted(kids) != sorted(self.expected):
            problems.append(f"the stream holds {len(kids)} entries ({len(set(kids))} ids), not the "
                            f"{len(self.expected)} messages sent once each")
        members = [r for r in self.runs if r.kind != "relay"]
        orphans = {k for r in members for k in r.orphans}
        groups = {}
        for group in MEMBERS:
            runs = [r for r in members if r.group == group]
            groups[group] = self.check_group(group, runs, orphans | self.restart_pending | reappended, problems)
            info = {g["name"]: g for g in self.r.xinfo_groups(stream)}.get(group, {})
            if info.get("pending") or info.get("lag"):
                problems.append(f"{group}: {info.get('pending')} pending, lag {info.get('lag')} at the end")
        for run in self.runs:
            if run.sent_kill or run.returncode == 0:
                continue
            met_outage = self.crash_t is not None and run.started <= self.up_t + 2 and run.ended >= self.crash_t
            if not (run.returncode == 1 and met_outage and run.kind in ("once", "drain")):
                problems.append(f"run {run.index} ({run.kind} on {run.machine}) exited {run.returncode}: "
                                f"{run.err.read_text(errors='replace')[-300:]}")
        relay_err = "".join(r.err.read_text(errors="replace") for r in self.runs if r.kind == "relay")
        refills = relay_err.count("re-reading them from Kijito")
        if self.args.lose_tail and self.appends_lost and not refills:
            problems.append(f"Redis lost {self.appends_lost} appends, and no relay re-read them from Kijito")
        if not self.args.lose_tail and refills:
            problems.append(f"appendfsync {self.args.aof}: a relay found appends lost {refills} times")
        trap = self.trap.requests
        if trap:
            problems.append(f"the consumers sent Kijito {len(trap)} requests: {[r['path'] for r in trap][:5]}")
        kills = [r for r in self.runs if r.killed]
        return {
            "messages": len(self.expected), "self_echo_sent": len(self.self_echo), "aof": self.args.aof,
            "lose_tail_s": self.args.lose_tail, "aof_bytes_cut": self.aof_cut, "appends_lost": self.appends_lost,
            "relay_refills": refills, "hostnames": self.hostnames,
            "kills": {k: sum(1 for r in kills if r.kind == k) for k in ("relay", "watch", "once")},
            "runs": {k: sum(1 for r in self.runs if r.kind == k) for k in ("relay", "watch", "once", "drain")},
            "orphaned_at_end_of_a_member": len(orphans), "pending_after_restart": len(self.restart_pending),
            "reappended": len(reappended), "groups": groups, "kijito_requests_from_consumers": len(trap),
            "kijito_requests_from_relays": len(self.sandbox.requests), "seed": self.args.seed,
            "lost": sum(g["lost"] for g in groups.values()),
            "duplicates": sum(g["duplicates"] for g in groups.values()), "problems": problems,
        }

    def check_group(self, group: str, runs: list[Run], in_flight: set[int], problems: list[str]) -> dict:
        at: dict[int, list[tuple[float, Run]]] = {}
        for run in runs:
            for kid, t in zip(run.ids, run.times):
                at.setdefault(kid, []).append((t, run))
        lost = sorted(self.expected - set(at))
        if lost:
            problems.append(f"{group}: lost {len(lost)}: {lost[:20]}")
        if self.self_echo & set(at) or set(at) - self.expected - self.self_echo:
            problems.append(f"{group}: delivered self-echo or unknown ids: {sorted(set(at) - self.expected)[:20]}")
        repeated = {k for k, where in at.items() if len(where) > 1}
        for run in runs:
            ids = run.ids if run.kind != "watch" else [k for k in run.ids if k not in in_flight | repeated]
            if any(b <= a for a, b in zip(ids, ids[1:])):
                problems.append(f"{group}: run {run.index} ({run.kind} on {run.machine}) out of id order: {ids[:40]}")
        by_kill: dict[int, int] = {}
        by_restart = 0
        lost_window = (self.args.lose_tail or 0) + 1.0
        for kid in sorted(repeated):
            where = sorted(at[kid], key=lambda p: p[0])
            for (t, first), (t2, _second) in zip(where, where[1:]):
                if first.killed and first.ids[-1] == kid:
                    by_kill[first.index] = by_kill.get(first.index, 0) + 1
                elif self.crash_t is not None and t <= self.crash_t < t2 and (
                        kid == max((k for k, tt in zip(first.ids, first.times) if tt <= self.crash_t), default=None)
                        or (self.args.lose_tail and t >= self.crash_t - lost_window)):
                    by_restart += 1
                else:
                    problems.append(f"{group}: {kid} delivered again (runs {first.index} then {_second.index}) "
                                    f"with no kill or restart to charge it to")
        return {"delivered": len(set(at) & self.expected), "lost": len(lost),
                "duplicates": sum(len(w) - 1 for w in at.values()), "by_kill": sum(by_kill.values()),
                "max_dup_per_kill": max(by_kill.values(), default=0), "by_restart": by_restart,
                "in_killed_output_only": sum(1 for w in at.values() if all(r.killed for _t, r in w)),
                "members": sorted({f"{r.machine}:{r.kind}" for r in runs if r.kind != "drain"})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--max-burst", type=int, default=30)
    parser.add_argument("--aof", choices=("always", "everysec"), default="always", help="appendfsync")
    parser.add_argument("--lose-tail", type=float, default=0.0, metavar="SECONDS",
                        help="cut the AOF back to its size this long before the crash (only with --aof everysec)")
    parser.add_argument("--claim-after", type=float, default=3.0)
    parser.add_argument("--once-kill-share", type=float, default=0.5)
    parser.add_argument("--settle", type=float, default=40.0, help="seconds after the last burst for the groups")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-warmup", action="store_true",
                        help="send and kill from the start, not once both relays are past their first contact")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workdir")
    args = parser.parse_args(argv)
    if args.lose_tail and args.aof != "everysec":
        parser.error("--lose-tail models appendfsync everysec: use it with --aof everysec")
    if args.seed is None:
        args.seed = secrets.randbelow(2**31)
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kijito-fleet-chaos-"))
    trial = Trial(args, root)
    try:
        summary = trial.run()
    finally:
        trial.close()
    summary["workdir"] = str(root)
    if not summary["problems"] and not args.workdir:
        shutil.rmtree(root, ignore_errors=True)
        summary["workdir"] = None
    if args.json:
        print(json.dumps(summary))
    else:
        for name, g in summary["groups"].items():
            print(f"{name} ({', '.join(g['members'])}): delivered={g['delivered']}/{summary['messages']} "
                  f"lost={g['lost']} duplicates={g['duplicates']} (kills {g['by_kill']}, restart {g['by_restart']}) "
                  f"max_dup_per_kill={g['max_dup_per_kill']} only_in_killed_output={g['in_killed_output_only']}")
        print(f"total: messages={summary['messages']} kills={summary['kills']} aof={args.aof} "
              f"lose_tail={args.lose_tail}s aof_bytes_cut={summary['aof_bytes_cut']} "
              f"appends_lost={summary['appends_lost']} relay_refills={summary['relay_refills']} "
              f"lost={summary['lost']} duplicates={summary['duplicates']} "
              f"kijito_requests_from_consumers={summary['kijito_requests_from_consumers']} "
              f"hostnames={'own' if summary['hostnames'] else 'shared'} seed={args.seed} "
              f"elapsed={summary['elapsed_s']}s")
        for p in summary["problems"][:50]:
            print("PROBLEM: " + p)
        if summary["problems"]:
            print(f"outputs kept in {root}")
    return 0 if not summary["problems"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
