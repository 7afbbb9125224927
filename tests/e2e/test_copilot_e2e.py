"""kijito-pull's Copilot CLI hooks inside the real Copilot CLI, offline.

Copilot CLI (the version `scripts/install-harnesses` pins) runs headless (`copilot -p`) against the fake
model's OpenAI chat completions on loopback; the Kijito sandbox serves the mail; the hooks are installed
with `kijito-pull install copilot --user`, as a user would. The proof is the mail text inside the model
requests, Copilot's own session record, and the cursor's record (pending with the session while it runs,
nothing pending and nothing unseen after).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import codex_helpers as cx
from tests.e2e import copilot_helpers as cp
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel, ToolUse
from tests.waiting import budget

pytestmark = pytest.mark.e2e


@pytest.fixture
def copilot_harness() -> h.Harness:
    return h.require_harness("copilot")


@pytest.fixture
def env(copilot_harness, fake_model, sandbox, state, e2e_home) -> dict[str, str]:
    return cp.copilot_env(copilot_harness, e2e_home, fake_model.url, sandbox.url, state)


@pytest.fixture
def project(env, tmp_path) -> Path:
    folder = ch.make_project(tmp_path)
    done = ch.kp(env, folder, "install", "copilot", "--user")
    assert done.returncode == 0, done.stderr + done.stdout
    return folder


def _handed_times(fm: FakeModel, needle: str) -> int:
    return fm.text_of(cp.model_requests(fm)[-1]).count(needle)


def test_headless_gets_waiting_mail_at_session_start_once_confirmed_from_the_record(
        copilot_harness, fake_model, sandbox, env, project, e2e_home) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    during: list[list[dict]] = []

    def reply(request: dict) -> str:
        if not during:
            during.append(cx.pending(env, project))
        return "ok"

    fake_model.reply = reply
    run = cp.run_p(copilot_harness, env, project, "summarize the task")
    assert run.returncode == 0, run.stderr[-3000:]
    first = cp.model_requests(fake_model)[0]
    assert "MAIL-WAITING: the deploy key rotated" in fake_model.text_of(first), "not in the first request"
    assert _handed_times(fake_model, "MAIL-WAITING") == 1
    [held] = during[0]
    assert held["holder"].startswith("copilot:"), held
    assert any("kijito-ref:" in p.read_text() for p in cp.records(e2e_home))
    assert cx.pending(env, project) == []
    assert "MAIL-WAITING" not in ch.unseen(env, project)


def test_headless_gets_mail_sent_mid_run_at_stop_once(copilot_harness, fake_model, sandbox, env, project) -> None:
    sent: list[int] = []

    def reply(request: dict) -> str:
        if request["path"].endswith(cp.MODEL_PATH) and not sent:
            sent.append(sandbox.send(ch.PERSONA, "loom", "MAIL-MIDRUN: build is red, stop pushing"))
        return "ok"

    fake_model.reply = reply
    run = cp.run_p(copilot_harness, env, project, "work on the task")
    assert run.returncode == 0, run.stderr[-3000:]
    turns = cp.model_requests(fake_model)
    assert len(turns) == 2, [fake_model.text_of(t)[-300:] for t in turns]
    assert "MAIL-MIDRUN" not in fake_model.text_of(turns[0])
    last = turns[1]["body"]["messages"][-1]
    assert last["role"] == "user" and "MAIL-MIDRUN: build is red" in str(last["content"]), last
    assert _handed_times(fake_model, "MAIL-MIDRUN") == 1
    assert cx.pending(env, project) == []
    assert "MAIL-MIDRUN" not in ch.unseen(env, project)


def test_not_opted_in_sends_nothing_to_kijito(copilot_harness, fake_model, sandbox, env, project, tmp_path) -> None:
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOT-HERE")
    before = len(sandbox.requests)
    run = cp.run_p(copilot_harness, env, plain, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert cp.model_requests(fake_model), "copilot never asked the model"
    assert len(sandbox.requests) == before, sandbox.requests[before:]
    assert not any("MAIL-NOT-HERE" in fake_model.text_of(r) for r in fake_model.model_requests)


def test_install_uninstall_leave_the_users_hooks_as_they_were(
        copilot_harness, fake_model, sandbox, env, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    hooks = e2e_home / ".copilot" / "hooks"
    hooks.mkdir(parents=True)
    mine = b'{"version": 1, "hooks": {"sessionEnd": [{"type": "command", "bash": "true"}]}}\n'
    (hooks / "mine.json").write_bytes(mine)
    dry = ch.kp(env, project, "install", "copilot", "--user", "--dry-run")
    assert dry.returncode == 0 and "hook copilot-stop" in dry.stdout and not (hooks / "kijito-pull.json").exists()
    assert ch.kp(env, project, "install", "copilot", "--user").returncode == 0
    sandbox.send(ch.PERSONA, "loom", "MAIL-AFTER-INSTALL")
    run = cp.run_p(copilot_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert any("MAIL-AFTER-INSTALL" in fake_model.text_of(r) for r in cp.model_requests(fake_model))
    done = ch.kp(env, project, "uninstall", "copilot", "--user")
    assert done.returncode == 0 and "removed" in done.stdout, done.stdout
    assert sorted(p.name for p in hooks.iterdir()) == ["mine.json"] and (hooks / "mine.json").read_bytes() == mine


def test_tui_session_is_woken_by_new_mail_within_2s_and_a_busy_one_gets_it_at_the_next_model_call(
        copilot_harness, fake_model, sandbox, env, project, state, e2e_home) -> None:
    push = ch.doctor(env, project)["copilot.push"]
    assert push["verdict"] == "warn" and "--experimental" in push["fix"], push
    tui = cp.start_tui(copilot_harness, env, project)
    try:
        tui.type("hello")
        assert fake_model.wait_for(lambda r: "hello" in fake_model.text_of(r), timeout=40), tui.capture()
        assert ch.wait_until(lambda: ch.hook_pids(state, "copilot-watch"), 20, step=0.2), tui.capture()
        settings = json.loads((e2e_home / ".copilot" / "settings.json").read_text())
        assert settings.get("experimental") is True  # Copilot kept it, not kijito-pull
        push = ch.doctor(env, project)["copilot.push"]
        assert push["verdict"] == "ok" and "push available" in push["detail"], push
        time.sleep(2)  # the first turn is over: the session is idle
        start = len(fake_model.requests)
        sent = time.monotonic()
        sandbox.send(ch.PERSONA, "loom", "MAIL-IDLE-WAKE: the release is frozen")
        woke = fake_model.wait_for_text("MAIL-IDLE-WAKE", timeout=20, start=start)
        took = time.monotonic() - sent
        assert woke is not None, tui.capture()
        assert took <= budget(2.0), f"the idle session was woken after {took:.2f} s"
        assert fake_model.text_of(woke).count("MAIL-IDLE-WAKE: the release is frozen") == 1
        # busy: mail sent while the model is answering the turn's first call reaches its second call (after a
        # tool call), inside the same turn (`inbox interrupt: all` -> session.send mode "immediate")
        time.sleep(2)
        during: list[int] = []

        def slow(request: dict) -> object:
            if "turn-busy" in fake_model.text_of(request) and not during:
                during.append(sandbox.send(ch.PERSONA, "loom", "MAIL-BUSY: CI is green again"))
                time.sleep(4)
                return ToolUse("kijito_e2e_no_such_tool", {})  # the turn goes on: one more model call
            return "ok"

        fake_model.reply = slow
        start = len(fake_model.requests)
        tui.type("turn-busy")
        busy = fake_model.wait_for_text("MAIL-BUSY", timeout=40, start=start)
        assert during and busy is not None, tui.capture()
        turn = [r for r in fake_model.requests[start:] if r["path"].endswith(cp.MODEL_PATH)]
        assert "turn-busy" in fake_model.text_of(turn[0]) and "MAIL-BUSY" not in fake_model.text_of(turn[0])
        assert turn[1] is busy, "the mail did not reach the turn's next model call"
        assert any(m.get("role") == "tool" for m in busy["body"]["messages"]), "not the call after the tool call"
        assert fake_model.text_of(busy).count("MAIL-BUSY: CI is green again") == 1
        # both confirmed from the session's events.jsonl: nothing pending, nothing unseen, each shown once
        assert ch.wait_until(lambda: not cx.pending(env, project), 30, step=0.5), cx.pending(env, project)
        assert "MAIL-" not in ch.unseen(env, project)
        [record] = cp.records(e2e_home)
        users = [json.loads(line)["data"].get("content", "") for line in record.read_text().splitlines()
                 if json.loads(line).get("type") == "user.message"]
        assert sum("MAIL-IDLE-WAKE" in u for u in users) == 1 and sum("MAIL-BUSY" in u for u in users) == 1, users
        assert not any(ch.TOKEN in fake_model.text_of(r) for r in fake_model.model_requests)
    finally:
        tui.kill()


def test_project_hooks_need_trust_which_install_records_only_with_trust_and_uninstall_gives_back(
        copilot_harness, fake_model, sandbox, env, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path / "repo")
    done = ch.kp(env, project, "install", "copilot", "--project")
    assert done.returncode == 0 and "--trust" in done.stdout, done.stdout
    assert ch.doctor(env, project)["copilot.trust"]["verdict"] == "fail"
    sandbox.send(ch.PERSONA, "loom", "MAIL-NEEDS-TRUST")
    run = cp.run_p(copilot_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert not any("MAIL-NEEDS-TRUST" in fake_model.text_of(r) for r in cp.model_requests(fake_model)), \
        "Copilot ran a repository's hooks in an untrusted folder"
    config = e2e_home / ".copilot" / "config.json"
    before = config.read_bytes()  # Copilot's own, with its `//` comment lines
    assert before.startswith(b"//"), before[:200]
    dry = ch.kp(env, project, "install", "copilot", "--project", "--trust", "--dry-run")
    assert dry.returncode == 0 and f"+++ {config}" in dry.stdout and config.read_bytes() == before, dry.stdout
    done = ch.kp(env, project, "install", "copilot", "--project", "--trust")
    assert done.returncode == 0 and "now trusts" in done.stdout, done.stdout + done.stderr
    after = config.read_bytes()
    head = before[:before.index(b"{")]
    assert after.startswith(head) and json.loads(after[len(head):])["trustedFolders"] == [str(project)]
    assert ch.doctor(env, project)["copilot.trust"]["verdict"] == "ok"
    gone = ch.kp(env, project, "uninstall", "copilot", "--project")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert config.read_bytes() == before and not (project / ".github").exists()
    assert ch.kp(env, project, "install", "copilot", "--project", "--trust").returncode == 0
    fake_model.clear()
    run = cp.run_p(copilot_harness, env, project, "hello again")
    assert run.returncode == 0, run.stderr[-3000:]
    assert any("MAIL-NEEDS-TRUST" in fake_model.text_of(r) for r in cp.model_requests(fake_model))
