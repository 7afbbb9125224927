"""kijito-pull's Gemini CLI hooks inside the real Gemini CLI, offline.

Gemini CLI (the version `scripts/install-harnesses` pins) runs headless (`gemini -p`) against the fake
model's Gemini API on loopback; the Kijito sandbox serves the mail; the hooks are installed, and the
project trusted, with `kijito-pull install gemini --user --trust`, as a user would. The proof is the mail
text inside the model requests the fake model logged, Gemini's own session record, and the cursor's
record (`status --json`: pending with the session while it runs, nothing pending and nothing unseen
after, so the record confirmed the hand-over).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import codex_helpers as cx
from tests.e2e import gemini_helpers as gm
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel

pytestmark = pytest.mark.e2e


@pytest.fixture
def gemini_harness() -> h.Harness:
    return h.require_harness("gemini")


@pytest.fixture
def env(gemini_harness, fake_model, sandbox, state, e2e_home) -> dict[str, str]:
    gm.write_settings(e2e_home)
    return gm.gemini_env(gemini_harness, e2e_home, fake_model.url, sandbox.url, state)


@pytest.fixture
def project(env, tmp_path) -> Path:
    """An opted-in project; kijito-pull's hooks installed for the user and the project trusted."""
    folder = ch.make_project(tmp_path)
    done = ch.kp(env, folder, "install", "gemini", "--user", "--trust")
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"Gemini CLI now trusts {folder}" in done.stdout, done.stdout
    return folder


def _mail_requests(fm: FakeModel, needle: str) -> list[dict]:
    return [r for r in gm.stream_requests(fm) if needle in fm.text_of(r)]


def _handed_times(fm: FakeModel, needle: str) -> int:
    """How many times the mail was handed over, as the last request's conversation shows it."""
    return fm.text_of(gm.stream_requests(fm)[-1]).count(needle)


def _record_text(home: Path) -> str:
    return "\n".join(p.read_text() for p in gm.chat_records(home))


def test_headless_gets_waiting_mail_at_session_start_once_confirmed_from_the_record(
        gemini_harness, fake_model, sandbox, env, project, e2e_home) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    during: list[list[dict]] = []

    def reply(request: dict) -> str:
        if not during:  # the first model request: the SessionStart hand-over is pending with the session
            during.append(cx.pending(env, project))
        return "ok"

    fake_model.reply = reply
    run = gm.run_p(gemini_harness, env, project, "summarize the task")
    assert run.returncode == 0, run.stderr[-3000:]
    first = gm.stream_requests(fake_model)[0]
    assert "<hook_context>" in fake_model.text_of(first) and "MAIL-WAITING: the deploy key rotated" in \
        fake_model.text_of(first), "not in the first request"
    assert _handed_times(fake_model, "MAIL-WAITING") == 1
    assert len(gm.stream_requests(fake_model)) == 1  # nothing new at AfterAgent: no second turn
    held = during[0]
    assert len(held) == 1 and held[0]["holder"].startswith("gemini:"), held
    assert "kijito-ref:" in _record_text(e2e_home) and "MAIL-WAITING" in _record_text(e2e_home)
    assert cx.pending(env, project) == []  # confirmed: found in Gemini's record
    assert "MAIL-WAITING" not in ch.unseen(env, project)
    again = gm.run_p(gemini_harness, env, project, "next task")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "MAIL-WAITING" not in fake_model.text_of(gm.stream_requests(fake_model)[-1])


def test_headless_gets_mail_sent_mid_run_at_after_agent_once(
        gemini_harness, fake_model, sandbox, env, project) -> None:
    sent: list[int] = []

    def reply(request: dict) -> str:
        if request["path"].endswith(gm.STREAM_PATH) and not sent:
            sent.append(sandbox.send(ch.PERSONA, "loom", "MAIL-MIDRUN: build is red, stop pushing"))
        return f"reply {len(gm.stream_requests(fake_model))}"

    fake_model.reply = reply
    run = gm.run_p(gemini_harness, env, project, "work on the task")
    assert run.returncode == 0, run.stderr[-3000:]
    turns = gm.stream_requests(fake_model)
    assert len(turns) == 2, [fake_model.text_of(t)[-300:] for t in turns]
    assert "MAIL-MIDRUN" not in fake_model.text_of(turns[0])
    last_user = turns[1]["body"]["contents"][-1]
    assert last_user["role"] == "user" and "MAIL-MIDRUN: build is red" in json.dumps(last_user), last_user
    assert _handed_times(fake_model, "MAIL-MIDRUN") == 1
    assert "Agent execution blocked" in run.stderr  # Gemini's own word for the refused turn end
    assert "reply 1" in run.stdout and "reply 2" in run.stdout
    assert cx.pending(env, project) == []  # the second AfterAgent confirmed it from the record
    assert "MAIL-MIDRUN" not in ch.unseen(env, project)


def test_not_opted_in_sends_nothing_to_kijito(gemini_harness, fake_model, sandbox, env, project, tmp_path) -> None:
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    assert ch.kp(env, plain, "install", "gemini", "--project", "--trust").returncode == 0  # trusted, hooks too
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOT-HERE")
    before = len(sandbox.requests)
    run = gm.run_p(gemini_harness, env, plain, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert gm.stream_requests(fake_model), "gemini never asked the model"
    assert len(sandbox.requests) == before, sandbox.requests[before:]
    assert not _mail_requests(fake_model, "MAIL-NOT-HERE")


def test_install_uninstall_is_byte_exact_and_trust_is_explicit(
        gemini_harness, fake_model, sandbox, env, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    settings = gm.settings_file(e2e_home)
    mine = json.dumps({**gm.OFFLINE_SETTINGS, "ui": {"theme": "Default"},
                       "hooks": {"BeforeAgent": [{"hooks": [{"type": "command", "command": "echo {}"}]}]}},
                      indent=4).encode() + b"\n"
    settings.write_bytes(mine)
    folders = e2e_home / ".gemini" / "trustedFolders.json"

    dry = ch.kp(env, project, "install", "gemini", "--user", "--trust", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "hook gemini-after-agent" in dry.stdout and "TRUST_FOLDER" in dry.stdout, dry.stdout
    assert settings.read_bytes() == mine and not folders.exists()

    done = ch.kp(env, project, "install", "gemini", "--user")
    assert done.returncode == 0, done.stderr
    assert f"Gemini CLI does not trust {project}" in done.stdout and "--trust" in done.stdout, done.stdout
    assert not folders.exists()  # trust only when asked
    found = ch.doctor(env, project)
    assert found["harness.gemini"]["verdict"] == "ok", found["harness.gemini"]
    assert found["gemini.trust"]["verdict"] == "fail" and "--trust" in found["gemini.trust"]["fix"], found
    sandbox.send(ch.PERSONA, "loom", "MAIL-UNTRUSTED")
    refused = gm.run_p(gemini_harness, env, project, "hello")
    assert refused.returncode == 55 and "trusted directory" in refused.stderr, refused.stderr[-2000:]

    done = ch.kp(env, project, "install", "gemini", "--user", "--trust")
    assert done.returncode == 0 and "already installed" in done.stdout, done.stdout
    assert json.loads(folders.read_text()) == {str(project.resolve()): "TRUST_FOLDER"}
    assert folders.stat().st_mode & 0o777 == 0o600
    assert ch.doctor(env, project)["gemini.trust"]["verdict"] == "ok"
    run = gm.run_p(gemini_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _mail_requests(fake_model, "MAIL-UNTRUSTED"), "trusted hooks did not hand the mail over"
    assert any("echo {}" in json.dumps(r) for r in [json.loads(settings.read_text())])  # the user's hook kept

    done = ch.kp(env, project, "uninstall", "gemini", "--user")
    assert done.returncode == 0, done.stderr
    assert "restored byte for byte" in done.stdout, done.stdout
    assert settings.read_bytes() == mine
    assert ch.doctor(env, project)["gemini.trust"]["verdict"] == "ok"  # nothing of ours left to check


def test_project_install_and_uninstall_leave_the_project_as_it_was(
        gemini_harness, fake_model, sandbox, env, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    before = sorted(str(p.relative_to(project)) for p in project.rglob("*"))
    done = ch.kp(env, project, "install", "gemini", "--project", "--trust")
    assert done.returncode == 0, done.stderr
    sandbox.send(ch.PERSONA, "loom", "MAIL-PROJECT-HOOKS")
    run = gm.run_p(gemini_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _mail_requests(fake_model, "MAIL-PROJECT-HOOKS")
    assert "project-level hooks" in run.stderr  # Gemini warns about project hooks it sees the first time
    done = ch.kp(env, project, "uninstall", "gemini", "--project")
    assert done.returncode == 0 and "removed" in done.stdout, done.stdout
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == before


# -- the interactive TUI ----------------------------------------------------------------------------------------


def test_tui_gets_waiting_mail_with_its_first_prompt_and_mail_sent_mid_turn_at_its_end(
        gemini_harness, fake_model, sandbox, env, project) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-TUI-WAITING: the release is frozen")
    sent: list[int] = []

    def reply(request: dict) -> str:
        if request["path"].endswith(gm.STREAM_PATH) and not sent:
            sent.append(sandbox.send(ch.PERSONA, "loom", "MAIL-TUI-MIDTURN: CI is green again"))
        return "ok"

    fake_model.reply = reply
    argv = h.netns().wrap(gemini_harness.cmd("-m", gm.MODEL))
    with h.Tmux(argv, env={**env, "TERM": "xterm-256color"}, cwd=project) as tui:
        assert tui.wait_for_screen("Type your message", timeout=40), tui.capture()
        # Gemini runs SessionStart at launch, before any prompt; a prompt typed before the hook answered goes
        # without the context, which Gemini adds to the conversation later (docs/gemini.md): wait for it.
        assert ch.wait_until(lambda: cx.pending(env, project) != [], 20), tui.capture()
        tui.type("say hi from the tui")
        first = fake_model.wait_for(lambda r: r["path"].endswith(gm.STREAM_PATH) and "say hi from the tui"
                                    in fake_model.text_of(r), timeout=30)
        assert first is not None, tui.capture()
        assert "MAIL-TUI-WAITING: the release is frozen" in fake_model.text_of(first)
        again = fake_model.wait_for_text("MAIL-TUI-MIDTURN: CI is green again", timeout=30)
        assert again is not None and again["path"].endswith(gm.STREAM_PATH), tui.capture()
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 20), cx.pending(env, project)
        assert _handed_times(fake_model, "MAIL-TUI-WAITING") == 1
        assert _handed_times(fake_model, "MAIL-TUI-MIDTURN") == 1
