#!/usr/bin/env python3
"""`kijito-pull dashboard` with many personas, as markdown tables: how fast the page is served, how soon an
open page hears of new mail, and what the dashboard costs Kijito next to one `kijito-pull watch`.

An in-process sandbox with N personas (one message each) and N cursor files on this machine (one
`pull --once` of every persona), then two real subprocesses, one after the other, each for an idle
window of W seconds in which M messages arrive, spread evenly:

(1) `kijito-pull dashboard`, with B browsers' event streams open (plain HTTP clients reading
    /events): GET / (the page, snapshot embedded) and GET /snapshot.json timed R times each, the
    time from a send to the event that shows it, and the requests Kijito received in the window.
(2) `kijito-pull watch --all-personas` (its own consumer), the same window and mail: the requests
    Kijito received. The dashboard reads no inbox, so its cost is the watch's notify/pending long-poll
    (and the persona directory, read as watch reads it) and nothing per persona or per browser.

    .venv/bin/python bench/bench_dashboard.py --personas 1000 --window 60 --mail 10 --browsers 5
"""

from __future__ import annotations

import argparse
import collections
import http.client
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import requests
from bench_watch import Proc, git_state  # noqa: E402 - bench/ is on the path of a bench script
from stats import percentile  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.cli.main import main  # noqa: E402
from kijito_pull.core.environment import Environment  # noqa: E402
from kijito_pull.sandbox import Sandbox  # noqa: E402

TOKEN = "bench-dashboard-token"


def environ(sb: Sandbox, state: Path) -> dict[str, str]:
    return {"KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sb.url, "KIJITO_PULL_STATE_DIR": str(state),
            "KIJITO_PULL_CONFIG": os.devnull, "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(REPO)}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


class Stream(threading.Thread):
    """One browser's event stream: the arrival time and snapshot of every event."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.events: list[tuple[float, dict]] = []
        self.cond = threading.Condition()

    def run(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=None)
        conn.request("GET", f"{parts.path}?{parts.query}")
        answer = conn.getresponse()
        data = []
        for raw in iter(answer.fp.readline, b""):  # each line as soon as it arrives
            line = raw.decode("utf-8").rstrip("\n")
            if line.startswith("data: "):
                data.append(line[6:])
            elif not line and data:
                snap = json.loads("".join(data))
                data = []
                with self.cond:
                    self.events.append((time.monotonic(), snap))
                    self.cond.notify_all()

    def wait_for(self, test, timeout: float) -> float | None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for at, snap in self.events:
                    if test(snap):
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)


def unread_of(snap: dict, persona: str) -> int:
    return next((p["unread"] for p in snap["personas"] if p["persona"] == persona), 0)


def by_path(log: list[dict]) -> dict[str, int]:
    return dict(collections.Counter(r["path"] for r in log))


def timed_gets(session: requests.Session, url: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = session.get(url, timeout=10)
        answer.content  # noqa: B018 - the whole body counts
        out.append(time.perf_counter() - started)
        assert answer.status_code == 200, answer.status_code
    return out


def send_spread(sb: Sandbox, personas: list[str], mail: int, window: float, sent: list) -> None:  # noqa: ANN001
    for i in range(mail):
        time.sleep(window / (mail + 1))
        persona = personas[(i * 97) % len(personas)]
        sent.append((time.monotonic(), persona, sb.send(to=persona, sender="loom", content=f"bench {i}")))


def dashboard_run(sb: Sandbox, state: Path, personas: list[str], args: argparse.Namespace) -> dict:
    proc = subprocess.Popen([sys.executable, "-m", "kijito_pull", "dashboard"], env=environ(sb, state),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        base = url.split("?")[0].rstrip("/")
        key = url.split("key=")[1]
        started = time.monotonic()
        while True:
            snap = requests.get(f"{base}/snapshot.json?key={key}", timeout=10).json()
            if len(snap["personas"]) >= len(personas) and len(snap["cursors"]) >= len(personas):
                break
            if time.monotonic() - started > 120:
                raise SystemExit("the dashboard did not show every persona within 120 s")
            time.sleep(0.1)
        ready = time.monotonic() - started
        startup = by_path(sb.requests)
        session = requests.Session()
        page = timed_gets(session, url, args.runs)
        size = len(session.get(url, timeout=10).content)
        snapshot = timed_gets(session, f"{base}/snapshot.json?key={key}", args.runs)
        streams = [Stream(f"{base}/events?key={key}") for _ in range(args.browsers)]
        first = time.monotonic()
        for s in streams:
            s.start()
        first_event = [s.wait_for(lambda _s: True, 10) for s in streams]
        sb.clear_requests()
        sent: list = []
        send_spread(sb, personas, args.mail, args.window, sent)
        time.sleep(args.window / (args.mail + 1))
        log = sb.requests
        latencies = []
        for at, persona, _ident in sent:
            arrived = streams[0].wait_for(lambda s, p=persona: unread_of(s, p) >= 2, 5)
            if arrived is not None:
                latencies.append(arrived - at)
        return {"ready": ready, "startup": startup, "page": page, "page_bytes": size, "snapshot": snapshot,
                "first_event": max((t - first) for t in first_event if t) if any(first_event) else None,
                "latencies": latencies, "missed": len(sent) - len(latencies), "window": by_path(log),
                "events": len(streams[0].events)}
    finally:
        proc.terminate()
        proc.wait(15)


def watch_run(sb: Sandbox, state: Path, personas: list[str], args: argparse.Namespace) -> dict:
    watch = Proc([sys.executable, "-m", "kijito_pull", "watch", "--all-personas", "--consumer", "bench-watch",
                  "--no-stranded-alerts"], environ(sb, state))
    try:
        deadline = time.monotonic() + 300
        while sum(1 for _, e in watch.events if e.get("event") == "armed") < len(personas):
            if time.monotonic() > deadline or watch.proc.poll() is not None:
                raise SystemExit(f"watch did not arm every persona: {watch.stderr_lines[-3:]}")
            time.sleep(0.2)
        quiet = time.monotonic()  # its first pulls settle: no inbox read for 5 s
        seen = 0
        while time.monotonic() - quiet < 5:
            reads = sum(1 for r in sb.requests if r["path"] == "/api/inbox")
            if reads != seen:
                seen, quiet = reads, time.monotonic()
            time.sleep(0.5)
        startup = by_path(sb.requests)
        sb.clear_requests()
        sent: list = []
        send_spread(sb, personas, args.mail, args.window, sent)
        time.sleep(args.window / (args.mail + 1))
        return {"startup": startup, "window": by_path(sb.requests)}
    finally:
        watch.proc.terminate()
        watch.proc.wait(15)


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--personas", type=int, default=1000)
    parser.add_argument("--window", type=float, default=60.0, help="seconds of each measured window")
    parser.add_argument("--mail", type=int, default=10, help="messages arriving in each window")
    parser.add_argument("--browsers", type=int, default=5, help="event streams open on the dashboard")
    parser.add_argument("--runs", type=int, default=50, help="timed GETs of the page and of the snapshot")
    args = parser.parse_args()
    personas = [f"p{i:04d}" for i in range(args.personas)]
    tmp = Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    try:
        with Sandbox(token=TOKEN).start() as sb:
            for persona in personas:
                sb.send(to=persona, sender="loom", content="hello")
            state = tmp / "state"
            argv = ["--once", "--json"] + [a for p in personas for a in ("--persona", p)]
            code = main(argv, Environment(stdin=io.StringIO(""), stdout=io.StringIO(), stderr=sys.stderr,
                                          environ=environ(sb, state), cwd=str(tmp)))  # a cursor file each
            assert code == 0
            sb.clear_requests()
            dash = dashboard_run(sb, state, personas, args)
            sb.clear_requests()
            watch = watch_run(sb, state, personas, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(args, dash, watch)


def report(args: argparse.Namespace, dash: dict, watch: dict) -> None:
    scale = 60.0 / args.window
    print(f"# bench_dashboard: {args.personas} personas, {args.browsers} open pages, {args.mail} messages in "
          f"{args.window:g} s; {git_state()}\n")
    print("| what | median | p95 | max |")
    print("|---|---|---|---|")
    for label, values in ((f"GET / (the page, {dash['page_bytes'] // 1024} KiB)", dash["page"]),
                          ("GET /snapshot.json", dash["snapshot"]),
                          ("send -> the event that shows it", dash["latencies"])):
        if values:
            print(f"| {label} | {ms(percentile(values, 0.5))} | {ms(percentile(values, 0.95))} | {ms(max(values))} |")
    print(f"\nready (every persona and cursor shown) {dash['ready']:.1f} s after start; first event on "
          f"{args.browsers} new streams within {ms(dash['first_event'] or 0)}; {dash['missed']} sends not seen "
          f"within 5 s; {dash['events']} events in the window\n")
    print("| process | start-up requests | window: notify/pending | personas | inbox | other | per minute |")
    print("|---|---|---|---|---|---|---|")
    for label, run in ((f"dashboard, {args.browsers} pages open", dash), ("watch --all-personas", watch)):
        w = run["window"]
        notify, listing, inbox = w.get("/api/notify/pending", 0), w.get("/api/personas", 0), w.get("/api/inbox", 0)
        other = sum(w.values()) - notify - listing - inbox
        start = ", ".join(f"{k} {v}" for k, v in sorted(run["startup"].items()))
        print(f"| {label} | {start} | {notify} | {listing} | {inbox} | {other} | "
              f"{(notify + listing + inbox + other) * scale:.1f} |")


if __name__ == "__main__":
    main_bench()
