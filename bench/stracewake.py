"""What a watcher does per wake, read from an strace of its measured window (`bench_watch.py --strace DIR`).

`Tracer(pid, path)` attaches `strace -f -tt -s 160 -qq -o path -p pid` to every thread of a running tool
(waiting until each task's TracerPid names it, so no syscall of the window is missed) and detaches
on `stop()`. `analyse(path, pid, messages)` then reads the trace and returns:

- `per_message`: every syscall of the window by name, divided by the messages sent;
- `threads`: syscalls per thread (main = the tool's pid), per message;
- `critical`: the syscalls between the long-poll answer that reported a message (a read of an HTTP
  answer whose body carries `"cursor"`: the notify envelope) and the tool's `new` line for it (the
  next write to fd 1 of a `new` event), summed over the wakes found, with `hops` = how often consecutive
  syscalls in that span come from different threads (each one is a thread hand-off, a futex wake and
  a context switch on the critical path) and `wakes` = how many such spans were found;
- `after`: the same from the `new` line to the next long-poll request written (`GET /api/notify/pending`):
  the rest of the wake (acknowledgement, state save), which delays the *next* wake, not this one.

strace slows every syscall down by tens of microseconds: read the counts, not the timings of a traced run.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

_LINE = re.compile(r"^(\d+)\s+\S+\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$")
_NEW_LINE = re.compile(r'1, "\{.{0,80}\\"event\\": ?\\"new\\"')  # a `new` event written to stdout
_HTTP_ANSWER = re.compile(r'\d+, "HTTP/1\.[01] ')  # a read that returned an HTTP answer's head
_READS = {"read", "recvfrom", "recvmsg", "recv"}
_WRITES = {"write", "sendto", "sendmsg", "send", "writev"}


class Tracer:
    """An strace attached to every thread of `pid`, writing to `path` until `stop()`."""

    def __init__(self, pid: int, path: Path, timeout: float = 10.0):
        self.pid = pid
        self.path = path
        self.proc = subprocess.Popen(["strace", "-f", "-tt", "-s", "160", "-qq", "-o", str(path), "-p", str(pid)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while not self._all_traced():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
                raise RuntimeError(f"strace did not attach to {pid}: {err or 'timed out'}")
            time.sleep(0.02)

    def _all_traced(self) -> bool:
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return False
        for tid in tasks:
            try:
                status = Path(f"/proc/{self.pid}/task/{tid}/status").read_text()
            except OSError:
                continue
            tracer = next((line.split()[1] for line in status.splitlines() if line.startswith("TracerPid:")), "0")
            if tracer != str(self.proc.pid):
                return False
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # detaches from the tool, which runs on
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _calls(path: Path) -> list[tuple[int, str, str]]:
    """(tid, syscall, rest of the line) per syscall, in trace order; an interrupted call counts once, at its
    start, with its rest joined from the `resumed` line (which carries what a read returned)."""
    out: list[tuple[int, str, str]] = []
    open_calls: dict[int, int] = {}  # tid -> index in out of its unfinished call
    for line in path.read_text(errors="replace").splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        tid, resumed, name, rest = int(m.group(1)), m.group(2), m.group(3), m.group(4)
        if resumed:
            i = open_calls.pop(tid, None)
            if i is not None:
                t, n, r = out[i]
                out[i] = (t, n, r + rest)
            continue
        out.append((tid, name, rest))
        if rest.endswith("<unfinished ...>"):
            open_calls[tid] = len(out) - 1
    return out


def _span_counts(calls: list[tuple[int, str, str]], start: int, end: int) -> tuple[collections.Counter, int]:
    span = calls[start:end + 1]
    hops = sum(1 for a, b in zip(span, span[1:]) if a[0] != b[0])
    return collections.Counter(n for _, n, _ in span), hops


def analyse(path: Path, pid: int, messages: int) -> dict[str, Any]:
    calls = _calls(path)
    total = collections.Counter(n for _, n, _ in calls)
    by_thread: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for tid, name, _ in calls:
        by_thread["main" if tid == pid else f"thread {tid}"][name] += 1
    critical, after = collections.Counter(), collections.Counter()
    hops = after_hops = wakes = 0
    answer = new_at = None
    for i, (_, name, rest) in enumerate(calls):
        if name in _READS and _HTTP_ANSWER.match(rest) and '\\"cursor\\"' in rest:  # (quotes shown escaped)
            answer, new_at = i, None
        elif name in _WRITES and _NEW_LINE.match(rest) and answer is not None:
            counts, h = _span_counts(calls, answer, i)
            critical += counts
            hops += h
            wakes += 1
            answer, new_at = None, i
        elif name in _WRITES and "GET /api/notify/pending" in rest and new_at is not None:
            counts, h = _span_counts(calls, new_at + 1, i)
            after += counts
            after_hops += h
            new_at = None
    per = max(messages, 1)
    return {"messages": messages, "wakes": wakes, "syscalls": sum(total.values()),
            "per_message": {k: v / per for k, v in total.most_common()},
            "threads": {t: {k: v / per for k, v in c.most_common()} for t, c in sorted(by_thread.items())},
            "critical": {k: v / max(wakes, 1) for k, v in critical.most_common()},
            "critical_hops": hops / max(wakes, 1),
            "after": {k: v / max(wakes, 1) for k, v in after.most_common()},
            "after_hops": after_hops / max(wakes, 1)}


def report(results: list[tuple[str, dict[str, Any]]]) -> None:
    """Markdown: per tool, syscalls per message and on the critical path of one wake."""
    keys = ["read", "recvfrom", "write", "sendto", "poll", "epoll_wait", "select", "pselect6", "futex",
            "fsync", "fdatasync", "rename", "renameat", "renameat2", "link", "unlink", "openat", "close",
            "flock", "fstat", "newfstatat", "getpid", "clock_gettime", "pwrite64", "pread64", "ftruncate",
            "connect", "socket"]
    print("\n### Syscalls per wake (strace of the measured window; counts only: strace slows every call)\n")
    for section, label in (("per_message", "whole window, per message"),
                           ("critical", "critical path: long-poll answer read -> `new` line written"),
                           ("after", "after the `new` line -> next long-poll sent")):
        seen = sorted({k for _, r in results for k in r[section]},
                      key=lambda k: (keys.index(k) if k in keys else len(keys), k))
        print(f"\n{label}:\n")
        print("| tool | total | thread hops | " + " | ".join(seen) + " |")
        print("|---|---|---|" + "---|" * len(seen))
        for name, r in results:
            hop = {"per_message": "-", "critical": f"{r['critical_hops']:.1f}", "after": f"{r['after_hops']:.1f}"}
            row = r[section]
            print(f"| {name} | {sum(row.values()):.1f} | {hop[section]} | "
                  + " | ".join(f"{row.get(k, 0):.1f}" for k in seen) + " |")
    print()
    for name, r in results:
        threads = "; ".join(f"{t}: {sum(c.values()):.1f}" for t, c in r["threads"].items())
        print(f"- {name}: {r['syscalls']} syscalls over {r['messages']} messages, {r['wakes']} wakes traced "
              f"answer-to-line; per message by thread: {threads}")
