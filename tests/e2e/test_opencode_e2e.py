"""kijito-pull's OpenCode plugin inside the real OpenCode, offline.

OpenCode (the version `scripts/install-harnesses` pins) runs headless (`opencode run`) or as a server
(`opencode serve --port N`) against the fake model's chat-completions API on loopback; the Kijito sandbox
serves the mail; the plugin is installed with `kijito-pull install opencode --user`, as a user would. The
proof is the mail text inside the model requests the fake model logged, OpenCode's own record (`opencode
export`), and the cursor's record (`status --json`: nothing pending and nothing unseen once the record
confirmed the hand-over).

Every test runs twice: with OpenCode and with its fork Kilo Code CLI (`kijito-pull install kilo`, the same
plugin file, Kilo's own folders, `kilo.json`, `KILO_SERVER_PASSWORD` with user `kilo`; docs/kilo.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import codex_helpers as cx
from tests.e2e import harness as h
from tests.e2e import opencode_helpers as oc
from tests.e2e.fakemodel import FakeModel
from tests.waiting import budget

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["opencode", "kilo"])
def opencode_harness(request) -> h.Harness:
    """The real OpenCode, then the real Kilo Code CLI."""
    return h.require_harness(request.param)


@pytest.fixture
def host(opencode_harness) -> oc.Host:
    return oc.HOSTS[opencode_harness.name]


@pytest.fixture
def env(opencode_harness, sandbox, state, e2e_home) -> dict[str, str]:
    return oc.opencode_env(opencode_harness, e2e_home, sandbox.url, state)


@pytest.fixture
def project(env, fake_model, tmp_path, host) -> Path:
    """An opted-in project with the fake model configured; kijito-pull's plugin installed for the user."""
    folder = ch.make_project(tmp_path)
    oc.write_config(folder, fake_model.url, host)
    done = ch.kp(env, folder, "install", host.name, "--user", timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    return folder


def _with(fm: FakeModel, needle: str) -> list[dict]:
    return [r for r in oc.main_requests(fm) if needle in fm.text_of(r)]


def test_run_gets_waiting_mail_with_its_prompt_once_confirmed_from_the_export(
        opencode_harness, fake_model, sandbox, env, project, host) -> None:
    sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    during: list[list[dict]] = []

    def reply(request: dict) -> str:
        if oc.TITLE_MARK not in fake_model.text_of(request) and not during:
            during.append(cx.pending(env, project))  # handed over, pending with the session
        return "ok"

    fake_model.reply = reply
    started = time.monotonic()
    run = oc.run(opencode_harness, env, project, "summarize the task")
    took = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-3000:]
    assert took < 60, f"{host.name} run took {took:.0f} s (the {host.dependency} stall?)"
    first = oc.main_requests(fake_model)[0]
    assert "MAIL-WAITING: the deploy key rotated" in fake_model.text_of(first)
    assert "summarize the task" in fake_model.text_of(first)
    sid = oc.sessions(opencode_harness, env, project)[0]
    assert during and [p["holder"] for p in during[0]] == [f"{host.name}:{sid}"]
    assert "MAIL-WAITING" in oc.export(opencode_harness, env, sid)  # OpenCode's own record holds it
    # the detached session.idle hook confirms it from `opencode export`: nothing pending, nothing unseen
    assert ch.wait_until(lambda: not cx.pending(env, project), 60, step=1), cx.pending(env, project)
    assert "MAIL-WAITING" not in ch.unseen(env, project)
    # a second run is not handed the same mail again
    fake_model.clear()
    again = oc.run(opencode_harness, env, project, "and now?")
    assert again.returncode == 0, again.stderr[-3000:]
    assert oc.main_requests(fake_model) and not _with(fake_model, "MAIL-WAITING")
    assert not any(ch.TOKEN in fake_model.text_of(r) for r in fake_model.model_requests)


def test_not_opted_in_sends_nothing_to_kijito(opencode_harness, fake_model, sandbox, env, project, tmp_path,
                                              host) -> None:
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    oc.write_config(plain, fake_model.url, host)
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOT-HERE")
    before = len(sandbox.requests)
    run = oc.run(opencode_harness, env, plain, "say hi")
    assert run.returncode == 0, run.stderr[-3000:]
    assert oc.main_requests(fake_model), f"{host.name} never asked the model"
    assert len(sandbox.requests) == before, sandbox.requests[before:]
    assert not _with(fake_model, "MAIL-NOT-HERE")


@pytest.mark.parametrize("scope", ["--user", "--project"])
def test_install_dry_run_shows_the_diff_and_uninstall_is_byte_exact(opencode_harness, env, fake_model, tmp_path,
                                                                    e2e_home, scope, host) -> None:
    folder = ch.make_project(tmp_path)
    oc.write_config(folder, fake_model.url, host)
    config = e2e_home / ".config"
    (config / host.name).mkdir(parents=True)
    (config / host.name / host.config_file).write_text('{"$schema": "https://opencode.ai/config.json"}\n')
    before = oc.tree(config, folder)
    dry = ch.kp(env, folder, "install", host.name, scope, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    target = (config / host.name if scope == "--user" else folder / f".{host.name}") / "plugin" / "kijito-pull.js"
    assert f"+++ {target}" in dry.stdout and "kijito-pull for OpenCode" in dry.stdout, dry.stdout
    assert f"npm install --no-audit --no-fund --prefer-offline --save-exact {host.dependency}" in dry.stdout
    assert oc.tree(config, folder) == before, "a dry run changed files"
    done = ch.kp(env, folder, "install", host.name, scope, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    assert target.is_file() and (target.parents[1] / "node_modules" / host.dependency.rsplit("@", 1)[0]).is_dir()
    # The plugin runs the launcher in kijito-pull's data folder, which runs this installation first.
    launcher = e2e_home / ".local" / "share" / "kijito-pull" / "bin" / "kijito-pull-launch"
    assert f'const COMMAND = ["{launcher}"];' in target.read_text()
    assert f"HERE={ch.venv_bin() / 'kijito-pull'}  #" in launcher.read_text()
    doctor = ch.doctor(env, folder)
    assert doctor[f"harness.{host.name}"]["verdict"] == "ok", doctor[f"harness.{host.name}"]
    assert doctor[f"{host.name}.plugin"]["verdict"] in ("ok", "warn"), doctor[f"{host.name}.plugin"]
    again = ch.kp(env, folder, "install", host.name, scope)
    assert again.returncode == 0 and "already installed" in again.stdout, again.stdout
    gone = ch.kp(env, folder, "uninstall", host.name, scope)
    assert gone.returncode == 0, gone.stderr + gone.stdout
    assert oc.tree(config, folder) == before


def test_serve_session_is_woken_by_new_mail_within_2s_and_a_busy_one_gets_it_next(
        opencode_harness, fake_model, sandbox, env, project, state, host) -> None:
    port = 42000 + (hash(str(project)) % 2000)
    server = oc.serve(opencode_harness, env, project, port)
    assert oc.wait_server(port, user=host.name), f"{host.name} serve did not answer"
    status, made = oc.api(port, "POST", "/session", {}, user=host.name)
    sid = made["id"]  # type: ignore[index]
    status, _ = oc.api(port, "POST", f"/session/{sid}/prompt_async", {"parts": [{"type": "text", "text": "hello"}]},
                       user=host.name)
    assert status == 204
    assert ch.wait_until(lambda: ch.hook_pids(state, f"{host.name}-watch"), 40, step=0.2), server.diagnostics()
    assert fake_model.wait_for(lambda r: "hello" in fake_model.text_of(r) and oc.TITLE_MARK not in
                               fake_model.text_of(r), timeout=40)
    time.sleep(2)  # the first turn is over: the session is idle
    # The watcher is a process of its own, started by the first turn's hook: mail is sent once it watches
    # (its lease taken), as a user's would arrive some time into a session.
    assert ch.wait_until(lambda: ": armed" in cx.watch_logs(state), 60, step=0.2), \
        cx.watch_logs(state) + server.diagnostics()
    start = len(fake_model.requests)
    sent = time.monotonic()
    sandbox.send(ch.PERSONA, "loom", "MAIL-IDLE-WAKE: the release is frozen")
    woke = fake_model.wait_for_text("MAIL-IDLE-WAKE", timeout=20, start=start)
    took = time.monotonic() - sent
    assert woke is not None, cx.watch_logs(state) + server.diagnostics()
    assert took <= budget(2.0), f"the idle session was woken after {took:.2f} s"
    # busy: mail sent while the model is answering reaches the next model call
    time.sleep(2)
    during: list[int] = []

    def slow(request: dict) -> str:
        text = fake_model.text_of(request)
        if "turn-busy" in text and oc.TITLE_MARK not in text and not during:
            during.append(sandbox.send(ch.PERSONA, "loom", "MAIL-BUSY: CI is green again"))
            time.sleep(4)
        return "ok"

    fake_model.reply = slow
    start = len(fake_model.requests)
    oc.api(port, "POST", f"/session/{sid}/prompt_async", {"parts": [{"type": "text", "text": "turn-busy"}]},
           user=host.name)
    busy = fake_model.wait_for_text("MAIL-BUSY", timeout=40, start=start)
    assert during and busy is not None, server.diagnostics()
    later = [r for r in fake_model.requests[start:] if oc.TITLE_MARK not in fake_model.text_of(r)]
    assert "turn-busy" in fake_model.text_of(later[0]) and "MAIL-BUSY" not in fake_model.text_of(later[0])
    assert fake_model.text_of(busy).count("MAIL-BUSY: CI is green again") == 1
    # both pushes confirmed from the session's messages on its server: nothing pending, nothing unseen
    assert ch.wait_until(lambda: not cx.pending(env, project), 30, step=0.5), cx.pending(env, project)
    assert "MAIL-" not in ch.unseen(env, project)
