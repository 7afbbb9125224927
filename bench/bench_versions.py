#!/usr/bin/env python3
"""This checkout against an earlier commit, side by side in one run: the hot paths a refactor must not slow.

Issue 28 asks that the house step leave "hook wall times and `--once` nothing-new within noise of
today's, side by side in one run". This script checks out REV (`--against`, default 6437a94: main before
the house step) into a temporary git worktree and runs the same commands from both trees, interleaved
run by run so that both see the same load:

    once         `kijito-pull --once --json`, cursor established, nothing new (one request)
    NAME         `kijito-pull hook NAME` of the Claude Code plugin, JSON on stdin, in a project that has
                 not opted in (no request) and in one that has, with nothing new

Both trees run as `python -m kijito_pull` with PYTHONPATH set to the tree, under this interpreter (the
same dependencies), against one in-process sandbox, each with its own state folder. Wall time includes
interpreter start-up. The table gives p50 and p95 of each and the difference of the p50s.

    .venv/bin/python bench/bench_versions.py                  # 40 runs each, against 6437a94
    .venv/bin/python bench/bench_versions.py --runs 60 --against HEAD~5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stats import percentile  # noqa: E402 - bench/ is on the path of a bench script

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402

TOKEN = "bench-versions-41c2"
PERSONA = "benchbot"
BEFORE_HOUSE_STEP = "6437a94"
HOOKS = ("claude-session-start", "claude-stop", "claude-prompt")
OPT_IN = f"# Project\n\n- inbox monitor: raise on start\n- inbox persona: {PERSONA}\n"


class Tree:
    """One checkout's kijito-pull, run as a module with its own state folder."""

    def __init__(self, label: str, root: Path, work: Path, api_base: str):
        self.label, self.root = label, root
        self.env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "PYTHONPATH": str(root),
                    "KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": api_base, "KIJITO_PULL_CONFIG": os.devnull,
                    "KIJITO_PULL_STATE_DIR": str(work / "state"), "CLAUDE_CODE_ENTRYPOINT": "sdk-cli"}

    def run(self, argv: list[str], cwd: Path, stdin: str = "") -> float:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "kijito_pull", *argv], input=stdin, capture_output=True,
                              text=True, cwd=cwd, env=self.env, timeout=60)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0 or proc.stderr:
            raise SystemExit(f"{self.label}: {' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return elapsed

    def imported_from(self) -> str:
        proc = subprocess.run([sys.executable, "-c", "import kijito_pull; print(kijito_pull.__file__)"],
                              capture_output=True, text=True, env=self.env, timeout=60, check=True, cwd="/")
        return proc.stdout.strip()


def project(root: Path, name: str, opted_in: bool) -> Path:
    folder = root / name
    (folder / ".git").mkdir(parents=True)
    (folder / "AGENTS.md").write_text(OPT_IN if opted_in else "# Project\n\nNo inbox here.\n")
    return folder


def measure(trees: list[Tree], runs: int, root: Path, sb: Sandbox) -> list[tuple[str, dict[str, list[float]]]]:
    plain, opted = project(root, "plain", False), project(root, "opted", True)
    cases: list[tuple[str, list[str], Path, dict]] = [("`--once`, nothing new", ["--once", "--json", "--persona",
                                                                                   PERSONA], opted, {})]
    for name in HOOKS:
        cases.append((f"`{name}`, not opted in", ["hook", name], plain, {"prompt": "hi"}))
    for name in HOOKS[:2]:
        cases.append((f"`{name}`, opted in, nothing new", ["hook", name], opted, {"source": "startup"}))
    sb.send(to="elsewhere", sender="loom", content="id 0")  # REV may predate ids from 0 (issue 27)
    sb.send(to=PERSONA, sender="loom", content="already read")
    for tree in trees:  # first contact: the cursor established, so what follows finds nothing new
        tree.run(cases[0][1], opted)
        tree.run(["hook", "claude-stop"], opted, json.dumps({"session_id": "bench-0", "cwd": str(opted)}))
    rows = []
    for label, argv, cwd, extra in cases:
        times: dict[str, list[float]] = {tree.label: [] for tree in trees}
        stdin = json.dumps({"session_id": "bench-1", "cwd": str(cwd), "hook_event_name": "x", **extra})
        for _ in range(runs):
            for tree in trees:
                times[tree.label].append(tree.run(argv, cwd, stdin if argv[0] == "hook" else ""))
        rows.append((label, times))
    return rows


def ms(values: list[float], q: float) -> float:
    return percentile(values, q / 100) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per command and tree (default 40)")
    parser.add_argument("--against", default=BEFORE_HOUSE_STEP, metavar="REV",
                        help=f"the earlier commit (default {BEFORE_HOUSE_STEP}, main before the house step)")
    args = parser.parse_args(argv)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        other = root / "other"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(other), args.against],
                       check=True)
        try:
            with Sandbox(token=TOKEN).start() as sb:
                this_label = f"{head}{' + changes' if dirty else ''} (this)"
                trees = [Tree(this_label, REPO, root / "w-this", sb.url),
                         Tree(args.against, other, root / "w-other", sb.url)]
                for tree in trees:
                    assert tree.imported_from().startswith(str(tree.root)), tree.imported_from()
                print(f"`{os.path.relpath(sys.executable, REPO)} bench/bench_versions.py "
                      f"{' '.join(sys.argv[1:])}`  ")
                print(f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the start, "
                      f"{args.runs} runs each, interleaved\n")
                rows = measure(trees, args.runs, root, sb)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)], check=False)
    a, b = trees[0].label, trees[1].label
    print(f"| command | {a} p50 / p95 ms | {b} p50 / p95 ms | p50 difference |")
    print("|---|---|---|---|")
    for label, times in rows:
        diff = ms(times[a], 50) - ms(times[b], 50)
        print(f"| {label} | {ms(times[a], 50):.0f} / {ms(times[a], 95):.0f} | {ms(times[b], 50):.0f} / "
              f"{ms(times[b], 95):.0f} | {diff:+.0f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
