"""Every entry point on one persona and consumer at once while mail keeps arriving (issue 6, item 4).

`scripts/concurrency_all.py --seconds 15`: watch, the pi child (acknowledged by a thread), both Claude
hooks and both Codex hooks called again and again, and waves of 16 concurrent `--once` runs, all on one
cursor, with a sender thread. Every message is delivered exactly once overall, no lock is left behind
and every process exits (0) within its bound. The script runs a minute of traffic by default
(docs/reliability.md).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

from tests.clirunner import REPO
from tests.entrypoints import HOOKS


def test_every_entry_point_at_once_delivers_each_message_exactly_once(tmp_path):
    seed = secrets.randbelow(2**31)
    cmd = [sys.executable, str(REPO / "scripts" / "concurrency_all.py"), "--seconds", "15", "--json",
           "--seed", str(seed), "--workdir", str(tmp_path / "work")]
    # About 20 s; the timeout is the deadlock guard (each process also has its own bound in the script).
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary (exit {proc.returncode}); stderr:\n{proc.stderr[-3000:]}"
    s = json.loads(lines[-1])
    context = f"seed={seed}: {json.dumps(s)}"
    assert s["problems"] == [], context
    assert s["lost"] == 0 and s["duplicated"] == 0, context
    assert s["delivered"] == s["sent"] > 100, context
    assert s["lock"] == "free", context
    # Contention really happened: every kind of consumer ran, and mail went out through several of them.
    runs = s["runs"]
    assert runs["once"] >= 16, context
    assert all(runs[hook] >= 2 for hook in HOOKS), context
    by = s["delivered_by"]
    assert by["watch"] > 0 and by["pi-child"] > 0 and by["once"] > 0, context
    assert s["self_echo_sent"] > 0, context
    assert proc.returncode == 0, context
