"""kijito-pull's Kimi Code CLI hooks inside the real Kimi Code CLI, offline.

Kimi Code CLI (the version `scripts/install-harnesses` pins) runs headless (`kimi -p`) against the fake model's
OpenAI API on loopback; the Kijito sandbox serves the mail; the hooks are installed with `kijito-pull install
kimi --user`, as a user would. The proof is the mail text inside the model requests the fake model logged,
Kimi's own record (wire.jsonl), and the cursor's record (`status --json`: pending with the session while it
runs, nothing pending and nothing unseen after, so the record confirmed the hand-over).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import codex_helpers as cx
from tests.e2e import harness as h
from tests.e2e import kimi_helpers as km
from tests.e2e.fakemodel import FakeModel

pytestmark = pytest.mark.e2e


@pytest.fixture
def kimi_harness() -> h.Harness:
    return h.require_harness("kimi")


@pytest.fixture
def env(kimi_harness, fake_model, sandbox, state, e2e_home, tmp_path) -> dict[str, str]:
    km.write_config(e2e_home, fake_model.url)
    return km.kimi_env(kimi_harness, e2e_home, sandbox.url, state, km.kimi_bin(tmp_path, kimi_harness))


@pytest.fixture
def project(env, tmp_path) -> Path:
    """An opted-in project; kijito-pull's hooks installed for the user."""
    folder = ch.make_project(tmp_path)
    done = ch.kp(env, folder, "install", "kimi", "--user")
    assert done.returncode == 0, done.stderr + done.stdout
    return folder


def _handed_times(fm: FakeModel, needle: str) -> int:
    """How many times the mail was handed over, as the last request's conversation shows it."""
    return fm.text_of(km.stream_requests(fm)[-1]).count(needle)


def _wire_text(home: Path) -> str:
    return "\n".join(p.read_text() for p in km.wires(home))


def test_headless_gets_waiting_mail_in_the_first_model_request_once_confirmed_from_the_wire(
        kimi_harness, fake_model, sandbox, env, project, e2e_home) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    during: list[list[dict]] = []

    def reply(request: dict) -> str:
        if not during:  # the first model request: the hand-over is pending with the session
            during.append(cx.pending(env, project))
        return "ok"

    fake_model.reply = reply
    run = km.run_p(kimi_harness, env, project, "summarize the task")
    assert run.returncode == 0, run.stderr[-3000:]
    first = km.stream_requests(fake_model)[0]
    assert "MAIL-WAITING: the deploy key rotated" in fake_model.text_of(first), "not in the first request"
    assert '<hook_result hook_event="UserPromptSubmit">' in fake_model.text_of(first)
    assert _handed_times(fake_model, "MAIL-WAITING") == 1
    assert len(km.stream_requests(fake_model)) == 1  # nothing new at Stop: no continuation
    held = during[0]
    assert len(held) == 1 and held[0]["holder"].startswith("kimi:session_"), held
    assert "kijito-ref:" in _wire_text(e2e_home) and "MAIL-WAITING" in _wire_text(e2e_home)
    assert cx.pending(env, project) == []  # confirmed by the Stop hook: found in Kimi's wire.jsonl
    assert "MAIL-WAITING" not in ch.unseen(env, project)
    again = km.run_p(kimi_harness, env, project, "next task")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "MAIL-WAITING" not in fake_model.text_of(km.stream_requests(fake_model)[-1])


def test_headless_gets_mail_sent_mid_run_at_stop_once_and_the_settler_confirms_it(
        kimi_harness, fake_model, sandbox, env, project, e2e_home) -> None:
    sent: list[int] = []

    def reply(request: dict) -> str:
        if request["path"].endswith(km.STREAM_PATH) and not sent:
            sent.append(sandbox.send(ch.PERSONA, "loom", "MAIL-MIDRUN: build is red, stop pushing"))
        return f"reply {len(km.stream_requests(fake_model))}"

    fake_model.reply = reply
    run = km.run_p(kimi_harness, env, project, "work on the task")
    assert run.returncode == 0, run.stderr[-3000:]
    turns = km.stream_requests(fake_model)
    assert len(turns) == 2, [fake_model.text_of(t)[-300:] for t in turns]
    assert "MAIL-MIDRUN" not in fake_model.text_of(turns[0])
    last_user = turns[1]["body"]["messages"][-1]
    assert last_user["role"] == "user" and "MAIL-MIDRUN: build is red" in json.dumps(last_user), last_user
    assert _handed_times(fake_model, "MAIL-MIDRUN") == 1
    assert "reply 1" in run.stdout and "reply 2" in run.stdout
    # Kimi runs no hook after the continuation under -p: the settler the Stop hook started confirms it.
    assert ch.wait_until(lambda: cx.pending(env, project) == [], 30), cx.pending(env, project)
    assert "MAIL-MIDRUN" not in ch.unseen(env, project)
    again = km.run_p(kimi_harness, env, project, "next task")
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(km.stream_requests(fake_model)) == 3
    assert "MAIL-MIDRUN" not in fake_model.text_of(km.stream_requests(fake_model)[-1])


def test_not_opted_in_sends_nothing_to_kijito(kimi_harness, fake_model, sandbox, env, project, tmp_path) -> None:
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOT-HERE")
    before = len(sandbox.requests)
    run = km.run_p(kimi_harness, env, plain, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert km.stream_requests(fake_model), "kimi never asked the model"
    assert len(sandbox.requests) == before, sandbox.requests[before:]
    assert "MAIL-NOT-HERE" not in json.dumps(fake_model.requests)
    assert "hook_result" not in json.dumps(fake_model.requests)  # the hooks answered with nothing at all


def test_install_uninstall_round_trip_is_byte_exact(
        kimi_harness, fake_model, sandbox, env, e2e_home, tmp_path) -> None:
    project = ch.make_project(tmp_path)
    config = km.config_file(e2e_home)
    mine = config.read_bytes() + b'\n[[hooks]]\nevent = "PreToolUse"\ncommand = "echo mine"\n\n# the end\n'
    config.write_bytes(mine)

    dry = ch.kp(env, project, "install", "kimi", "--user", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "hook kimi-stop" in dry.stdout and "+[[hooks]]" in dry.stdout, dry.stdout
    assert config.read_bytes() == mine
    refused = ch.kp(env, project, "install", "kimi", "--project")
    assert refused.returncode != 0 and "--user" in refused.stderr and "only from its user config" in refused.stderr
    assert config.read_bytes() == mine

    done = ch.kp(env, project, "install", "kimi", "--user")
    assert done.returncode == 0, done.stderr
    assert config.read_bytes().startswith(mine)
    found = ch.doctor(env, project)
    assert found["harness.kimi"]["verdict"] == "ok", found["harness.kimi"]
    assert found["kimi.config"]["verdict"] == "ok", found["kimi.config"]
    sandbox.send(ch.PERSONA, "loom", "MAIL-INSTALLED")
    run = km.run_p(kimi_harness, env, project, "hello")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "MAIL-INSTALLED" in fake_model.text_of(km.stream_requests(fake_model)[0])

    again = ch.kp(env, project, "install", "kimi", "--user")
    assert again.returncode == 0 and "already installed" in again.stdout, again.stdout
    done = ch.kp(env, project, "uninstall", "kimi", "--user")
    assert done.returncode == 0, done.stderr
    assert "restored byte for byte" in done.stdout, done.stdout
    assert config.read_bytes() == mine
    found = ch.doctor(env, project)
    assert found["kimi.config"]["verdict"] == "ok" and "nothing to check" in found["kimi.config"]["detail"]

    # A config.toml Kimi itself rejects (here: a hook of ours on an event Kimi does not know) fails kimi.config,
    # with Kimi's own words and the fix.
    config.write_bytes(mine + b'\n[[hooks]]\nevent = "Stopp"\ncommand = "kijito-pull hook kimi-stop"\n')
    check = ch.doctor(env, project)["kimi.config"]
    assert check["verdict"] == "fail" and "hooks[1].event" in check["detail"], check
    assert "kijito-pull install kimi --user" in check["fix"]


# -- the interactive TUI ----------------------------------------------------------------------------------------


def test_tui_mail_goes_with_prompts_and_turn_ends_never_into_an_idle_session(
        kimi_harness, fake_model, sandbox, env, project) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-TUI-WAITING: the release is frozen")
    sent: list[int] = []

    def reply(request: dict) -> str:
        if request["path"].endswith(km.STREAM_PATH) and not sent:
            sent.append(sandbox.send(ch.PERSONA, "loom", "MAIL-TUI-MIDTURN: CI is green again"))
        return "ok"

    fake_model.reply = reply
    with km.start_tui(kimi_harness, env, project) as tui:
        assert tui.wait_for_screen("No session yet", timeout=60), tui.capture()
        km.type_prompt(tui, "say hi from the tui")
        first = fake_model.wait_for(lambda r: r["path"].endswith(km.STREAM_PATH) and "say hi from the tui"
                                    in fake_model.text_of(r), timeout=40)
        assert first is not None, tui.capture()
        assert "MAIL-TUI-WAITING: the release is frozen" in fake_model.text_of(first)
        again = fake_model.wait_for_text("MAIL-TUI-MIDTURN: CI is green again", timeout=30)
        assert again is not None and again["path"].endswith(km.STREAM_PATH), tui.capture()
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 30), cx.pending(env, project)
        # No route into the running session: mail sent while it is idle waits for the next prompt.
        count = len(km.stream_requests(fake_model))
        sandbox.send(ch.PERSONA, "loom", "MAIL-TUI-IDLE: read me next time")
        assert not ch.wait_until(lambda: len(km.stream_requests(fake_model)) > count, 3)
        km.type_prompt(tui, "anything new?")
        nxt = fake_model.wait_for(lambda r: r["path"].endswith(km.STREAM_PATH) and "anything new?"
                                  in fake_model.text_of(r), timeout=40)
        assert nxt is not None and "MAIL-TUI-IDLE: read me next time" in fake_model.text_of(nxt), tui.capture()
        for needle in ("MAIL-TUI-WAITING", "MAIL-TUI-MIDTURN", "MAIL-TUI-IDLE"):
            assert _handed_times(fake_model, needle) == 1, needle
        assert ch.wait_until(lambda: cx.pending(env, project) == [], 30), cx.pending(env, project)
