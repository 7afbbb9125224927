#!/usr/bin/env python3
"""The HTTP client's own cost, printed as a markdown table.

(a) Client CPU per newest-page read (`KijitoClient.inbox`, 20-row window) against an in-process sandbox,
    through the client's transport (core/transport.py, kept-alive `http.client`) and through requests'
    stock HTTPAdapter (urllib3's pool), measured with `time.thread_time` on the calling thread only, so the
    sandbox's threads are not counted. Median of the rounds.
(b) The sandbox's store time per backward page of a 10,000-message inbox (what a catch-up walks), with its
    unread index and with that index dropped (each page states the unread it did not show).

    .venv/bin/python bench/bench_client.py
    .venv/bin/python bench/bench_client.py --reads 400 --rounds 7
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import requests  # noqa: E402

from kijito_pull.core.api import KijitoClient  # noqa: E402
from kijito_pull.sandbox import Sandbox  # noqa: E402
from kijito_pull.sandbox.store import Store  # noqa: E402

TOKEN = "bench-token-c1e7"


def cpu_per_call(fn, reads: int, rounds: int) -> float:
    """Median over `rounds` of the calling thread's CPU seconds per call, after a warm-up."""
    for _ in range(50):
        fn()
    samples = []
    for _ in range(rounds):
        started = time.thread_time()
        for _ in range(reads):
            fn()
        samples.append((time.thread_time() - started) / reads)
    return statistics.median(samples)


class _Window:
    def __init__(self, rows, total):
        self.ids = []


def store_page_time(pages: int, indexed: bool) -> float:
    store = Store()
    conn = store._conn
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO messages (persona, sender, content, created) VALUES (?, ?, ?, ?)",
                     [("p", "q", f"message {i} " + "x" * 80, "2026-12-02T00:00:00Z") for i in range(10_000)])
    conn.execute("COMMIT")
    if not indexed:
        conn.execute("DROP INDEX messages_unread")
    started = time.perf_counter()
    before = None
    for k in range(pages):
        store.inbox_page("p", before, 51, _Window, False)
        before = 10_000 - 50 * (k + 1)
    return (time.perf_counter() - started) / pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=400, help="reads per round (default 400)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per transport (default 7)")
    parser.add_argument("--pages", type=int, default=200, help="backward pages of the store (default 200)")
    args = parser.parse_args(argv)
    print(f"`.venv/bin/python bench/bench_client.py {shlex.join(argv or sys.argv[1:])}`  ")
    print(f"{datetime.date.today()}, Python {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start\n")
    with Sandbox(token=TOKEN, window_limit=20).start() as sb:
        sb.add_persona("p", memory_count=1)
        sb.add_persona("q", memory_count=1)
        for i in range(30):
            sb.send(to="p", sender="q", content=f"message {i} " + "x" * 60)
        ours = KijitoClient(sb.url, TOKEN)
        stock = KijitoClient(sb.url, TOKEN, session=requests.Session())
        try:
            kept = cpu_per_call(lambda: ours.inbox("p"), args.reads, args.rounds)
            pooled = cpu_per_call(lambda: stock.inbox("p"), args.reads, args.rounds)
        finally:
            ours.close()
            stock.close()
    indexed = store_page_time(args.pages, indexed=True)
    scanned = store_page_time(args.pages, indexed=False)
    print("| benchmark | measure | result |")
    print("|---|---|---|")
    print(f"| newest-page read, client CPU per call | kept-alive `http.client` (core/transport.py) "
          f"| {kept * 1e3:.3f} ms |")
    print(f"| | requests' HTTPAdapter (urllib3 pool) | {pooled * 1e3:.3f} ms |")
    print(f"| sandbox store, per backward page of 10,000 | with the unread index | {indexed * 1e3:.2f} ms |")
    print(f"| | index dropped (table scan) | {scanned * 1e3:.2f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
