"""`claude -p --bare` runs no hooks and binds no inbox socket: `kijito-pull exec` still gets it its mail.

The real Claude Code 2.1.332 with `--bare`, offline against the fake model, started by
`kijito-pull exec -- claude -p --bare PROMPT` (both inside the loopback-only namespace, with the
Kijito sandbox there too). The proof is the mail in the model request, and the cursor afterwards.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel

pytestmark = pytest.mark.e2e


def _exec(harness: h.Harness, fm: FakeModel, sandbox, state: Path, home: Path, project: Path, *args: str,
          prompt: str = "fix the build") -> subprocess.CompletedProcess:
    env = h.claude_env(home, fm.url, ch.hook_env(sandbox.url, state))
    argv = h.netns().wrap([str(ch.venv_bin() / "kijito-pull"), "exec", *args, "--",
                           *harness.cmd("-p", "--bare", prompt)])
    return subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True, timeout=90)


def _cursor(state: Path) -> dict:
    [path] = (state / "cursors").glob("*.json")
    return json.loads(path.read_text())


def test_bare_claude_p_gets_waiting_mail_through_exec_and_it_is_acknowledged_once(
    netns: h.NetNS, sandbox, tmp_path: Path, e2e_home: Path
) -> None:
    harness = h.require_harness("claude2")
    project = ch.make_project(tmp_path)
    state = tmp_path / "kijito-state"
    sandbox.send(ch.PERSONA, "loom", "EXEC-WAITING: the deploy key rotated")
    late: list[int] = []
    armed = threading.Event()

    def reply(request: dict) -> str:
        if armed.is_set() and "fix the build" in FakeModel.text_of(request) and not late:
            late.append(sandbox.send(ch.PERSONA, "loom", "EXEC-LATE: arrived during the run"))
        return "ok"

    with FakeModel(reply, bind=netns.listen) as fm:
        # Without exec, a --bare run sees nothing: no hooks, not even the plugin's.
        plain = h.run_claude_p(harness, "fix the build", base_url=fm.url, home=e2e_home, cwd=project,
                               plugin_dirs=[ch.PLUGIN], extra_args=["--bare"], env=ch.hook_env(sandbox.url, state))
        assert plain.returncode == 0 and not any("EXEC-WAITING" in fm.text_of(r) for r in fm.model_requests)
        armed.set()
        first = len(fm.requests)
        result = _exec(harness, fm, sandbox, state, e2e_home, project)
        assert result.returncode == 0, result.stderr[-2000:]
        convo = [r for r in fm.model_requests if r["index"] >= first and "fix the build" in fm.text_of(r)]
    assert convo, result.stderr
    text = fm.text_of(convo[0])
    assert text.count("EXEC-WAITING") == 1 and "kijito-ref:" in text and "data written by other agents" in text
    assert "EXEC-LATE" not in text
    cursor = _cursor(state)
    assert not cursor.get("pending"), cursor
    assert "arrived during the run" in result.stderr and str(late[0]) in result.stderr  # checked again after
    # The next run gets the late mail, and not the first one again.
    with FakeModel("ok", bind=netns.listen) as fm2:
        again = _exec(harness, fm2, sandbox, state, e2e_home, project, prompt="next step")
        assert again.returncode == 0, again.stderr[-2000:]
        text2 = "\n".join(fm2.text_of(r) for r in fm2.model_requests)
    assert "EXEC-LATE" in text2 and "EXEC-WAITING" not in text2


def test_a_failed_run_leaves_the_mail_unseen(netns: h.NetNS, sandbox, tmp_path: Path, e2e_home: Path) -> None:
    harness = h.require_harness("claude2")
    project = ch.make_project(tmp_path)
    state = tmp_path / "kijito-state"
    sandbox.send(ch.PERSONA, "loom", "EXEC-BEFORE: establishes the cursor")
    with FakeModel("ok", bind=netns.listen) as fm:
        assert _exec(harness, fm, sandbox, state, e2e_home, project).returncode == 0
    sandbox.send(ch.PERSONA, "loom", "EXEC-RETRY: must not be lost")
    # A run that fails (here a command that exits 1 after reading its input) acknowledges nothing.
    env = h.claude_env(e2e_home, "http://127.0.0.1:9", ch.hook_env(sandbox.url, state))
    argv = h.netns().wrap([str(ch.venv_bin() / "kijito-pull"), "exec", "--", "sh", "-c", "cat >/dev/null; exit 1"])
    failed = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True, timeout=60)
    assert failed.returncode != 0
    assert "unseen again" in failed.stderr, failed.stderr[-2000:]
    held = _cursor(state).get("pending", {})
    assert all(entry["holder"] is None for entry in held.values()), held  # released: unseen again
    with FakeModel("ok", bind=netns.listen) as fm:
        assert _exec(harness, fm, sandbox, state, e2e_home, project).returncode == 0
        assert any("EXEC-RETRY" in fm.text_of(r) for r in fm.model_requests)
