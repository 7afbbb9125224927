#!/usr/bin/env python3
"""kill -9 crash trials for the long-running and hook entry points (scripts/crash_trials.py does --once).

    watch                     kijito-pull watch --persona P: NDJSON on stdout, or (every other trial)
                              --events-file, where "took it" is the line fsynced before the state rename
    pi-child                  kijito-pull watch --persona P --ack-stdin, a thread acknowledging each event
    hook-NAME                 kijito-pull hook NAME, for every hook a registered harness's descriptor lists
                              as an entry point (`ENTRY_HOOKS` in kijito_pull/harnesses/<name>/testing.py;
                              Claude Code's are hook-stop and hook-session-start): Codex, Gemini CLI,
                              Copilot CLI, OpenCode's plugin call, Kimi Code CLI, Qwen Code, ... A harness
                              registered before main() runs (a test's toy) is in with no edit here.
    NAME-watch                a harness's push watcher (`PUSH_WATCHER`) with the stand-in of its way in
                              its descriptor names (`WAY_IN`): copilot-watch (a stand-in extension and
                              Copilot, tests/copilotext.py, recording in events.jsonl), codex-watch (a
                              stand-in `codex queue` handing the text to a stand-in Codex session,
                              tests/codexqueue.py), opencode-watch (a stand-in of the session's server,
                              tests/opencodeserver.py, recording in the store; its host is the session's
                              OpenCode process, tests/sessionhost.py)

The push watchers' stand-ins (tests/wayin.py) take a push and record it when "the turn takes it": after
their calibration runs, each push in turn is taken and recorded 0..0.3 s later, recorded late (0.5..2 s:
a watcher may be killed and the next one push it again first), taken and never recorded (a queued turn
the session never runs: the next watcher, the session's end or its host's end must claim it back), or
refused; delivered = taken and recorded. Besides the random kills, --push-kills trials per watcher kill it
the moment a push reaches the way in: "before-push" drops that push (the watcher died between recording
the batch as pending and pushing it), "after-push" lets the harness take it (the watcher died between
the push and its confirmation); the two alternate. Their sessions end now and then, as the hooks' do.

Per entry point, an in-process sandbox and its own state dir. Each trial sends a random batch (gaps from
other inboxes' mail, self-echo, now and then a body of some KB and a batch over the window, so the pull
walks backward), starts the entry point with its output in a file this script opened (the pi child's is
read by a thread and copied), and SIGKILLs it after a random delay spread over its whole life: start-up,
fetch, each delivery, each state write. watch and the pi child never exit by themselves, so every trial
of theirs ends in a kill, and in some trials more mail arrives while they run (copilot-watch too).

Every hook runs as its harness runs it: each call has a session id, the input its harness gives and the
session's record (tests.entrypoints.HarnessSession, where its descriptor says: Claude's transcript, Codex's
rollout, Copilot's events.jsonl, OpenCode's store behind a stand-in `opencode export`, Kimi's wire.jsonl,
...), and the harness adds a hook's answer (additionalContext, a Stop block's reason, OpenCode's text part)
to the record only when the hook completed (exit 0); a killed hook's output is dropped, and the turn goes
on (what the harness records then: the descriptor's `turn_lines`, e.g. Qwen's model reply). Besides the
random kills, --answer-kills trials per hook kill it right after its answer: kill -9 the moment its
stdout (a pipe, as the harness reads it) holds the answer, or the harness's hook timeout (the hook stalls
0..--after-answer-ms after its answer, then a SIGKILL at --hook-timeout from its start). After some
trials the session ends (its SessionEnd hook; OpenCode has none: its IDLE hook, session.idle, runs, then
the session's OpenCode process, the parent of its hooks (tests/sessionhost.py), exits) and a new one starts;
the last session ends before the drain. OpenCode's session.idle also runs after some turns, as the plugin
runs it. After the trials, unkilled `--once` runs drain the cursor.

Delivered means the consumer has it: a completed hook's answer (the model was given it), what the pi
controller acknowledged, each complete line of watch's stdout or events file and of the drain's output.
Mail seen only in a killed process's output is not delivered; unless a later run hands it over again,
it is lost. Checked, as in crash_trials.py:

  lost        mail for P never delivered (must be 0)
  order       each run delivers increasing ids; no run delivers N while an older message is undelivered
  self-echo   mail P wrote itself is never delivered
  duplicates  a message delivered twice needs a kill. watch and the pi child acknowledge each message:
              the run that delivered it was killed, at most 1 duplicate per kill. A hook's repeat (mail a
              completed hook gave the model, handed over again) is charged to the last kill between the
              two hand-overs; a kill may cause at most one repeated hand-over (copilot-watch: the same,
              its own kill with a push in flight included)
  exits       unkilled runs exit 0 (SessionEnd included, and it writes nothing); the lock is free at the end

Since every hook confirms from its harness's record (Codex since issue 13, the others since issue 21),
a kill after the answer loses nothing. `in_killed_output` counts the mail killed hooks showed,
`in_killed_output_lost` how much of it never reached the model later (must be 0).

    .venv/bin/python scripts/crash_entries.py --entry all --kills 350 --answer-kills 200 --seed 1
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import random
import secrets
import select
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
from scripts.crash_trials import audit_delivery, check_one_ack_per_kill  # noqa: E402
from tests.entrypoints import (  # noqa: E402
    PI_CHILD,
    WATCH,
    FileEvents,
    HarnessSession,
    PiChild,
    System,
    crash_entries,
    descriptor,
    entry_of,
    harness_of,
    hook_entries,
    hook_event,
    hook_ids,
    hook_text,
    ndjson_events,
    new_ids,
    push_watchers,
    session_end_of,
    text_ids,
)
from tests.sessionhost import SessionHost  # noqa: E402
from tests.wayin import FATES, LATE, NEVER, REFUSED, TAKEN, WayIn  # noqa: E402

PERSONA = "crashbot"
OTHERS = ("elsewhere", "noise")
SENDERS = ("river", "loom", "argus")
#: Every entry point, from the registry and the harnesses' descriptors (tests/entrypoints.py): a harness
#: registered before main() runs is in (`crash_entries()`).
ENTRY_POINTS = crash_entries()
WATCH_ARGS = ("--wait", "5", "--lock-timeout", "30")


#: Kill points of a hook trial. "random": after a random delay over its whole life. "answer": kill -9 the
#: moment its stdout holds the answer (a complete JSON line), before it exits. "timeout": the harness's
#: hook timeout: the hook goes on for a random 0..--after-answer-ms after its answer (its ack, state and
#: session files, interpreter exit), then stalls there (SIGSTOP: descheduled, a slow disk) until a SIGKILL
#: comes at the deadline counted from its start, as Claude Code's hook timeout does. A hook that exits
#: before the stall completed: its answer is the harness's.
RANDOM, ANSWER, TIMEOUT = "random", "answer", "timeout"
#: Kill points of a push watcher's trial (besides RANDOM): the moment its push reaches the way in, the push
#: dropped ("before-push") or taken ("after-push"); module docstring.
BEFORE_PUSH, AFTER_PUSH = "before-push", "after-push"
PUSH_WAIT = 20.0  # seconds a push-kill trial waits for the watcher's push
#: What the push watchers' ways in do with each push in turn, after the calibration (tests/wayin.py): a
#: fixed cycle, so a short run has each fate whatever its timing.
PUSH_FATES = (TAKEN, NEVER, TAKEN, LATE, TAKEN, REFUSED)


@dataclass
class Run:
    index: int
    kind: str  # "calibrate" | "trial" | "drain" | "end" (a session ends) | "idle" (OpenCode: a turn ends)
    out: Path
    err: Path
    mode: str = ""  # watch: "stdout" or "events-file"
    delay: float | None = None
    returncode: int | None = None
    elapsed: float = 0.0
    ids: list[int] = field(default_factory=list)  # what reached the consumer (the model): counts as delivered
    seen: list[int] = field(default_factory=list)  # every id in its output, whether or not it got further
    torn: bool = False
    late: int = 0  # messages sent while it ran
    point: str = ""  # hooks: RANDOM, ANSWER or TIMEOUT
    answered: bool = False  # hooks: a complete answer was in its stdout; push watchers: killed at a push
    session: str = ""  # Claude hooks: the session it ran in
    tag: str = ""  # push watchers: the tag its pushes carry (tests/wayin.py)

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
        # Every hook runs in sessions with its harness's record (confirmation from the record); a session
        # ends now and then (its SessionEnd hook, or for OpenCode its process), and the next one starts.
        self.hook = entry in hook_entries()  # a hook in a session with a record
        self.pusher = entry in push_watchers()  # a push watcher with a stand-in way into its session
        self.sessioned = self.hook or self.pusher
        self.harness = harness_of(entry) if self.sessioned else ""
        self.d = descriptor(self.harness) if self.sessioned else None  # its descriptor
        self.host: SessionHost | None = None  # HOSTED harnesses: the session's process, the hooks' parent
        self.targets = (BEFORE_PUSH, AFTER_PUSH) if self.pusher else (ANSWER, TIMEOUT)
        self.answer_quota = (args.push_kills if self.pusher else args.answer_kills) if self.sessioned else 0
        self.sessions: list[HarnessSession] = []
        self.session: HarnessSession | None = None
        self.way: WayIn | None = None  # push watchers: the session's way in (and its harness)
        self.ways: list[WayIn] = []
        self.fates = None  # push watchers: the cycle of PUSH_FATES, once calibrated
        # short: a socket path has at most 107 bytes
        self.runtime = Path(tempfile.mkdtemp(prefix="kp")) if self.pusher else None
        if self.sessioned:
            self.new_session()
        self.expected: set[int] = set()
        self.self_echo: set[int] = set()
        self.runs: list[Run] = []
        self.problems: list[str] = []
        self.base_s = 0.4
        self.per_msg_s = 0.005
        self.scale = 1.0
        self._send_lock = threading.Lock()
        self._pi: PiChild | None = None

    # -- mail ----------------------------------------------------------------------------------------

    def send_batch(self, n: int, rng: random.Random | None = None, persona_only: bool = False) -> None:
        rng = rng or self.rng
        for _ in range(n):
            r = 1.0 if persona_only else rng.random()
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

    def spawn(self, kind: str, delay: float | None, late_batch: int = 0, point: str = "") -> Run:
        index = len(self.runs)
        out, err = self.work / "runs" / f"{index:05d}.out", self.work / "runs" / f"{index:05d}.err"
        out.parent.mkdir(exist_ok=True)
        run = Run(index, kind, out, err, delay=delay, point=point or (RANDOM if self.hook else ""))
        if kind == "drain":
            self._run_once(run)
        elif self.hook:
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

    # -- Claude Code sessions ------------------------------------------------------------------------

    def new_session(self) -> HarnessSession:
        name = getattr(self.d, "SESSION_ID", "{}").format(f"crash-{self.seed}-{len(self.sessions):04d}")
        session = HarnessSession(self.work / "transcripts", name, harness=self.harness, home=self.system.work,
                                 interactive=self.pusher, project=self.system.project)
        self.sessions.append(session)
        self.session = session
        if getattr(self.d, "HOSTED", False):
            self.host = SessionHost()
        if self.pusher:
            self.way = self.new_way_in(session)
            self.way.fates = self.fates
            self.ways.append(self.way)
        return session

    def new_way_in(self, session: HarnessSession) -> WayIn:
        assert self.runtime is not None
        seed = self.seed * 1000 + len(self.sessions)
        module, _, function = self.d.WAY_IN.partition(":")  # the descriptor names the stand-in
        return getattr(importlib.import_module(module), function)(self.runtime, session, seed)

    def end_session(self) -> Run:
        """The session's end (never killed here). With a SessionEnd hook: it confirms what the record shows
        and makes the rest unseen again, for the next session. OpenCode: its idle hook confirms what the
        export shows, then the OpenCode process exits, and what it held is claimed back by the next pull.
        A push watcher's way in closes first: the session takes nothing more, and what it took is recorded."""
        if self.way is not None:
            self.way.close()
        run = self.session_hook(session_end_of(self.harness) or entry_of(self.d.IDLE), "end")
        if self.host is not None:
            self.host.close()
            self.host = None
        self.new_session()
        return run

    def session_hook(self, hook: str, kind: str) -> Run:
        """A hook of the session that hands nothing over (SessionEnd, OpenCode's session.idle), unkilled."""
        assert self.session is not None
        index = len(self.runs)
        run = Run(index, kind, self.work / "runs" / f"{index:05d}.out", self.work / "runs" / f"{index:05d}.err",
                  session=self.session.id)
        payload = self.system.hook_payload(hook, self.session.id, **self.session.fields(hook_event(hook)))
        proc = self.system.spawn_hook(hook, run.out, run.err, payload=payload, host=self.host)
        self._wait_or_kill(proc, None, run)
        if run.out.read_text(errors="replace").strip() not in ("", "{}"):  # "nothing to do" is {} for some
            self.problems.append(f"run {index} ({hook}) wrote to stdout: {run.out.read_text()[:300]!r}")
        self.runs.append(run)
        return run

    def hook_payload(self, run: Run) -> str:
        if self.session is None:
            return self.system.hook_payload(self.entry, "crash-session")
        run.session = self.session.id
        fields = self.session.fields(hook_event(self.entry))
        resumed = getattr(self.d, "RESUMED", ())  # what a SessionStart after the session's first hook says
        if hook_event(self.entry) == "SessionStart" and self.session.hooks and resumed:
            fields["source"] = self.rng.choice(resumed)
        self.session.hooks += 1
        return self.system.hook_payload(self.entry, self.session.id, **fields)

    # -- hooks ---------------------------------------------------------------------------------------

    def _run_hook(self, run: Run) -> None:
        payload = self.hook_payload(run)
        if run.point in (ANSWER, TIMEOUT):
            self._run_hook_piped(run, payload)
            return
        proc = self.system.spawn_hook(self.entry, run.out, run.err, payload=payload, host=self.host)
        self._wait_or_kill(proc, run.delay, run)

    def _run_hook_piped(self, run: Run, payload: str) -> None:
        """Read the hook's stdout as the harness does (a pipe) and kill it the moment the answer is complete
        (ANSWER), or stall it there until the harness's deadline SIGKILLs it (TIMEOUT). A hook with nothing
        to say exits with its stdout empty; a TIMEOUT deadline that comes first kills it before any answer."""
        started = time.monotonic()
        proc = self.system.spawn_hook_piped(self.entry, run.err, payload, host=self.host)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = started + self.args.hook_timeout if run.point == TIMEOUT else started + 120
        data = b""
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:  # the deadline, before any answer
                    proc.send_signal(signal.SIGKILL)
                    if run.point != TIMEOUT:
                        raise SystemExit(f"{self.entry}: run {run.index} did not answer within 120 s (deadlock?)")
                    break
                chunk = os.read(fd, 65536)
                if not chunk:
                    break  # it exited (or closed stdout) without a complete answer
                data += chunk
                if b"\n" in data:
                    if run.point == ANSWER:
                        proc.send_signal(signal.SIGKILL)
                    else:
                        time.sleep(self.rng.uniform(0.0, self.args.after_answer_ms / 1000.0))
                        proc.send_signal(signal.SIGSTOP)
                        time.sleep(max(0.0, deadline - time.monotonic()))
                        proc.send_signal(signal.SIGKILL)
                    break
            while True:  # whatever else it wrote before it died (a second object would be a bug)
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        finally:
            proc.stdout.close()
            if proc.poll() is None and run.point != RANDOM:
                proc.send_signal(signal.SIGCONT)  # a stopped child that somehow survived: let the kill land
            run.returncode = proc.wait(timeout=120)
            run.elapsed = time.monotonic() - started
            run.delay = run.elapsed
            run.out.write_bytes(data)

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
            delivered = child.acked_ids
            wait_for = child.wait_for
            self._pi = child
        elif self.pusher:
            proc = self.start_watcher(run)
            delivered = lambda: self.pushed(run)[0]  # noqa: E731
            wait_for = lambda predicate, timeout: self.watcher_armed(run, timeout)  # noqa: E731
            if run.point in (BEFORE_PUSH, AFTER_PUSH):
                self.kill_at_push(proc, run)
                run.elapsed = time.monotonic() - started
                return
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

    # -- push watchers -------------------------------------------------------------------------------

    def start_watcher(self, run: Run) -> subprocess.Popen:
        """The session's watcher as its session-start hook starts it: the hook's input on stdin, what it needs
        to reach the session's way in in its environment (and OpenCode's process as its host)."""
        assert self.way is not None and self.session is not None
        payload = self.system.hook_payload(self.entry, self.session.id, **self.session.fields(hook_event(self.entry)),
                                           **self.way.input_fields())
        env = self.way.watcher_env(str(run.index))
        if self.host is not None:
            env.update(self.d.watcher_env(self.host.pid))
        proc = self.system.spawn_hook(self.entry, run.out, run.err, payload=payload, env=env)
        run.tag = str(proc.pid) if self.way.tag_is_pid else str(run.index)
        return proc

    def kill_at_push(self, proc: subprocess.Popen, run: Run) -> None:
        """kill -9 the watcher the moment its push reaches the way in; the push is then dropped (BEFORE_PUSH)
        or taken (AFTER_PUSH). A watcher with nothing to push in PUSH_WAIT s is killed then (not counted)."""
        assert self.way is not None
        fired = threading.Event()

        def at_push() -> bool:
            proc.send_signal(signal.SIGKILL)
            fired.set()
            return run.point == BEFORE_PUSH

        self.way.arm(run.tag, at_push)
        fired.wait(PUSH_WAIT)
        self.way.disarm()
        run.answered = fired.is_set()
        self._wait_or_kill(proc, 0.0, run)

    def pushed(self, run: Run) -> tuple[list[int], list[int]]:
        """A push watcher's run: the ids of what the session took from it and records (now or later), and of
        everything it pushed (tests/wayin.py; the harness keeps what it took, whatever becomes of the watcher)."""
        pushes = [p for way in self.ways for p in list(way.pushes) if p.tag == run.tag]
        return ([i for p in pushes if p.delivered for i in text_ids(p.text, self.expected)],
                [i for p in pushes for i in text_ids(p.text, self.expected)])

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

    def random_kills(self) -> int:
        return sum(1 for r in self.runs if r.killed and r.point in ("", RANDOM))

    def answer_kills(self) -> int:
        """Kills that landed at their point: right after a hook's answer (ANSWER or TIMEOUT, the answer
        complete in stdout), at a watcher's push (BEFORE_PUSH, AFTER_PUSH)."""
        return sum(1 for r in self.runs if r.killed and r.point in self.targets and r.answered)

    def trial(self) -> Run:
        n = self.batch_size()
        before = len(self.expected)
        self.send_batch(n)
        point = RANDOM
        if self.answer_kills() < self.answer_quota and (self.random_kills() >= self.args.kills
                                                        or self.rng.random() < 0.5):
            # The kind tried (a watcher's: landed) less often goes next (a tie by chance), so a short run has
            # both kinds: a coin for each let a four-kill quota land all as TIMEOUT one run in sixteen. A
            # push lands whenever the watcher has mail, so the watchers' two kinds alternate exactly.
            tried = {p: sum(1 for r in self.runs if r.point == p and (r.answered or not self.pusher))
                     for p in self.targets}
            first, second = self.targets
            if tried[first] == tried[second]:
                point = first if self.rng.random() < 0.5 else second
            else:
                point = min(tried, key=tried.__getitem__)
            if self.pusher and len(self.expected) == before:
                self.send_batch(1, persona_only=True)  # something to push
        estimate = (self.base_s + self.per_msg_s * max(self.pending(), n)) * self.scale
        if self.rng.random() < 0.5:
            delay = self.rng.uniform(0.0, estimate * 1.1)
        else:
            delay = self.rng.uniform(self.base_s * self.scale * 0.8, estimate * 1.05)
        late = self.batch_size() if not self.hook and point == RANDOM and self.rng.random() < 0.4 else 0
        run = self.spawn("trial", delay if point == RANDOM else None, late, point)
        if self.hook and point == RANDOM:  # keep about three in four killed whatever the load
            self.scale = min(4.0, max(0.25, self.scale * (1.02 if run.killed else 0.94)))
        if self.sessioned and self.rng.random() < self.args.end_share:
            self.end_session()
        elif getattr(self.d, "IDLE", None) and self.rng.random() < 0.3:
            self.session_hook(entry_of(self.d.IDLE), "idle")  # the turn ended (OpenCode: the plugin's session.idle)
        return run

    def drain(self) -> None:
        for _ in range(self.args.drain_limit):
            run = self.spawn("drain", None)
            if not run.ids:
                return
        self.problems.append(f"drain: still delivering after {self.args.drain_limit} unkilled runs")

    # -- checking ------------------------------------------------------------------------------------

    def watcher_armed(self, run: Run, timeout: float) -> bool | None:
        """A push watcher: wait for its log's "armed" line (it holds the session's lease), then for its signal
        handlers (installed right after; a SIGTERM before them ends it with -15, nothing acknowledged)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if b": armed (" in run.err.read_bytes():
                time.sleep(0.3)
                return True
            time.sleep(0.02)
        return None

    def parse(self, run: Run) -> None:
        """What reached the consumer. The pi child: what the controller acknowledged (pi showed it). A hook:
        its answer only if the hook completed (exit 0); the harness drops a killed hook's output, so mail
        seen only there did not reach the model. A Claude hook's completed answer is recorded in its
        session's transcript, as Claude Code does. watch and --once: every complete line of their output."""
        if self.entry == PI_CHILD and run.kind != "drain":
            data = run.out.read_bytes()
            events, run.torn = ndjson_events(data.decode("utf-8", "replace"))
            run.seen = new_ids(events)
            child, self._pi = self._pi, None
            run.ids = child.acked_ids() if child is not None else []
            return
        if self.pusher and run.kind in ("trial", "calibrate"):
            run.ids, run.seen = self.pushed(run)
            return
        text = run.out.read_text(errors="replace") if run.out.exists() else ""
        if self.hook and run.kind != "drain":
            try:
                answer = hook_text(text)
                run.seen = hook_ids(text, self.expected)
            except (AssertionError, ValueError):
                if not run.killed:
                    self.problems.append(f"run {run.index}: stdout is not one JSON object: {text[:300]!r}")
                run.torn = True  # a write cut by the kill: the harness could not read it, so not handed over
                run.seen = run.ids = []
                return
            run.answered = answer is not None
            if run.returncode != 0:
                run.ids = []  # killed: the harness never read it
                if self.session is not None:
                    self.session.turn(hook_event(self.entry))  # but its turn goes on without it
                return
            run.ids = run.seen
            if self.session is not None:
                if answer is not None:
                    self.session.record(answer, hook_event(self.entry))
                self.session.turn(hook_event(self.entry))
            return
        events, run.torn = ndjson_events(text)
        run.ids = run.seen = new_ids(e for e in events if e.get("persona") == PERSONA)

    def check(self) -> dict:
        if self.pusher:  # every way in is closed by now: a push a killed watcher's `codex queue` made late counts
            for run in self.runs:
                if run.kind in ("trial", "calibrate"):
                    run.ids, run.seen = self.pushed(run)
        found, delivered_at, per_run = audit_delivery(self.runs, self.expected, self.self_echo)
        problems = self.problems
        problems.extend(found)
        duplicates = sum(len(w) - 1 for w in delivered_at.values())
        kills = sum(1 for r in self.runs if r.killed)
        hooks = self.hook
        if hooks or self.pusher:  # one hand-over a batch: a kill repeats at most one
            max_dup, repeated = self._check_hook_repeats(delivered_at, problems, own_kill=self.pusher)
        else:
            # watch, the pi child: one ack per message, so at most one repeat per kill.
            check_one_ack_per_kill(self.runs, per_run, duplicates, kills, problems)
            max_dup, repeated = max(per_run.values(), default=0), len(per_run)
        lost = self.expected - set(delivered_at)
        in_killed = {i for r in self.runs if r.killed for i in r.seen} & self.expected
        lock = self.lock_status()
        if lock != "free":
            problems.append(f"lock not free at the end: {lock}")
        trials = [r for r in self.runs if r.kind == "trial"]
        watch_modes = {m: sum(1 for r in trials if r.mode == m and r.killed) for m in ("stdout", "events-file")}
        return {
            "entry": self.entry,
            "trials": len(trials),
            "kills": kills,
            "random_kills": self.random_kills(),
            "answer_kills": {p: sum(1 for r in trials if r.point == p and r.killed and r.answered)
                             for p in self.targets} if self.sessioned else None,
            "answer_trials_without_answer": sum(1 for r in trials if r.point in self.targets
                                                and not r.answered) if self.sessioned else None,
            "push_fates": {f: sum(1 for w in self.ways for p in w.pushes if p.fate == f)
                           for f in FATES} if self.pusher else None,
            "killed_before_output": sum(1 for r in trials if r.killed and not r.seen),
            "killed_during_delivery": sum(1 for r in trials if r.killed and r.seen),
            "exited_before_kill": sum(1 for r in trials if not r.killed),
            "torn": sum(1 for r in self.runs if r.torn),
            "sent": len(self.expected),
            "self_echo_sent": len(self.self_echo),
            "sent_while_running": sum(r.late for r in self.runs),
            "delivered": len(set(delivered_at) & self.expected),
            "lost": len(lost),
            "in_killed_output": len(in_killed),
            "in_killed_output_lost": len(in_killed & lost),
            "lost_ids": sorted(lost)[:200],
            "duplicates": duplicates,
            "max_dup_per_kill": max_dup,
            "kills_that_caused_duplicates": repeated,
            "sessions": len(self.sessions) if self.sessioned else None,
            "session_ends": sum(1 for r in self.runs if r.kind == "end"),
            "watch_kills_by_mode": watch_modes if self.entry == WATCH else None,
            "backward_pages": sum(1 for e in self.sandbox.requests
                                  if e["path"] == "/api/inbox" and "before_id" in e["query"]),
            "drain_runs": sum(1 for r in self.runs if r.kind == "drain"),
            "stale_tmp_files": len(list((self.system.state_dir / "cursors").glob(".*.tmp"))),
            "calibration": {"base_s": round(self.base_s, 3), "per_msg_s": round(self.per_msg_s, 5)},
            "seed": self.seed,
            "problems": problems,
        }

    def _check_hook_repeats(self, delivered_at: dict[int, list[int]], problems: list[str],
                            own_kill: bool = False) -> tuple[int, int]:
        """A hook's repeat is a later hand-over (run b) of mail an earlier completed hook already gave the
        model (run a). Only a kill between them can cause that (e.g. the next hook of the session killed
        after reading the transcript, before its confirmation was saved). Each repeat is charged to the last
        kill between a and b, and a kill may cause at most one repeated hand-over. `own_kill` (a watcher,
        whose runs push batch after batch): run a's own kill counts too (killed with a push in flight).

        Returns (the most messages one kill caused to repeat, how many kills caused a repeat)."""
        pairs: dict[tuple[int, int], int] = {}
        for where in delivered_at.values():
            for a, b in zip(where, where[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
        charged: dict[int, list[tuple[int, int, int]]] = {}
        for (a, b), count in sorted(pairs.items()):
            killers = [r.index for r in self.runs[a if own_kill else a + 1:b] if r.killed]
            if not killers:
                problems.append(f"run {b} ({self.runs[b].kind}) handed over again {count} messages that run {a} "
                                f"had given the model, with no kill between them")
                continue
            charged.setdefault(killers[-1], []).append((a, b, count))
        for killer, repeats in charged.items():
            if len(repeats) > 1:
                problems.append(f"the kill of run {killer} caused {len(repeats)} repeated hand-overs: {repeats}")
        return max((sum(c for _, _, c in r) for r in charged.values()), default=0), len(charged)

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
            if self.pusher:  # from now on each push meets its fate (PUSH_FATES)
                self.fates = itertools.cycle(PUSH_FATES)
                assert self.way is not None
                self.way.fates = self.fates
            trials = 0
            # A bound on trials, not a target: on a loaded machine most random trials of a fast hook end before
            # their kill lands (exited_before_kill), so the budget is generous; reaching it is reported below.
            limit = (self.args.kills + self.answer_quota) * 6
            while ((self.random_kills() < self.args.kills or self.answer_kills() < self.answer_quota)
                   and trials < limit):
                self.trial()
                trials += 1
            if self.answer_kills() < self.answer_quota:
                self.problems.append(f"only {self.answer_kills()} of {self.answer_quota} kills landed at their "
                                     f"point ({'/'.join(self.targets)}) in {trials} trials")
            if self.session is not None:
                self.end_session()  # the last session ends too: what it was not seen to get goes to the drain
            self.drain()
            summary = self.check()
        finally:
            if self.host is not None:
                self.host.close()
            for way in self.ways:
                way.close()
            if self.runtime is not None:
                shutil.rmtree(self.runtime, ignore_errors=True)
            self.sandbox.stop()
        summary["elapsed_s"] = round(time.monotonic() - started, 1)
        return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    entry_points = crash_entries()  # now: a harness registered since the import is in
    parser.add_argument("--entry", action="append", choices=(*entry_points, "all"),
                        help="entry point(s) to kill (repeatable; default all)")
    parser.add_argument("--kills", type=int, default=400,
                        help="SIGKILLs at a random moment per entry point (default 400)")
    parser.add_argument("--answer-kills", type=int, default=200,
                        help="per hook, kills right after its answer: kill -9 the moment "
                             "its stdout holds the answer, or the harness's timeout after it stalled there "
                             "(default 200)")
    parser.add_argument("--push-kills", type=int, default=None,
                        help="per push watcher, kills the moment a push reaches the way in, the push dropped or "
                             "taken, alternately (default: --answer-kills)")
    parser.add_argument("--hook-timeout", type=float, default=1.5,
                        help="the harness's hook timeout in TIMEOUT trials, seconds from the hook's start "
                             "(default 1.5; Claude Code's is the hooks.json timeout, 15 s)")
    parser.add_argument("--after-answer-ms", type=float, default=8.0,
                        help="TIMEOUT trials: the hook stalls a random 0..N ms after its answer (default 8)")
    parser.add_argument("--end-share", type=float, default=0.08,
                        help="share of hook trials after which the session ends (SessionEnd)")
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
    if args.push_kills is None:
        args.push_kills = args.answer_kills
    entries = list(entry_points) if not args.entry or "all" in args.entry else list(dict.fromkeys(args.entry))
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
            if s["answer_kills"] is not None:
                extra = (f" dup_batches={s['kills_that_caused_duplicates']}"
                         f" random_kills={s['random_kills']} answer_kills={s['answer_kills']}"
                         f" in_killed_output={s['in_killed_output']} of_which_lost={s['in_killed_output_lost']}")
                if s["sessions"] is not None:
                    extra += f" sessions={s['sessions']}"
                if s["push_fates"] is not None:
                    extra += f" push_fates={s['push_fates']}"
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
