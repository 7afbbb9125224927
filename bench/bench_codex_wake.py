#!/usr/bin/env python3
"""Idle wake latency of an interactive Codex session: from the send to the model request holding the mail.

The real Codex TUI (the version `scripts/install-harnesses` pins) runs under tmux, offline, against the
fake model's Responses API; kijito-pull's hooks are installed and trusted for the user (`install codex
--user --trust`), the project opts in. After the first turn the session sits idle and its watcher
(`kijito-pull hook codex-watch`) waits. N messages are then sent one at a time (the sandbox's own send);
after each, the queued turn is awaited and confirmed, and the session left idle for a moment, so every
message wakes an idle session through `codex queue --thread <id>`.

Two runs: with Codex's shared app-server daemon (the default for a TUI) and with `--no-daemon` (an
in-process server, which takes a queued message only when it polls for one).

    .venv/bin/python bench/bench_codex_wake.py            # 10 messages per mode
    .venv/bin/python bench/bench_codex_wake.py -n 5 --modes daemon

Acceptance (issue 13): every message in a model request within 10 s of the send, each handed over once.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harnessbench import need_harness  # noqa: E402 - bench/ is on the path of a bench script
from stats import percentile  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402
from tests.e2e import claude_helpers as ch  # noqa: E402
from tests.e2e import codex_helpers as cx  # noqa: E402
from tests.e2e import harness as h  # noqa: E402
from tests.e2e.fakemodel import FakeModel, Reply  # noqa: E402

BUDGET = 10.0


@dataclass
class CodexSession:
    """An interactive Codex session through its first turn, its watcher armed (what `codex_tui` yields)."""
    harness: h.Harness
    tui: h.Tmux
    model: FakeModel
    sandbox: Sandbox
    env: dict[str, str]
    project: Path
    state: Path

    def pending(self) -> list[dict]:
        return cx.pending(self.env, self.project)

    def logs(self) -> str:
        return f"{cx.watch_logs(self.state)}\n{self.tui.capture()}"


@contextlib.contextmanager
def codex_tui(daemon: bool, reply: Reply = "ok") -> Iterator[CodexSession]:
    """The real Codex TUI, offline, hooks installed and trusted for the user, in an opted-in project, through
    its first turn with its watcher armed; the fake model answers with `reply`. Everything stops on exit."""
    harness = need_harness("codex")
    root = Path(tempfile.mkdtemp(prefix="bench-codex-"))
    home, state = root / "home", root / "state"
    home.mkdir()
    model = FakeModel(reply, bind=h.netns().listen, log_path=str(root / "model.jsonl")).start()
    sb = ch.start_sandbox()
    project = ch.make_project(root)
    cx.write_config(home, model.url, trusted_projects=(project,))
    env = cx.codex_env(harness, home, sb.url, state)
    try:
        installed = ch.kp(env, project, "install", "codex", "--user", "--trust")
        if installed.returncode != 0:
            raise SystemExit(f"install failed: {installed.stderr}")
        tui = cx.start_tui(harness, env, project, model, daemon=daemon)
        try:
            session = CodexSession(harness, tui, model, sb, env, project, state)
            if not ch.wait_until(lambda: len(cx.watchers(state)) == 1, 20):
                raise SystemExit(f"no watcher armed\n{session.logs()}")
            yield session
        finally:
            if daemon:
                cx.daemon_stop(harness, env)
            tui.kill()
    finally:
        sb.stop()
        model.stop()


def measure(daemon: bool, count: int, idle_gap: float) -> dict:
    latencies: list[float] = []
    duplicates = 0
    with codex_tui(daemon) as session:
        model = session.model
        time.sleep(idle_gap)
        for i in range(count):
            marker = f"BENCH-CODEX-{'daemon' if daemon else 'nodaemon'}-{i:03d}"
            start = len(model.requests)
            sent = time.time()
            session.sandbox.send(ch.PERSONA, "loom", marker)
            request = model.wait_for_text(marker, timeout=BUDGET + 20, start=start)
            if request is None:
                raise SystemExit(f"{marker} never reached the model\n{session.logs()}")
            latencies.append(request["time"] - sent)
            if not ch.wait_until(lambda: session.pending() == [], 20):
                raise SystemExit(f"{marker} was never confirmed: {session.pending()}")
            time.sleep(idle_gap)
            last = model.model_requests[-1]
            duplicates += model.text_of(last).count(marker) != 1
        version = session.harness.version
    return {"mode": "shared daemon" if daemon else "--no-daemon", "version": version,
            "latencies": latencies, "duplicates": duplicates}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--count", type=int, default=10, help="messages per mode (default 10)")
    parser.add_argument("--modes", default="daemon,no-daemon", help="comma-separated: daemon, no-daemon")
    parser.add_argument("--idle-gap", type=float, default=1.0, help="seconds idle before each send (1.0)")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results = [measure(m == "daemon", args.count, args.idle_gap) for m in modes]
    ms = lambda v: f"{v * 1000:.0f}"  # noqa: E731
    print(f"Codex idle wake latency, {datetime.date.today()}, {platform.machine()}, Python "
          f"{platform.python_version()}, netns {'on' if h.netns().active else 'off'}, {args.count} messages per "
          f"mode\n")
    print("| Codex | mode | send -> model request p50 / p95 / max (ms) | handed over != once |")
    print("|---|---|---|---|")
    ok = True
    for r in results:
        v = r["latencies"]
        print(f"| {r['version']} | {r['mode']} | {ms(percentile(v, .5))} / {ms(percentile(v, .95))} / {ms(max(v))} "
              f"| {r['duplicates']} |")
        ok = ok and max(v) <= BUDGET and r["duplicates"] == 0
    print(f"\nacceptance (every message in a model request within {BUDGET:g} s of the send, each once): "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
