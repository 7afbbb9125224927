"""`kijito-pull send --wait seen` against the real Claude Code's confirming path, offline.

Claude Code (`claude -p`, the pinned 2.1.197) runs with this repository as a plugin against the fake model;
the sandbox serves the mail. SessionStart hands river's mail over (pending with the session), the Stop
hook confirms it from the session's transcript, and with receipts on for river (`[personas.river]
mark_read = true`) the read flag is set only then. The sender is a real `kijito-pull send --wait seen`
process in the harness's network namespace. What a sender counts: the receipt comes within 2 s of the
confirmation; a recipient running without receipts is reported as such (with the confirmation it can see
here), not waited out; a hand-over killed before it was confirmed is never reported seen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kijito_pull.core import confirmations, journey
from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel
from tests.waiting import budget, until

pytestmark = pytest.mark.e2e

RECEIPT_BUDGET = 2.0  # seconds from the confirmation to the sender's exit


@pytest.fixture
def claude() -> h.Harness:
    return h.require_harness("claude")


def _start(sandbox, state: Path, tmp_path: Path, config: str, marker: str, timeout: float) \
        -> tuple[dict[str, str], Path, subprocess.Popen, int]:
    """River's hook environment with `config` as its config file, an opted-in project, and a running
    `kijito-pull send --wait seen --timeout TIMEOUT` of a mail marked `marker`, with the mail's id once posted."""
    (tmp_path / "config.toml").write_text(config)
    env = ch.hook_env(sandbox.url, state, KIJITO_PULL_CONFIG=str(tmp_path / "config.toml"))
    project = ch.make_project(tmp_path)
    argv = [str(ch.venv_bin() / "kijito-pull"), "send", "--to", ch.PERSONA, "--from", "loom", "--wait", "seen",
            "--timeout", str(timeout), "--json", f"{marker}: please look"]
    sender = subprocess.Popen(h.netns().wrap(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    return env, project, sender, _posted(sandbox, marker)


def _posted(sandbox, marker: str, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [m["id"] for m in sandbox.messages(ch.PERSONA) if marker in m["content"]]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"{marker} was never sent")


def _finish(sender: subprocess.Popen, timeout: float) -> tuple[int, dict, str]:
    """The sender's exit status, its JSON and its stderr."""
    out, err = sender.communicate(timeout=timeout)
    return sender.returncode, json.loads(out), err


def _watch_exit(sender: subprocess.Popen) -> dict[str, float]:
    ended: dict[str, float] = {}

    def watch() -> None:
        sender.wait()
        ended["at"] = time.time()

    threading.Thread(target=watch, daemon=True).start()
    return ended


def _cursor_file(state: Path) -> Path:
    [path] = (state / "cursors").glob("*.json")
    return path


def test_send_wait_seen_returns_within_2s_of_the_confirmation_by_claude_p(
    claude: h.Harness, netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    env, project, sender, ident = _start(sandbox, state, tmp_path, "[personas.river]\nmark_read = true\n",
                                         "RECEIPT-MAIL", timeout=90)
    ended = _watch_exit(sender)
    with FakeModel(lambda r: "ok", bind=netns.listen) as fm:
        result = h.run_claude_p(claude, "summarize the task", base_url=fm.url, home=e2e_home, cwd=project,
                                plugin_dirs=[ch.PLUGIN], env=env, timeout=90)
        assert result.returncode == 0, result.stderr[-3000:]
        assert any("RECEIPT-MAIL" in fm.text_of(r) for r in fm.model_requests)  # the model had it
    code, sent, err = _finish(sender, timeout=30)
    assert code == 0, (sent, err)
    assert sent["id"] == ident and sent["result"] == "seen" and sent["journey"]["state"] == "seen"
    [confirmed] = confirmations.read(_cursor_file(state), ids=[ident])
    assert confirmed.holder.startswith("claude:")
    assert until(lambda: "at" in ended, 5), "the exit watcher never saw the sender end"  # it may run after _finish
    assert 0 <= ended["at"] - confirmed.at <= budget(RECEIPT_BUDGET), (ended["at"] - confirmed.at, sent["states"])
    # track, afterwards: read at Kijito, confirmed here by the session's record, with its time.
    track = ch.kp(env, project, "track", str(ident), "--persona", ch.PERSONA, "--json", timeout=30)
    steps = json.loads(track.stdout)["steps"]
    local = next(s for s in steps if s["where"] == journey.LOCAL)
    assert local["state"] == "confirmed" and local["harness"] == "claude" and local["at"]


def test_a_recipient_running_without_receipts_is_reported_with_what_is_known(
    claude: h.Harness, netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    env, project, sender, ident = _start(sandbox, state, tmp_path, "", "NO-RECEIPT-MAIL",  # receipts off for river
                                         timeout=120)
    with FakeModel(lambda r: "ok", bind=netns.listen) as fm:
        result = h.run_claude_p(claude, "summarize the task", base_url=fm.url, home=e2e_home, cwd=project,
                                plugin_dirs=[ch.PLUGIN], env=env, timeout=90)
        assert result.returncode == 0, result.stderr[-3000:]
    started = time.monotonic()
    code, sent, err = _finish(sender, timeout=60)
    assert code == 1, err
    assert time.monotonic() - started < 30  # said when river's cursor appeared here, not at the 120 s
    assert sent["result"] == "no_receipts" and sent["seen"] is False
    assert sent["journey"]["receipts"]["emitted"] is False
    states = {s["where"]: s["state"] for s in sent["journey"]["steps"]}
    assert states[journey.KIJITO] == "unread"
    assert states[journey.LOCAL] in ("handed_over", "confirmed")  # what this machine saw of the session
    assert next(m for m in sandbox.messages(ch.PERSONA) if m["id"] == ident)["read"] is False


def test_a_hand_over_killed_before_confirmation_is_never_reported_seen(
    claude: h.Harness, netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    env, project, sender, ident = _start(sandbox, state, tmp_path, "[personas.river]\nmark_read = true\n",
                                         "KILLED-MAIL", timeout=25)
    release = threading.Event()

    def reply(request: dict) -> str:
        if "KILLED-MAIL" in FakeModel.text_of(request):
            release.wait(60)  # the model "thinks" until the run is killed: the Stop hook never runs
        return "ok"

    with FakeModel(reply, bind=netns.listen) as fm:
        full_env = h.claude_env(e2e_home, fm.url, env)
        proc = h.HarnessProcess(h.netns().wrap(h.claude_argv(claude, "-p", "summarize the task",
                                                             plugin_dirs=[ch.PLUGIN])),
                                env=full_env, cwd=project, stdin_pipe=False, name="claude-p")
        try:
            assert fm.wait_for(lambda r: "KILLED-MAIL" in fm.text_of(r), timeout=60), proc.diagnostics()
            # The whole session dies at once (kill -9: no SessionEnd hook) while the model has the request:
            # handed over, and never confirmed by the session's record.
            os.killpg(proc.proc.pid, signal.SIGKILL)
        finally:
            release.set()
            proc.kill()
        code, sent, err = _finish(sender, timeout=60)
    assert code == 1, (sent, err)
    assert sent["result"] == "timeout" and sent["seen"] is False
    assert sent["journey"]["state"] == "handed_over"
    local = next(s for s in sent["journey"]["steps"] if s["where"] == journey.LOCAL)
    assert local["holder"].startswith("claude:") and local["harness"] == "claude"
    assert next(m for m in sandbox.messages(ch.PERSONA) if m["id"] == ident)["read"] is False
    assert "seen" not in [s["state"] for s in sent["states"]]
    assert local["holder_alive"] is False and "process is gone" in local["detail"]
