#!/usr/bin/env python3
"""Idle wake and busy push of every harness with a push route, side by side in one run, one table.

Each harness is its real binary from .harness/ (the versions `scripts/install-harnesses` pins), offline
against the fake model servers of the end-to-end tests, the fake model and the Kijito sandbox inside the
tests' loopback-only network namespace, kijito-pull installed as a user would, an opted-in project
(`inbox interrupt: all`, the default). Two figures per harness, each from the send (the sandbox took the
message) to the first model request that holds it:

    idle   the session idle after a turn; one message at a time, each woken turn over and its hand-over
           confirmed before the next;
    busy   a turn under way: the message is sent about 1 s before the model call (or tool call) running
           now ends, and lands at the harness's next model request (the next call of the turn, or the next
           turn where the route has no way into a running one). About 1 s of each figure is that wait.

How each is driven (the e2e tests' recipes; the older per-harness benches are reused as they are):

    Claude Code 2.1.332  bench_hooks.py: stream-json session, idle; busy = a `claude -p` per sample kept
                         busy by 2 s Bash tool calls, the message sent 1 s into the second call
    Claude Code 2.1.197  the same idle session (no session inbox socket: the waker rings the doorbell and the
                         prompt hook pulls); no busy figure, its Stop hook hands mail over at the turn's end
    Codex                bench_codex_wake.py's TUI (shared daemon); busy = a typed prompt whose model call
                         is held --hold s (1.0) with the message sent as it arrives, answered with text
    pi 1.x and 0.73.x    bench_pi_wake.py (RPC mode); busy = 2 s bash tool calls, the message sent (with
                         `kijito-pull send`, about 0.15 s of CLI start-up) 1 s into one
    OpenCode             `opencode serve`, turns through `prompt_async`; busy as Codex
    Copilot CLI          the TUI with --experimental (its extension); busy as Codex, answered with a tool
                         call (the turn goes on)
    the others           a harness whose descriptor (kijito_pull/harnesses/<name>/testing.py) says it has no
                         push route (`PUSH_ROUTE = None`: turn hooks only): a row without figures

Idle figures of Claude Code and pi start when the sandbox logged the POST of `kijito-pull send` (their
benches send with the CLI), the others at the sandbox's in-process send: the same moment, the mail stored.

    .venv/bin/python bench/bench_harness_wake.py                # 20 idle, 10 busy per harness
    .venv/bin/python bench/bench_harness_wake.py --idle 5 --busy 3 --only copilot,opencode
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import bench_codex_wake  # noqa: E402 - bench/ is on the path of a bench script
import bench_hooks  # noqa: E402
import bench_pi_wake  # noqa: E402
import harnessbench as hb  # noqa: E402
from stats import percentile  # noqa: E402

from kijito_pull.harnesses import registry  # noqa: E402 - harnessbench put the repository on the path
from tests.e2e import claude_helpers as ch  # noqa: E402
from tests.e2e import codex_helpers as cx  # noqa: E402
from tests.e2e import copilot_helpers as cp  # noqa: E402
from tests.e2e import harness as h  # noqa: E402
from tests.e2e import opencode_helpers as oc  # noqa: E402
from tests.e2e.fakemodel import FakeModel, ToolUse  # noqa: E402
from tests.entrypoints import described  # noqa: E402


def bench_claude(args: argparse.Namespace) -> dict:
    wake = bench_hooks.bench_wake(args.idle, "claude2")
    busy = bench_hooks.bench_busy(args.busy)
    return {"harness": "Claude Code", "version": wake["version"], "route": "waker -> session inbox socket",
            "idle": wake["accepted"], "busy": busy["latencies"]}


def bench_claude_doorbell(args: argparse.Namespace) -> dict:
    wake = bench_hooks.bench_wake(args.idle, "claude")
    return {"harness": "Claude Code", "version": wake["version"],
            "route": "waker -> doorbell, prompt hook (busy: Stop hook at turn end)", "idle": wake["accepted"],
            "busy": []}


def bench_pi(line: str) -> Callable[[argparse.Namespace], dict]:
    def run(args: argparse.Namespace) -> dict:
        idle = bench_pi_wake.measure(line, args.idle, 0.5)
        busy = bench_pi_wake.measure_busy(line, args.busy, 2.0, offset=1.0)
        return {"harness": "pi", "version": idle["version"], "route": "extension: `sendUserMessage` / steer",
                "idle": idle["accepted"], "busy": busy["accepted"]}

    return run


def bench_codex(args: argparse.Namespace) -> dict:
    idle = bench_codex_wake.measure(True, args.idle, 1.0)
    with bench_codex_wake.codex_tui(True) as session:
        held = hb.HeldTurn(session.sandbox, args.hold)
        session.model.reply = held
        busy = hb.busy_samples(session.model, held, args.busy, "CODEX",
                               lambda prompt: cx.submit(session.tui, session.model, prompt),
                               hb.settled(session.pending), diagnostics=session.logs)
    return {"harness": "Codex", "version": idle["version"], "route": "watcher -> `codex queue` (next turn)",
            "idle": idle["latencies"], "busy": busy}


@contextlib.contextmanager
def _home(name: str) -> Iterator[tuple[Path, Path, FakeModel, object]]:
    """A fresh root (home, state), a fake model in the namespace and a sandbox; both stopped on exit."""
    root = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    home = root / "home"
    home.mkdir()
    model = FakeModel(bind=h.netns().listen, log_path=str(root / "model.jsonl")).start()
    sb = ch.start_sandbox()
    try:
        yield root, home, model, sb
    finally:
        sb.stop()
        model.stop()


def _samples(args: argparse.Namespace, model: FakeModel, sb, prefix: str, pending: Callable[[], list],
             start_turn: Callable[[str], None], answer: str | ToolUse, diagnostics: Callable[[], str],
             not_conversation: Callable[[str], bool] = lambda _text: False) -> tuple[list[float], list[float]]:
    counts = lambda r: not not_conversation(model.text_of(r))  # noqa: E731
    idle = hb.idle_samples(model, sb, args.idle, prefix, hb.settled(pending), counts=counts, diagnostics=diagnostics)
    held = hb.HeldTurn(sb, args.hold, answer, skip=not_conversation)
    model.reply = held
    busy = hb.busy_samples(model, held, args.busy, prefix, start_turn, hb.settled(pending), counts=counts,
                           diagnostics=diagnostics)
    return idle, busy


def bench_copilot(args: argparse.Namespace) -> dict:
    harness = hb.need_harness("copilot")
    with _home("copilot") as (root, home, model, sb):
        state = root / "state"
        env = cp.copilot_env(harness, home, model.url, sb.url, state)
        project = ch.make_project(root)
        if ch.kp(env, project, "install", "copilot", "--user").returncode != 0:
            raise SystemExit("install copilot failed")
        tui = cp.start_tui(harness, env, project)
        try:
            tui.type("hello")
            if model.wait_for_text("hello", timeout=60) is None or \
                    not ch.wait_until(lambda: ch.hook_pids(state, "copilot-watch"), 30, step=0.2):
                raise SystemExit(f"copilot: no first turn or no watcher\n{tui.capture()}")
            idle, busy = _samples(args, model, sb, "COPILOT", lambda: cx.pending(env, project), tui.type,
                                  ToolUse("kijito_bench_no_such_tool", {}), tui.capture)
        finally:
            tui.kill()
    return {"harness": "Copilot CLI", "version": harness.version, "route": "extension: `session.send`",
            "idle": idle, "busy": busy}


def bench_opencode(args: argparse.Namespace) -> dict:
    harness = hb.need_harness("opencode")
    with _home("opencode") as (root, home, model, sb):
        state = root / "state"
        env = oc.opencode_env(harness, home, sb.url, state)
        project = ch.make_project(root)
        oc.write_config(project, model.url)
        if ch.kp(env, project, "install", "opencode", "--user", timeout=300).returncode != 0:
            raise SystemExit("install opencode failed")
        port = 43000 + os.getpid() % 2000
        server = oc.serve(harness, env, project, port)
        try:
            if not oc.wait_server(port):
                raise SystemExit(f"opencode serve did not answer\n{server.diagnostics()}")
            sid = oc.api(port, "POST", "/session", {})[1]["id"]  # type: ignore[index]

            def prompt(text: str) -> None:
                oc.api(port, "POST", f"/session/{sid}/prompt_async", {"parts": [{"type": "text", "text": text}]})

            prompt("hello")
            if not ch.wait_until(lambda: ch.hook_pids(state, "opencode-watch"), 60, step=0.2) or \
                    model.wait_for(lambda r: "hello" in model.text_of(r) and oc.TITLE_MARK not in model.text_of(r),
                                   timeout=60) is None:
                raise SystemExit(f"opencode: no first turn or no watcher\n{server.diagnostics()}")
            idle, busy = _samples(args, model, sb, "OPENCODE", lambda: cx.pending(env, project), prompt, "ok",
                                  server.diagnostics, not_conversation=lambda text: oc.TITLE_MARK in text)
        finally:
            server.kill()
    return {"harness": "OpenCode", "version": harness.version, "route": "watcher -> `prompt_async` (serve, TUI)",
            "idle": idle, "busy": busy}


def bench_no_route(name: str) -> Callable[[argparse.Namespace], dict]:
    """The row of a harness with no push route (its descriptor's `PUSH_ROUTE = None`): no figures."""
    def bench(_args: argparse.Namespace) -> dict:
        harness = h.find_harness(name)
        return {"harness": registry.get(name).title, "version": harness.version if harness else "not installed",
                "route": "no push route (turn hooks only)", "idle": [], "busy": []}
    return bench


BENCHES = {"claude": bench_claude, "claude197": bench_claude_doorbell, "codex": bench_codex, "pi": bench_pi("pi1"),
           "pi073": bench_pi("pi073"), "opencode": bench_opencode, "copilot": bench_copilot,
           **{name: bench_no_route(name) for name, d in described()
              if hasattr(d, "PUSH_ROUTE") and d.PUSH_ROUTE is None}}


HARNESSES = tuple(BENCHES)


def figures(values: list[float]) -> str:
    if not values:
        return "-"
    return " / ".join(f"{v * 1000:.0f}" for v in (percentile(values, .5), percentile(values, .9), max(values)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=20, help="idle wake samples per harness (default 20)")
    parser.add_argument("--busy", type=int, default=10, help="busy push samples per harness (default 10)")
    parser.add_argument("--hold", type=float, default=1.0,
                        help="Codex, OpenCode, Copilot: seconds the busy turn's model call is held (1.0)")
    parser.add_argument("--only", default=",".join(HARNESSES), help=f"comma-separated of {', '.join(HARNESSES)}")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    began = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()[0]
    peak = [load]
    stop = threading.Event()

    def watch_load() -> None:
        while not stop.wait(5):
            peak.append(os.getloadavg()[0])

    threading.Thread(target=watch_load, daemon=True).start()
    rows = []
    for name in chosen:
        started = time.monotonic()
        rows.append(BENCHES[name](args))
        print(f"{name}: done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    stop.set()
    ended = datetime.datetime.now(datetime.timezone.utc)
    print(f"Measured {began:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, load "
          f"{load:.1f} at the start, {max(peak):.1f} at most, {os.getloadavg()[0]:.1f} at the end, netns "
          f"{'on' if h.netns().active else 'off'}; command: "
          f"{shlex.join(['.venv/bin/python', 'bench/bench_harness_wake.py', *sys.argv[1:]])}\n")
    print("| harness | version | route | idle p50 / p90 / max (ms) | busy p50 / p90 / max (ms) | n idle / busy |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        n = f"{len(r['idle'])} / {len(r['busy'])}" if r["idle"] else "-"
        print(f"| {r['harness']} | {r['version']} | {r['route']} | {figures(r['idle'])} | {figures(r['busy'])} | {n} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
