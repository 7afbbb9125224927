"""kijito-pull's Qwen Code hooks inside the real Qwen Code, offline.

Qwen Code (the version `scripts/install-harnesses` pins) runs headless (`qwen -p`) and in its TUI against the
fake model's OpenAI API on loopback; the Kijito sandbox serves the mail; the hooks are installed with
`kijito-pull install qwen --user`, as a user would. The proof is the mail text inside the model requests the
fake model logged, Qwen's own chat record, and the cursor's record (`status --json`: pending with the session
while it runs, nothing pending and nothing unseen after, so the record confirmed the hand-over).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import codex_helpers as cx
from tests.e2e import harness as h
from tests.e2e import qwen_helpers as qw
from tests.e2e.fakemodel import FakeModel
from tests.waiting import budget

pytestmark = pytest.mark.e2e


@pytest.fixture
def qwen_harness() -> h.Harness:
    return h.require_harness("qwen")


@pytest.fixture
def env(qwen_harness, fake_model, sandbox, state, e2e_home) -> dict[str, str]:
    qw.write_settings(e2e_home)
    return qw.qwen_env(qwen_harness, e2e_home, fake_model.url, sandbox.url, state)


@pytest.fixture
def project(env, tmp_path) -> Path:
    """An opted-in project; kijito-pull's hooks installed for the user."""
    folder = ch.make_project(tmp_path)
    done = ch.kp(env, folder, "install", "qwen", "--user")
    assert done.returncode == 0, done.stderr + done.stdout
    return folder


def _mail_requests(fm: FakeModel, needle: str) -> list[dict]:
    return [r for r in qw.chat_requests(fm) if needle in fm.text_of(r)]


def _handed_times(fm: FakeModel, needle: str) -> int:
    """How many times the mail was handed over, as the last request's conversation shows it."""
    return fm.text_of(qw.chat_requests(fm)[-1]).count(needle)


def _record_text(home: Path) -> str:
    return "\n".join(p.read_text() for p in qw.chat_records(home))


def test_headless_gets_waiting_mail_at_session_start_once_confirmed_from_the_record(
        qwen_harness, fake_model, sandbox, env, project, e2e_home) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    during: list[list[dict]] = []

    def reply(request: dict) -> str:
        if not during:  # the first model request: the SessionStart hand-over is pending with the session
            during.append(cx.pending(env, project))
        return "ok"

    fake_model.reply = reply
    run = qw.run_p(qwen_harness, env, project, "summarize the task")
    assert run.returncode == 0, run.stderr[-3000:]
    first = qw.chat_requests(fake_model)[0]
    system = qw.system_text(first)
    assert "qwen:session-start-context" in system and "MAIL-WAITING: the deploy key rotated" in system, \
        "not in the first request's system prompt"
    assert _handed_times(fake_model, "MAIL-WAITING") == 1
    assert len(qw.chat_requests(fake_model)) == 1  # nothing new at Stop: no second turn
    held = during[0]
    assert len(held) == 1 and held[0]["holder"].startswith("qwen:"), held
    # The record never shows SessionStart context: the reply recorded after the hand-over confirmed it.
    assert "MAIL-WAITING" not in _record_text(e2e_home) and '"type":"assistant"' in _record_text(e2e_home)
    assert cx.pending(env, project) == []
    assert "MAIL-WAITING" not in ch.unseen(env, project)
    again = qw.run_p(qwen_harness, env, project, "next task")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "MAIL-WAITING" not in fake_model.text_of(qw.chat_requests(fake_model)[-1])


def test_headless_gets_mail_sent_mid_run_at_stop_once(qwen_harness, fake_model, sandbox, env, project) -> None:
    sent: list[int] = []

    def reply(request: dict) -> str:
        if qw.chat_requests(fake_model) and not sent:
            sent.append(sandbox.send(ch.PERSONA, "loom", "MAIL-MIDRUN: build is red, stop pushing"))
        return f"reply {len(qw.chat_requests(fake_model))}."

    fake_model.reply = reply
    run = qw.run_p(qwen_harness, env, project, "work on the task")
    assert run.returncode == 0, run.stderr[-3000:]
    turns = qw.chat_requests(fake_model)
    assert len(turns) == 2, [fake_model.text_of(t)[-300:] for t in turns]
    assert "MAIL-MIDRUN" not in fake_model.text_of(turns[0])
    assert "MAIL-MIDRUN: build is red" in qw.last_user_text(turns[1]), qw.last_user_text(turns[1])[-2000:]
    # Qwen runs UserPromptSubmit for the block's reason too: qwen-prompt adds nothing to it.
    assert "qwen:user-prompt-submit-context" not in qw.last_user_text(turns[1])
    assert _handed_times(fake_model, "MAIL-MIDRUN") == 1
    assert "reply 1." in run.stdout and "reply 2." in run.stdout
    assert cx.pending(env, project) == []  # the second Stop confirmed it: a reply recorded after the block
    assert "MAIL-MIDRUN" not in ch.unseen(env, project)


def test_not_opted_in_sends_nothing_to_kijito(qwen_harness, fake_model, sandbox, env, project, tmp_path) -> None:
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    assert ch.kp(env, plain, "install", "qwen", "--project").returncode == 0  # project hooks too
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOT-HERE")
    before = len(sandbox.requests)
    run = qw.run_p(qwen_harness, env, plain, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert qw.chat_requests(fake_model), "qwen never asked the model"
    assert len(sandbox.requests) == before, sandbox.requests[before:]
    assert not _mail_requests(fake_model, "MAIL-NOT-HERE")


def test_install_uninstall_is_byte_exact(qwen_harness, fake_model, sandbox, env, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    settings = qw.settings_file(e2e_home)
    mine = json.dumps({**qw.OFFLINE_SETTINGS, "ui": {"theme": "Default"},
                       "hooks": {"PreToolUse": [{"matcher": "", "hooks": [{"type": "command", "command": "true"}]}]}},
                      indent=4).encode() + b"\n"
    settings.write_bytes(mine)

    dry = ch.kp(env, project, "install", "qwen", "--user", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "hook qwen-stop" in dry.stdout and "hook qwen-prompt" in dry.stdout, dry.stdout
    assert settings.read_bytes() == mine

    done = ch.kp(env, project, "install", "qwen", "--user", "--consumer", "qwen-e2e")
    assert done.returncode == 0, done.stderr
    wired = json.loads(settings.read_text())
    assert wired["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 15  # seconds, as Qwen reads them
    assert "--consumer qwen-e2e" in wired["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert wired["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "true"  # the user's hook kept
    found = ch.doctor(env, project)
    assert found["harness.qwen"]["verdict"] == "ok", found["harness.qwen"]
    assert found["qwen.trust"]["verdict"] == "ok", found["qwen.trust"]
    sandbox.send(ch.PERSONA, "loom", "MAIL-INSTALLED")
    run = qw.run_p(qwen_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _mail_requests(fake_model, "MAIL-INSTALLED"), "the installed hooks did not hand the mail over"
    again = ch.kp(env, project, "install", "qwen", "--user", "--consumer", "qwen-e2e")
    assert again.returncode == 0 and "already installed" in again.stdout, again.stdout

    done = ch.kp(env, project, "uninstall", "qwen", "--user")
    assert done.returncode == 0, done.stderr
    assert "restored byte for byte" in done.stdout, done.stdout
    assert settings.read_bytes() == mine


def test_project_install_and_uninstall_leave_the_project_as_it_was_and_doctor_names_the_trust_fix(
        qwen_harness, fake_model, sandbox, env, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    before = sorted(str(p.relative_to(project)) for p in project.rglob("*"))
    done = ch.kp(env, project, "install", "qwen", "--project")
    assert done.returncode == 0, done.stderr
    sandbox.send(ch.PERSONA, "loom", "MAIL-PROJECT-HOOKS")
    run = qw.run_p(qwen_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _mail_requests(fake_model, "MAIL-PROJECT-HOOKS")

    # With Qwen's folder trust switched on, an untrusted folder's project hooks are skipped without a word.
    qw.write_settings(e2e_home, {**qw.OFFLINE_SETTINGS, "security": {"folderTrust": {"enabled": True}}})
    found = ch.doctor(env, project)
    assert found["qwen.trust"]["verdict"] == "warn" and "--user" in found["qwen.trust"]["fix"], found["qwen.trust"]
    sandbox.send(ch.PERSONA, "loom", "MAIL-UNTRUSTED")
    run = qw.run_p(qwen_harness, env, project, "hello again")
    assert run.returncode == 0, run.stderr[-3000:]
    assert not _mail_requests(fake_model, "MAIL-UNTRUSTED")  # what the doctor warned of
    (e2e_home / ".qwen" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    assert ch.doctor(env, project)["qwen.trust"]["verdict"] == "ok"

    done = ch.kp(env, project, "uninstall", "qwen", "--project")
    assert done.returncode == 0 and "removed" in done.stdout, done.stdout
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == before


# -- the interactive TUI ----------------------------------------------------------------------------------------


def test_tui_gets_mail_sent_before_the_first_prompt_as_its_context_confirmed_from_the_record(
        qwen_harness, fake_model, sandbox, env, project, e2e_home, state) -> None:
    argv = h.netns().wrap(qwen_harness.cmd("--yolo"))
    # As a headless session (no watcher, which would push the mail through the inbox before the prompt).
    with h.Tmux(argv, env={**env, "TERM": "xterm-256color", "KIJITO_PULL_QWEN_MODE": "headless"}, cwd=project) as tui:
        assert tui.wait_for_screen("Type your message", timeout=40), tui.capture()
        sandbox.send(ch.PERSONA, "loom", "MAIL-TUI-PROMPT: the release is frozen")
        tui.type("say hi from the tui")
        first = fake_model.wait_for(lambda r: r in qw.chat_requests(fake_model) and "say hi from the tui"
                                    in fake_model.text_of(r), timeout=30)
        assert first is not None, tui.capture()
        assert "MAIL-TUI-PROMPT: the release is frozen" in qw.last_user_text(first)
        assert "qwen:user-prompt-submit-context" in qw.last_user_text(first)
        assert ch.wait_until(lambda: "MAIL-TUI-PROMPT" in _record_text(e2e_home), 20)  # the record shows it
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 20), cx.pending(env, project)
        assert _handed_times(fake_model, "MAIL-TUI-PROMPT") == 1
        assert not ch.hook_pids(state, "qwen-watch")
    assert "MAIL-TUI-PROMPT" not in ch.unseen(env, project)


def test_tui_quit_before_any_prompt_gives_the_session_start_mail_back(
        qwen_harness, fake_model, sandbox, env, project) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-TUI-UNREAD: nobody asked yet")
    argv = h.netns().wrap(qwen_harness.cmd("--yolo"))
    with h.Tmux(argv, env={**env, "TERM": "xterm-256color"}, cwd=project) as tui:
        assert tui.wait_for_screen("Type your message", timeout=40), tui.capture()
        # SessionStart ran at launch and handed the mail over as context: pending, as no request carried it yet.
        assert ch.wait_until(lambda: len(cx.pending(env, project)) == 1, 20), tui.capture()
        tui.type("/quit")
        # SessionEnd: the record shows no reply after the hand-over, so the mail is unseen again at once.
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 20), (cx.pending(env, project), tui.capture())
    assert not qw.chat_requests(fake_model)
    assert "MAIL-TUI-UNREAD" in ch.unseen(env, project)


def test_tui_idle_session_is_woken_by_new_mail_within_2s_through_its_inbox_and_a_busy_one_at_the_turn_end(
        qwen_harness, fake_model, sandbox, env, project, state, e2e_home) -> None:
    argv = h.netns().wrap(qwen_harness.cmd("--yolo"))
    with h.Tmux(argv, env={**env, "TERM": "xterm-256color"}, cwd=project) as tui:
        assert tui.wait_for_screen("Type your message", timeout=40), tui.capture()
        assert ch.wait_until(lambda: ch.hook_pids(state, "qwen-watch"), 20, step=0.2), (tui.capture(),
                                                                                        cx.watch_logs(state))
        tui.type("hello")
        first = fake_model.wait_for(lambda r: r in qw.chat_requests(fake_model) and "hello" in fake_model.text_of(r),
                                    timeout=30)
        assert first is not None, tui.capture()
        assert "session inbox" in qw.system_text(first)  # SessionStart told the model how mail comes
        time.sleep(3)  # the turn is over: the session is idle
        start = len(fake_model.requests)
        sent = time.monotonic()
        sandbox.send(ch.PERSONA, "loom", "MAIL-IDLE-WAKE: the release is frozen")
        woke = fake_model.wait_for_text("MAIL-IDLE-WAKE", timeout=20, start=start)
        took = time.monotonic() - sent
        assert woke is not None, (tui.capture(), cx.watch_logs(state))
        assert took <= budget(2.0), f"the idle session was woken after {took:.2f} s"
        assert "cross_session_message" in qw.last_user_text(woke)  # Qwen's envelope of an inbox message
        assert fake_model.text_of(woke).count("MAIL-IDLE-WAKE: the release is frozen") == 1
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 30, step=0.5), cx.pending(env, project)
        assert "MAIL-IDLE-WAKE" in _record_text(e2e_home)  # confirmed from the chat record
        # busy: mail sent while the model answers a turn reaches the model after that turn, once
        time.sleep(3)
        during: list[int] = []

        def slow(request: dict) -> str:
            if "turn-busy" in fake_model.text_of(request) and not during:
                during.append(sandbox.send(ch.PERSONA, "loom", "MAIL-BUSY: CI is green again"))
                time.sleep(4)
            return "ok"

        fake_model.reply = slow
        start = len(fake_model.requests)
        tui.type("turn-busy")
        busy = fake_model.wait_for_text("MAIL-BUSY", timeout=40, start=start)
        assert during and busy is not None, (tui.capture(), cx.watch_logs(state))
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 30, step=0.5), cx.pending(env, project)
        assert _handed_times(fake_model, "MAIL-BUSY: CI is green again") == 1
    assert "MAIL-" not in ch.unseen(env, project)


@pytest.mark.parametrize("armed_first", [True, False], ids=["after-armed", "at-once"])
def test_tui_clear_ends_the_old_watcher_and_the_new_session_gets_its_own(
        qwen_harness, fake_model, sandbox, env, project, state, armed_first) -> None:
    argv = h.netns().wrap(qwen_harness.cmd("--yolo"))
    with h.Tmux(argv, env={**env, "TERM": "xterm-256color"}, cwd=project) as tui:
        assert tui.wait_for_screen("Type your message", timeout=40), tui.capture()
        assert ch.wait_until(lambda: len(ch.hook_pids(state, "qwen-watch")) == 1, 20, step=0.2), cx.watch_logs(state)
        [old] = ch.hook_pids(state, "qwen-watch")
        # at once: /clear may come before the old watcher holds its lease, so SessionEnd cannot end it; it ends
        # by itself when Qwen's registry names the new session
        if armed_first:
            assert ch.wait_until(lambda: "armed" in cx.watch_logs(state), 20, step=0.2), cx.watch_logs(state)
        tui.type("/clear")
        # SessionEnd ends the old session's watcher; SessionStart (source "clear", a new session id) arms one
        assert ch.wait_until(lambda: ch.hook_pids(state, "qwen-watch") not in ([], [old]), 20, step=0.2), \
            (tui.capture(), cx.watch_logs(state))
        assert ch.wait_until(lambda: old not in ch.hook_pids(state, "qwen-watch"), 15, step=0.2), \
            cx.watch_logs(state)
        time.sleep(1)
        start = len(fake_model.requests)
        sandbox.send(ch.PERSONA, "loom", "MAIL-AFTER-CLEAR: a fresh session")
        woke = fake_model.wait_for_text("MAIL-AFTER-CLEAR", timeout=20, start=start)
        assert woke is not None, (tui.capture(), cx.watch_logs(state))
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 30, step=0.5), cx.pending(env, project)
