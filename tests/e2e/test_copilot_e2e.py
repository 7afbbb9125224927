"""kijito-pull's Copilot CLI hooks inside the real Copilot CLI, offline.

Copilot CLI (the version `scripts/install-harnesses` pins) runs headless (`copilot -p`) against the fake
model's OpenAI chat completions on loopback; the Kijito sandbox serves the mail; the hooks are installed
with `kijito-pull install copilot --user`, as a user would. The proof is the mail text inside the model
requests, Copilot's own session record, and the cursor's record (pending with the session while it runs,
nothing pending and nothing unseen after).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import codex_helpers as cx
from tests.e2e import copilot_helpers as cp
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel

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
    done = cx.kp(env, folder, "install", "copilot", "--user")
    assert done.returncode == 0, done.stderr + done.stdout
    return folder


def _handed_times(fm: FakeModel, needle: str) -> int:
    return fm.text_of(cp.model_requests(fm)[-1]).count(needle)


def _unseen(env: dict[str, str], project: Path) -> str:
    return cx.kp(env, project, "--once", "--peek", "--persona", ch.PERSONA).stdout


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
    assert "MAIL-WAITING" not in _unseen(env, project)


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
    assert "MAIL-MIDRUN" not in _unseen(env, project)


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
    dry = cx.kp(env, project, "install", "copilot", "--user", "--dry-run")
    assert dry.returncode == 0 and "hook copilot-stop" in dry.stdout and not (hooks / "kijito-pull.json").exists()
    assert cx.kp(env, project, "install", "copilot", "--user").returncode == 0
    sandbox.send(ch.PERSONA, "loom", "MAIL-AFTER-INSTALL")
    run = cp.run_p(copilot_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert any("MAIL-AFTER-INSTALL" in fake_model.text_of(r) for r in cp.model_requests(fake_model))
    done = cx.kp(env, project, "uninstall", "copilot", "--user")
    assert done.returncode == 0 and "removed" in done.stdout, done.stdout
    assert sorted(p.name for p in hooks.iterdir()) == ["mine.json"] and (hooks / "mine.json").read_bytes() == mine
