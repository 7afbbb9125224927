"""kijito-pull's Codex hooks inside the real Codex CLI, offline.

Codex (the version `scripts/install-harnesses` pins) runs against the fake model's Responses API on
loopback; the Kijito sandbox serves the mail; the hooks are installed and trusted with `kijito-pull
install codex --user --trust`, as a user would. The proof is always the mail text inside the model
requests the fake model logged, and the cursor's own record (`status --json`: nothing left pending, so
the rollout confirmed every hand-over).
"""

from __future__ import annotations

import time

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import codex_helpers as cx
from tests.e2e.fakemodel import FakeModel
from tests.waiting import budget

pytestmark = pytest.mark.e2e

IDLE_WAKE_BUDGET = 10.0  # seconds from the send to a model request holding the mail (issue 13)


@pytest.fixture
def setup(codex_harness, fake_model, sandbox, state, e2e_home, tmp_path):
    """An opted-in project, Codex's config pointing at the fake model, kijito-pull's hooks installed and
    trusted for the user."""
    project = ch.make_project(tmp_path)
    cx.write_config(e2e_home, fake_model.url)
    env = cx.codex_env(codex_harness, e2e_home, sandbox.url, state)
    done = ch.kp(env, project, "install", "codex", "--user", "--trust")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "Codex trusts kijito-pull's 3 hooks" in done.stdout, done.stdout
    return project, env


def _mail_requests(fm: FakeModel, needle: str) -> list[dict]:
    return [r for r in fm.model_requests if needle in fm.text_of(r)]


def _handed_times(fm: FakeModel, needle: str) -> int:
    """How many times the mail was handed over, as the last request's conversation shows it."""
    last = fm.model_requests[-1]
    return fm.text_of(last).count(needle)


# -- codex exec ------------------------------------------------------------------------------------------------


def test_exec_gets_waiting_mail_at_session_start_once(codex_harness, fake_model, sandbox, setup) -> None:
    project, env = setup
    sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    run = cx.run_exec(codex_harness, env, project, "summarize the task")
    assert run.returncode == 0, run.stderr[-3000:]
    first = fake_model.model_requests[0]
    assert "MAIL-WAITING: the deploy key rotated" in fake_model.text_of(first), "not in the first request"
    assert _handed_times(fake_model, "MAIL-WAITING") == 1
    assert cx.pending(env, project) == []  # the Stop hook found it in the rollout: confirmed
    assert "MAIL-WAITING" not in ch.unseen(env, project)
    again = cx.run_exec(codex_harness, env, project, "next task")
    assert again.returncode == 0
    assert "MAIL-WAITING" not in fake_model.text_of(fake_model.model_requests[-1])


def test_exec_gets_mail_sent_mid_run_at_stop_once(codex_harness, fake_model, sandbox, setup) -> None:
    project, env = setup
    sent: list[int] = []

    def reply(request: dict) -> str:
        if not sent:
            sent.append(sandbox.send(ch.PERSONA, "loom", "MAIL-MIDRUN: build is red, stop pushing"))
        return "ok"

    fake_model.reply = reply
    run = cx.run_exec(codex_harness, env, project, "work on the task")
    assert run.returncode == 0, run.stderr[-3000:]
    holding = _mail_requests(fake_model, "MAIL-MIDRUN")
    assert holding, "the Stop hook never handed the mail over"
    assert "<hook_prompt" in fake_model.text_of(holding[0])  # Codex's wrapper of a Stop-block reason
    assert _handed_times(fake_model, "MAIL-MIDRUN") == 1
    assert "Stop Blocked" in run.stderr or "Stop" in run.stderr
    assert cx.pending(env, project) == []  # the second Stop confirmed it from the rollout
    assert "MAIL-MIDRUN" not in ch.unseen(env, project)


def test_not_opted_in_sends_nothing_to_kijito(codex_harness, fake_model, sandbox, setup, tmp_path) -> None:
    _, env = setup
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOT-HERE")
    before = len(sandbox.requests)
    run = cx.run_exec(codex_harness, env, plain, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert fake_model.model_requests, "codex never asked the model"
    assert len(sandbox.requests) == before, sandbox.requests[before:]
    assert not _mail_requests(fake_model, "MAIL-NOT-HERE")


# -- install, uninstall, trust -----------------------------------------------------------------------------


def test_install_uninstall_round_trip_is_byte_exact_and_trust_is_explicit(
        codex_harness, fake_model, sandbox, state, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    cx.write_config(e2e_home, fake_model.url)
    env = cx.codex_env(codex_harness, e2e_home, sandbox.url, state)
    hooks = cx.hooks_file(e2e_home)
    mine = '{\n  "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo {}"}]}]}\n}\n'
    hooks.write_text(mine)
    config_before = (e2e_home / ".codex" / "config.toml").read_bytes()

    done = ch.kp(env, project, "install", "codex", "--user")
    assert done.returncode == 0, done.stderr
    assert "not trusted (Codex skips untrusted hooks without a word)" in done.stdout, done.stdout
    assert (e2e_home / ".codex" / "config.toml").read_bytes() == config_before  # trust only when asked
    found = ch.doctor(env, project)["codex.trust"]
    assert found["verdict"] == "fail" and "--trust" in found["fix"], found

    # Untrusted hooks are skipped by Codex: mail waits.
    sandbox.send(ch.PERSONA, "loom", "MAIL-UNTRUSTED")
    assert cx.run_exec(codex_harness, env, project, "hello").returncode == 0
    assert not _mail_requests(fake_model, "MAIL-UNTRUSTED")

    done = ch.kp(env, project, "install", "codex", "--user", "--trust")
    assert done.returncode == 0 and "Codex trusts kijito-pull's 3 hooks" in done.stdout, done.stdout
    assert ch.doctor(env, project)["codex.trust"]["verdict"] == "ok"
    assert cx.run_exec(codex_harness, env, project, "hello").returncode == 0
    assert _mail_requests(fake_model, "MAIL-UNTRUSTED"), "trusted hooks did not hand the mail over"

    # Re-installing with another command modifies the hooks: Codex would skip them; install and doctor say so.
    moved = tmp_path / "moved" / "kijito-pull"
    moved.parent.mkdir()
    moved.symlink_to(ch.venv_bin() / "kijito-pull")
    done = ch.kp(env, project, "install", "codex", "--user", "--command", str(moved))
    assert done.returncode == 0 and "changed since you trusted" in done.stdout, done.stdout
    found = ch.doctor(env, project)["codex.trust"]
    assert found["verdict"] == "fail" and "changed since you trusted" in found["detail"], found
    done = ch.kp(env, project, "install", "codex", "--user", "--command", str(moved), "--trust")
    assert done.returncode == 0 and "Codex trusts kijito-pull's 3 hooks" in done.stdout, done.stdout
    assert ch.doctor(env, project)["codex.trust"]["verdict"] == "ok"
    # ...and an unchanged re-install keeps the trust.
    done = ch.kp(env, project, "install", "codex", "--user", "--command", str(moved))
    assert done.returncode == 0 and "already" in done.stdout and "trust" not in done.stdout.replace(
        "Codex trusts", ""), done.stdout

    done = ch.kp(env, project, "uninstall", "codex", "--user")
    assert done.returncode == 0, done.stderr
    assert hooks.read_text() == mine


def test_project_hooks_in_an_untrusted_project_fail_doctor_until_trusted(
        codex_harness, fake_model, sandbox, state, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    cx.write_config(e2e_home, fake_model.url)
    env = cx.codex_env(codex_harness, e2e_home, sandbox.url, state)
    done = ch.kp(env, project, "install", "codex", "--project", "--trust")
    assert done.returncode == 0, done.stderr
    assert "the project" in done.stdout and "is not trusted" in done.stdout, done.stdout
    found = ch.doctor(env, project)["codex.trust"]
    assert found["verdict"] == "fail" and "--trust-project" in found["fix"], found
    done = ch.kp(env, project, "install", "codex", "--project", "--trust-project", "--trust")
    assert done.returncode == 0 and "Codex trusts kijito-pull's 3 hooks" in done.stdout, done.stdout
    assert ch.doctor(env, project)["codex.trust"]["verdict"] == "ok"
    sandbox.send(ch.PERSONA, "loom", "MAIL-PROJECT-HOOKS")
    assert cx.run_exec(codex_harness, env, project, "hello").returncode == 0
    assert _mail_requests(fake_model, "MAIL-PROJECT-HOOKS")


# -- the interactive TUI: idle wake through `codex queue` ---------------------------------------------------


@pytest.mark.parametrize("daemon", [True, False], ids=["daemon", "no-daemon"])
def test_idle_tui_is_woken_by_new_mail_once_and_nothing_is_left_running(
        codex_harness, fake_model, sandbox, state, e2e_home, tmp_path, daemon) -> None:
    project = ch.make_project(tmp_path)
    cx.write_config(e2e_home, fake_model.url, trusted_projects=(project,))
    env = cx.codex_env(codex_harness, e2e_home, sandbox.url, state)
    assert ch.kp(env, project, "install", "codex", "--user", "--trust").returncode == 0
    with cx.start_tui(codex_harness, env, project, fake_model, daemon=daemon) as tui:
        try:
            assert ch.wait_until(lambda: len(cx.watchers(state)) == 1, 15), "no watcher armed"
            time.sleep(1.0)  # the first turn ends; the session is idle
            start = len(fake_model.requests)
            sent_at = time.time()
            sandbox.send(ch.PERSONA, "loom", "MAIL-IDLE-WAKE: review PR 7")
            # Waits past the bound as stretched now, so that a wake later than it is seen and fails the bound
            # (with a fixed 20 s wait, a load of 2 per core stretched the bound to the wait: it could not fail).
            got = fake_model.wait_for_text("MAIL-IDLE-WAKE", timeout=budget(IDLE_WAKE_BUDGET) + 10, start=start)
            assert got is not None, cx.watch_logs(state) + tui.capture()
            took = got["time"] - sent_at
            assert took <= budget(IDLE_WAKE_BUDGET), f"woken {took:.1f} s after the send"
            assert ch.wait_until(lambda: cx.pending(env, project) == [], 15), cx.pending(env, project)
            time.sleep(1.0)
            assert _handed_times(fake_model, "MAIL-IDLE-WAKE") == 1
            assert len(cx.watchers(state)) == 1
        finally:
            if daemon:
                cx.daemon_stop(codex_harness, env)
        if not daemon:
            tui.send_keys("C-c")
            time.sleep(0.3)
            tui.send_keys("C-c")
        # The session's Codex process is gone: its watcher ends by itself, before any sweep.
        assert ch.wait_until(lambda: not cx.watchers(state), 15), cx.watchers(state)
