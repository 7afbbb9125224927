"""kill -9 at random moments of watch, the pi child and the hooks (issue 6, item 2, beyond --once).

`scripts/crash_entries.py` (tests/test_reliability.py runs scripts/crash_trials.py for `--once`): about
50 SIGKILLs each of watch (half with --events-file, where a kill can land between the line's fsync and
the state rename), the pi child, `hook claude-stop` and `hook claude-session-start`, and 15 each of the
two Codex hooks, in two concurrent runs of the script. Nothing may be lost; watch and the pi child repeat
at most one message per kill; a hook repeats at most its one batch per kill; unkilled runs exit 0 and the
lock is free at the end.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest

from tests.clirunner import REPO
from tests.entrypoints import CODEX_HOOKS, HOOKS, PI_CHILD, SESSION_START, STOP, WATCH

MAIN = {WATCH: 50, PI_CHILD: 50, STOP: 50, SESSION_START: 50}
CODEX = dict.fromkeys(CODEX_HOOKS, 15)


def _start(entries: dict[str, int], seed: int, workdir) -> subprocess.Popen:
    kills = set(entries.values())
    assert len(kills) == 1
    cmd = [sys.executable, str(REPO / "scripts" / "crash_entries.py"), "--json", "--seed", str(seed),
           "--kills", str(kills.pop()), "--max-batch", "20", "--big-batch", "50", "--workdir", str(workdir)]
    for entry in entries:
        cmd += ["--entry", entry]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_kill_9_of_watch_pi_child_and_hooks_loses_nothing(tmp_path):
    seed = secrets.randbelow(2**31)
    procs = [_start(MAIN, seed, tmp_path / "main"), _start(CODEX, seed + 100, tmp_path / "codex")]
    summaries = []
    for proc in procs:
        # About 2 minutes on 2 loaded cores; the timeout is a deadlock guard, not a performance bound.
        out, err = proc.communicate(timeout=400)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        assert lines, f"no summary (exit {proc.returncode}); stderr:\n{err[-3000:]}"
        summaries.append((proc, json.loads(lines[-1])))
    by_entry = {s["entry"]: s for _, total in summaries for s in total["entries"]}
    context = f"seed={seed}: {json.dumps(by_entry)}"
    for proc, total in summaries:
        assert total["problems"] == [], context
        assert proc.returncode == 0, context
    assert set(by_entry) == set(MAIN) | set(CODEX), context
    for entry, s in by_entry.items():
        assert s["lost"] == 0 and s["delivered"] == s["sent"], (entry, context)
        assert s["kills"] >= {**MAIN, **CODEX}[entry], (entry, context)
        if entry in HOOKS:
            assert s["kills_that_caused_duplicates"] <= s["kills"], (entry, context)
        else:
            assert s["max_dup_per_kill"] <= 1 and s["duplicates"] <= s["kills"], (entry, context)
            # The kills must really have landed between deliveries, or the zeros above prove little. (A
            # hook writes once and exits within milliseconds, so few of its kills can land after output.)
            assert s["killed_during_delivery"] >= 3, (entry, context)
        assert s["backward_pages"] > 0 and s["self_echo_sent"] > 0, (entry, context)
    assert sum(s["kills"] for s in by_entry.values()) >= 200, context
    assert by_entry[WATCH]["watch_kills_by_mode"]["events-file"] >= 20, context
    assert by_entry[WATCH]["sent_while_running"] > 0 and by_entry[PI_CHILD]["sent_while_running"] > 0, context
