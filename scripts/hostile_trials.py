#!/usr/bin/env python3
"""Hostile-server and hostile-environment trials for `kijito-pull --once --json` (issue 23, items 1-7).

Each scenario gets its own in-process sandbox and state dir, an established cursor, then:

  1. the hostility is switched on and a burst of mail is sent (more than the window of 4, so the older
     part can only be found by walking backward);
  2. `--once` runs under it (a real process, killed at 60 s if it does not end: a hang is a failure);
  3. the hostility is removed, and three more bursts are sent, each followed by `--once`.

Then the ledger is checked against what the runs printed:

  lost     mail sent to the persona that no run handed over (must be 0)
  forged   messages handed over with an id or a body the server never stored (must be 0)
  dup      messages handed over twice (must be 0: nothing is killed here)
  quiet    the hostile run exited 0 with nothing on stderr (must not happen: never silent)
  slowest  the longest run, in seconds (every wait bounded: well under 60)

    .venv/bin/python scripts/hostile_trials.py [--only TEXT] [--json]

Exit status 0 only if nothing was lost, forged or repeated, no hostile run was quiet or hung, and every run
after the hostility ended exited 0. docs/reliability.md, "Hostile server and environment", quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.core import paths  # noqa: E402
from kijito_pull.sandbox import Sandbox  # noqa: E402
from tests.trickle import TricklingServer  # noqa: E402

TOKEN = "hostile-trials-token"
P = "argus"
WINDOW = 4
BURST = 9
HUNG = 60.0


@dataclass
class World:
    sb: Sandbox
    state_dir: Path
    url: str = ""
    sent: dict[int, str] = field(default_factory=dict)
    delivered: list[tuple[int, str]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": self.url or self.sb.url,
                "KIJITO_PULL_STATE_DIR": str(self.state_dir),
                "KIJITO_PULL_CONFIG": os.devnull,
                "PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}

    def send(self, n: int, tag: str) -> None:
        for i in range(n):
            content = f"{tag} {i} {len(self.sent)}"
            self.sent[self.sb.send(to=P, sender="river", content=content)] = content

    def once(self) -> tuple[int | None, str, float]:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "kijito_pull", "--once", "--json", "--persona", P,
                                 "--timeout", "1"], env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=HUNG)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
            code = None
        for line in out.splitlines():
            event = json.loads(line)
            if event.get("event") == "new":
                self.delivered.append((event["id"], event.get("content", "")))
        return code, err.strip(), time.monotonic() - started


def _journal(w: World) -> Path:
    state_file, _ = paths.cursor_paths(w.env(), w.sb.url, P, "agent")
    return state_file.with_name(state_file.name + ".journal")


def _forged_backward(w: World) -> dict:
    # A backward page that hands back the newest id with another body, and an older id: it contradicts
    # itself (ids at or above its before_id) and the newest page (issue 23, item 2).
    newest = max(w.sent)
    rows = [{"id": newest - BURST + 1, "from": "river", "content": "forged older", "created": "", "read": False},
            {"id": newest, "from": "mallory", "content": "forged body", "created": "", "read": False}]
    return {"kind": "body", "backward": True,
            "body": json.dumps({"result": rows, "truncated": True, "next_before_id": rows[0]["id"]})}


def _newest_page(w: World, *, last_id: int | None = None, persona: str | None = None) -> dict:
    """The newest window as the sandbox would send it (from the ledger), with its newest id replaced by
    `last_id`, or every row and the envelope labelled `persona` (rows the server says are another's)."""
    ids = sorted(w.sent)[-WINDOW:]
    rows = [{"id": i, "from": "river", "content": w.sent[i], "created": "", "read": False} for i in ids]
    if last_id is not None:
        rows[-1]["id"] = last_id
    envelope = {"result": rows, "truncated": True, "size_dropped": 0, "next_before_id": ids[0]}
    if persona is not None:
        rows = [{**r, "id": r["id"] + 1000, "content": f"{persona}'s mail", "persona": persona} for r in rows]
        envelope = {"result": rows, "persona": persona, "truncated": False, "next_before_id": None}
    return {"kind": "body", "backward": False, "times": 1, "body": json.dumps(envelope)}


#: name -> (switch on, switch off); each returns nothing and may use the world's sandbox or files.
Hostility = tuple[Callable[[World], None], Callable[[World], None]]


def _fault(rule: dict | Callable[[World], dict]) -> Hostility:
    return (lambda w: w.sb.add_fault(rule(w) if callable(rule) else rule), lambda w: w.sb.clear_faults())


def _slow_head() -> Hostility:
    servers: list[TricklingServer] = []

    def on(w: World) -> None:
        servers.append(TricklingServer(head=True))
        w.url = servers[-1].url

    def off(w: World) -> None:
        w.url = ""
        servers.pop().close()
    return on, off


def _fifo_journal() -> Hostility:
    return (lambda w: os.mkfifo(_journal(w), 0o600), lambda w: _journal(w).unlink())


def _state_dir_through_a_file() -> Hostility:
    def on(w: World) -> None:
        shutil.move(w.state_dir, w.state_dir.with_name("state-away"))
        w.state_dir.parent.joinpath("a-file").write_text("x")
        w.state_dir.symlink_to(w.state_dir.parent / "a-file")

    def off(w: World) -> None:
        w.state_dir.unlink()
        shutil.move(w.state_dir.with_name("state-away"), w.state_dir)
    return on, off


SCENARIOS: dict[str, Hostility] = {
    "1 id 2**63 on one newest page": _fault({"kind": "mutate", "rows": "id_overflow", "backward": False,
                                             "times": 1}),
    "1 id 10**20 on one newest page": _fault(lambda w: _newest_page(w, last_id=10**20)),
    "1 id 0 on every backward row": _fault({"kind": "mutate", "backward": True, "row_set": {"id": 0}}),
    "2 backward page contradicts the newest": _fault(_forged_backward),
    "3 one newest page of mallory's rows": _fault(lambda w: _newest_page(w, persona="mallory")),
    "3 every answer labelled mallory": _fault({"kind": "mutate", "set": {"persona": "mallory"},
                                                "row_set": {"persona": "mallory"}}),
    "4 a header byte every 0.2 s": _slow_head(),
    "5 the ack journal is a FIFO": _fifo_journal(),
    "6 the state dir is a link to a file": _state_dir_through_a_file(),
    "7 a gzip body": _fault({"kind": "body", "body": "{}", "headers": {"Content-Encoding": "gzip"}}),
}


def trial(name: str, hostility: Hostility) -> dict:
    on, off = hostility
    tmp = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        with Sandbox(token=TOKEN, window_limit=WINDOW).start() as sb:
            w = World(sb, tmp / "state")
            w.send(2, "before")
            codes = [w.once()[0]]
            w.send(BURST, "burst 0")
            on(w)
            code, err, seconds = w.once()
            off(w)
            slowest = seconds
            for burst in range(1, 4):
                w.send(BURST, f"burst {burst}")
                after, _, took = w.once()
                codes.append(after)
                slowest = max(slowest, took)
            ids = [i for i, _ in w.delivered]
            forged = [i for i, body in w.delivered if w.sent.get(i) != body]
            return {"scenario": name, "sent": len(w.sent), "lost": len(set(w.sent) - set(ids)),
                    "forged": len(forged), "duplicates": len(ids) - len(set(ids)),
                    "hostile_exit": code, "quiet": code == 0 and not err,
                    "after_exits_0": all(c == 0 for c in codes), "slowest_s": round(slowest, 1),
                    "says": err.splitlines()[0] if err else ""}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per scenario instead of a table")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the scenarios whose name contains TEXT (repeatable)")
    args = parser.parse_args()
    chosen = {n: h for n, h in SCENARIOS.items() if not args.only or any(t in n for t in args.only)}
    if not chosen:
        parser.error("no scenario matches --only")
    rows = [trial(name, hostility) for name, hostility in chosen.items()]
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(f"{'scenario':42} {'sent':>4} {'lost':>4} {'forged':>6} {'dup':>3} {'exit':>4} {'after':>5} "
              f"{'slowest':>7}  says")
        for r in rows:
            print(f"{r['scenario']:42} {r['sent']:>4} {r['lost']:>4} {r['forged']:>6} {r['duplicates']:>3} "
                  f"{r['hostile_exit']!s:>4} {'ok' if r['after_exits_0'] else 'FAIL':>5} {r['slowest_s']:>6}s  "
                  f"{r['says'][:150]}")
        print(f"total: {len(rows)} scenarios, {sum(r['sent'] for r in rows)} sent, "
              f"{sum(r['lost'] for r in rows)} lost, {sum(r['forged'] for r in rows)} forged, "
              f"{sum(r['quiet'] for r in rows)} quiet, {sum(r['hostile_exit'] is None for r in rows)} hung")
    bad = [r for r in rows if r["lost"] or r["forged"] or r["duplicates"] or r["quiet"] or r["hostile_exit"] is None
           or not r["after_exits_0"] or r["slowest_s"] >= HUNG]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
