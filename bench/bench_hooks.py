#!/usr/bin/env python3
"""Benchmarks for the Claude Code plugin's hooks, printed as markdown tables.

(a) Hook wall time, each hook as Claude Code runs it (`kijito-pull hook NAME`, the console script,
    JSON on stdin), interpreter start-up included:
      - not opted in (the project's AGENTS.md lacks the line): budget 60 ms;
      - opted in with nothing new (cursor established, no unseen mail), against an in-process sandbox.
(a') The launcher's cost, side by side: each not-opted-in hook as a harness runs a command line
    (`/bin/sh -c LINE`), once as `<venv>/bin/kijito-pull hook NAME` (the console script by its path)
    and once as `bin/kijito-pull-launch hook NAME` with the venv's bin on PATH (the launcher finds it
    there, its version fits), the two runs interleaved so that both see the same load. Budget: 10 ms.
(b) Wake latency of an idle session: the real Claude Code (stream-json, stdin held open,
    KIJITO_PULL_MODE=interactive) with this repository as a plugin, offline against the fake model;
    each round sends one message with `kijito-pull send` and times the model request that holds it.
    "Send accepted" starts when the sandbox logged the POST /api/send (CLI start-up excluded);
    "send invoked" starts just before the `kijito-pull send` subprocess is started.

    .venv/bin/python bench/bench_hooks.py                 # both, default sizes
    .venv/bin/python bench/bench_hooks.py --runs 30 --wakes 10
    .venv/bin/python bench/bench_hooks.py --skip-wake     # (a) only: no Claude Code needed
    .venv/bin/python bench/bench_hooks.py --harness claude2 --busy 10   # (b) on 2.1.332 (push), and (c)

(c) Busy agent: `claude -p` (2.1.332) kept busy by 2 s Bash tool calls from the fake model; one message
    per run sent one second into the second call; send accepted to the model request that holds it.

Everything (sandbox, fake model, the harness) shares this machine's cores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harnessbench import need_harness  # noqa: E402 - bench/ is on the path of a bench script
from stats import percentile  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402
from tests.e2e import claude_helpers as ch  # noqa: E402
from tests.e2e import harness as h  # noqa: E402
from tests.e2e.fakemodel import FakeModel  # noqa: E402

HOOKS = ("claude-session-start", "claude-stop", "claude-prompt", "claude-waker")


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:.0f}"


def time_hook(name: str, project: Path, env: dict[str, str], payload: dict, runs: int) -> tuple[list[float], str]:
    exe = str(ch.venv_bin() / "kijito-pull")
    times = []
    out = ""
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run([exe, "hook", name], input=json.dumps(payload), capture_output=True, text=True,
                              cwd=project, env=env, timeout=60)
        times.append(time.perf_counter() - started)
        if proc.returncode != 0 or proc.stderr:
            raise SystemExit(f"{name}: rc={proc.returncode} stderr={proc.stderr!r}")
        out = proc.stdout
    return times, out


def bench_launcher(runs: int) -> list[tuple[str, list[float], list[float]]]:
    """(hook, direct wall times, through-the-launcher wall times) per not-opted-in hook, interleaved."""
    launcher = REPO / "plugins" / "claude" / "bin" / "kijito-pull-launch"
    direct_exe = ch.venv_bin() / "kijito-pull"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, **ch.hook_env("http://127.0.0.1:9", root / "state"), "CLAUDE_CODE_ENTRYPOINT": "sdk-cli",
               "PATH": f"{ch.venv_bin()}{os.pathsep}/usr/bin:/bin"}
        plain = ch.make_project(root, opted_in=False, name="plain")
        for name in HOOKS:
            payload = json.dumps({"session_id": "bench-1", "cwd": str(plain), "hook_event_name": "Stop"})
            times: dict[str, list[float]] = {"direct": [], "launcher": []}
            for _ in range(runs):
                for how, exe in (("direct", direct_exe), ("launcher", launcher)):
                    line = f"{shlex.quote(str(exe))} hook {name}"
                    started = time.perf_counter()
                    proc = subprocess.run(["/bin/sh", "-c", line], input=payload, capture_output=True, text=True,
                                          cwd=plain, env=env, timeout=60)
                    times[how].append(time.perf_counter() - started)
                    if proc.returncode != 0 or proc.stderr or proc.stdout:
                        raise SystemExit(f"{how} {name}: rc={proc.returncode} {proc.stdout!r} {proc.stderr!r}")
            rows.append((name, times["direct"], times["launcher"]))
    return rows


def bench_hooks(runs: int) -> list[tuple[str, str, list[float], str]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Sandbox(token=ch.TOKEN).start() as sb:
        root = Path(tmp)
        state = root / "state"
        base_env = {**os.environ, **ch.hook_env(sb.url, state), "CLAUDE_CODE_ENTRYPOINT": "sdk-cli"}
        for key in [k for k in base_env if k.startswith("KIJITO_PULL_MODE")]:
            base_env.pop(key)
        plain = ch.make_project(root, opted_in=False, name="plain")
        opted = ch.make_project(root, opted_in=True, name="opted")
        floor = []
        for _ in range(runs):  # what any Python hook costs before it does anything
            started = time.perf_counter()
            subprocess.run([str(ch.venv_bin() / "python"), "-c", "pass"], check=True, timeout=60)
            floor.append(time.perf_counter() - started)
        rows.append(("(baseline)", "python -c pass", floor, "the interpreter's own start-up: the floor"))
        for name in HOOKS:
            payload = {"session_id": "bench-1", "cwd": str(plain), "hook_event_name": "Stop", "prompt": "hi",
                       "stop_hook_active": False}
            times, _ = time_hook(name, plain, base_env, payload, runs)
            rows.append(("not opted in", name, times, "exit 0, no output, no request"))
        # Opted in, nothing new: establish the cursor first (first contact), then measure.
        sb.send(ch.PERSONA, "loom", "already read")
        time_hook("claude-stop", opted, base_env, {"session_id": "bench-0", "cwd": str(opted)}, 1)
        sb.clear_requests()
        for name, extra, note in (
                ("claude-session-start", {"source": "startup"}, "headless: no output"),
                ("claude-stop", {"stop_hook_active": False}, "no block"),
                ("claude-prompt", {"prompt": "ordinary prompt"}, "not a doorbell: no network"),
                ("claude-waker", {}, "headless: exits at once")):
            payload = {"session_id": "bench-1", "cwd": str(opted), "hook_event_name": "x", **extra}
            before = len(sb.requests)
            times, out = time_hook(name, opted, base_env, payload, runs)
            assert out == "", (name, out)
            requests = (len(sb.requests) - before) / runs
            rows.append(("opted in, nothing new", name, times, f"{note}; {requests:g} request(s) per run"))
        # Opted in, nothing new, and the session's waker alive and vouching for it (lean hooks): a real
        # waker process (interactive) long-polls the sandbox; the Stop hook answers from its note.
        waker_env = {**base_env, "KIJITO_PULL_MODE": "interactive", "KIJITO_PULL_CLAUDE_WAKER": "rewake"}
        transcript = root / "lean.jsonl"
        transcript.write_text("{}\n")
        waker = subprocess.Popen([str(ch.venv_bin() / "kijito-pull"), "hook", "claude-waker"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, cwd=opted,
                                 env=waker_env)
        assert waker.stdin is not None
        waker.stdin.write(json.dumps({"session_id": "bench-lean", "cwd": str(opted), "source": "startup",
                                      "hook_event_name": "SessionStart", "transcript_path": str(transcript)}))
        waker.stdin.close()
        try:
            if not ch.wait_until((state / "sessions" / "bench-lean.current").exists, 15):
                raise SystemExit("the waker never vouched for the session")
            sb.clear_requests()
            payload = {"session_id": "bench-lean", "cwd": str(opted), "hook_event_name": "Stop",
                       "stop_hook_active": False}
            times, out = time_hook("claude-stop", opted, waker_env, payload, runs)
            assert out == "", out
            reads = sum(1 for r in sb.requests if r["path"].startswith("/api/inbox")) / runs
            rows.append(("opted in, nothing new, the session's waker vouches", "claude-stop", times,
                         f"no block; {reads:g} inbox read(s) per run (lean: answered from the waker's note)"))
        finally:
            waker.kill()
            waker.wait(5)
    return rows


def bench_busy(rounds: int, harness_name: str = "claude2") -> dict:
    """`claude -p` kept busy by 2 s Bash tool calls; one message sent (in-process, to the sandbox) one
    second into the second call of each run; the time until a model request holds it."""
    from tests.e2e.fakemodel import ToolUse

    harness = need_harness(harness_name, "or omit --busy")
    latencies: list[float] = []
    mid_turn = 0
    duplicates = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sb = ch.start_sandbox()
        state = root / "state"
        project = ch.make_project(root)
        try:
            for i in range(rounds):
                marker = f"BENCH-BUSY-{i}"
                sent: dict[str, float] = {}
                asked = [0]

                def reply(request: dict, marker: str = marker, sent: dict = sent, asked: list = asked):
                    text = FakeModel.text_of(request)
                    if ch.TITLE_MARK in text or "keep busy" not in text:
                        return "ok"
                    asked[0] += 1
                    if asked[0] == 2:
                        def later() -> None:
                            time.sleep(1.0)
                            sent["at"] = time.time()
                            sb.send(ch.PERSONA, "loom", f"{marker}: ping")
                        import threading
                        threading.Thread(target=later, daemon=True).start()
                    if asked[0] <= 6:
                        return ToolUse("Bash", {"command": "sleep 2", "description": "wait"})
                    sent.setdefault("done", time.time())
                    return "done"

                with FakeModel(reply, bind=h.netns().listen) as fm:
                    result = h.run_claude_p(harness, "keep busy", base_url=fm.url, home=root / f"home{i}",
                                            cwd=project, plugin_dirs=[ch.PLUGIN], env=ch.hook_env(sb.url, state),
                                            extra_args=["--allowedTools", "Bash"], timeout=120)
                    if result.returncode != 0:
                        raise SystemExit(f"claude -p failed: {result.stderr[-2000:]}")
                    found = next((r for r in fm.model_requests if marker in fm.text_of(r)), None)
                    if found is None or "at" not in sent:
                        raise SystemExit(f"{marker} never reached the model")
                    latencies.append(found["time"] - sent["at"])
                    mid_turn += found["time"] < sent.get("done", float("inf"))
                    last = fm.model_requests[-1]
                    duplicates += ch.handovers(fm, last, [f"{marker}:"])[f"{marker}:"] != 1
        finally:
            sb.stop()
    return {"version": harness.version, "latencies": latencies, "mid_turn": mid_turn, "duplicates": duplicates}


def bench_wake(wakes: int, harness_name: str = "claude") -> dict:
    harness = need_harness(harness_name, "or pass --skip-wake")
    accepted: list[float] = []
    invoked: list[float] = []
    duplicates = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sb = ch.start_sandbox()
        fm = FakeModel(bind=h.netns().listen).start()
        state = root / "state"
        home = root / "home"
        project = ch.make_project(root)
        env = ch.hook_env(sb.url, state, KIJITO_PULL_MODE="interactive")
        send_env = {**os.environ, **env}
        proc = h.start_claude_stream_json(harness, base_url=fm.url, home=home, cwd=project, plugin_dirs=[ch.PLUGIN],
                                          env=env)
        try:
            if not ch.wait_until(lambda: any((state / "cursors").glob("*.json")) and len(ch.waker_pids(state)) == 1,
                                 30):
                raise SystemExit("the session never armed its waker:\n" + proc.diagnostics())
            for i in range(wakes):
                time.sleep(0.5)  # idle
                marker = f"BENCH-WAKE-{i}"
                start = len(fm.requests)
                sb.clear_requests()
                t0 = time.time()
                subprocess.run(h.netns().wrap([str(ch.venv_bin() / "kijito-pull"), "send", "--to", ch.PERSONA,
                                               "--from", "loom", f"{marker}: ping"]),
                               env=send_env, check=True, capture_output=True, timeout=30)
                request = ch.wait_for_conversation(fm, marker, timeout=15, start=start)
                if request is None:
                    raise SystemExit(f"{marker} never reached the model:\n" + proc.diagnostics())
                sends = [r for r in sb.requests if r["path"] == "/api/send"]
                accepted.append(request["time"] - sends[0]["ts"])
                invoked.append(request["time"] - t0)
                # Wait for the woken turn to end and the next waker to be armed.
                if not ch.wait_until(lambda: len(ch.waker_pids(state)) == 1 and
                                     not (state / "sessions").joinpath("x").exists(), 15):
                    raise SystemExit("the waker was not re-armed:\n" + proc.diagnostics())
                time.sleep(0.3)
            time.sleep(2)
            last = fm.model_requests[-1]
            duplicates = sum(1 for i in range(wakes)
                             if ch.handovers(fm, last, [f"BENCH-WAKE-{i}:"])[f"BENCH-WAKE-{i}:"] != 1)
        finally:
            proc.kill()
            fm.stop()
            sb.stop()
    return {"version": harness.version, "accepted": accepted, "invoked": invoked, "duplicates": duplicates}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per hook (default 40)")
    parser.add_argument("--wakes", type=int, default=20, help="wake rounds (default 20)")
    parser.add_argument("--skip-wake", action="store_true", help="hook wall times only")
    parser.add_argument("--harness", default="claude", choices=("claude", "claude2"),
                        help="the Claude Code of the wake bench: claude (2.1.197, the doorbell) or claude2 "
                             "(2.1.332, the push through the session inbox socket)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="also N runs of claude -p (2.1.332) kept busy by tool calls, one message each")
    args = parser.parse_args()
    print(f"Measured {datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; command: {shlex.join(['bench/bench_hooks.py', *sys.argv[1:]])}\n")
    rows = bench_hooks(args.runs)
    print(f"Hook wall time ({args.runs} runs each, interpreter start-up included):\n")
    print("| project | hook | p50 (ms) | p95 (ms) | max (ms) | what it did |")
    print("|---|---|---|---|---|---|")
    for project, name, times, note in rows:
        shown = name if project == "(baseline)" else f"hook {name}"
        print(f"| {project} | `{shown}` | {ms(times, 0.5)} | {ms(times, 0.95)} | {max(times) * 1000:.0f} | {note} |")
    print(f"\nThrough the launcher, side by side (not opted in, `/bin/sh -c LINE`, {args.runs} interleaved runs "
          f"each; kijito-pull on PATH):\n")
    print("| hook | direct p50 / p95 (ms) | launcher p50 / p95 (ms) | added p50 (ms) |")
    print("|---|---|---|---|")
    for name, direct, launched in bench_launcher(args.runs):
        added = (percentile(launched, 0.5) - percentile(direct, 0.5)) * 1000
        print(f"| `hook {name}` | {ms(direct, 0.5)} / {ms(direct, 0.95)} | {ms(launched, 0.5)} / "
              f"{ms(launched, 0.95)} | {added:+.1f} |")
    if not args.skip_wake:
        wake = bench_wake(args.wakes, args.harness)
        print(f"\nWake latency of an idle Claude Code {wake['version']} session (stream-json, "
              f"{args.wakes} messages, one at a time):\n")
        print("| from | p50 (ms) | p95 (ms) | max (ms) |")
        print("|---|---|---|---|")
        for label, values in (("send accepted (sandbox logged POST /api/send)", wake["accepted"]),
                              ("`kijito-pull send` invoked", wake["invoked"])):
            print(f"| {label} | {ms(values, 0.5)} | {ms(values, 0.95)} | {max(values) * 1000:.0f} |")
        print(f"\nMessages handed over other than exactly once: {wake['duplicates']}")
    if args.busy:
        busy = bench_busy(args.busy)
        values = busy["latencies"]
        print(f"\nBusy `claude -p` (Claude Code {busy['version']}, 2 s Bash tool calls), send accepted to the "
              f"model request holding it ({args.busy} runs, one message each):\n")
        print("| p50 (ms) | p95 (ms) | max (ms) | in the busy turn | handed over other than once |")
        print("|---|---|---|---|---|")
        print(f"| {ms(values, 0.5)} | {ms(values, 0.95)} | {max(values) * 1000:.0f} | {busy['mid_turn']} of "
              f"{args.busy} | {busy['duplicates']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
