"""`kijito-pull install` as a user meets it: the wheel in a fresh virtual environment (no checkout on
PATH, the plugin files from the package data), then the real harness, offline.

- Claude Code: `install claude --project`, then `claude -p` with no --plugin-dir: the plugin's
  SessionStart hook (the wheel's kijito-pull) hands the waiting mail to the fake model; `uninstall`
  gives the project's settings back byte for byte.
- pi (both lines): `install pi --project`, then pi in RPC mode with no -e: the extension loads and mail
  wakes the idle agent; `uninstall` gives `.pi/settings.json` back byte for byte.
- Codex: `install codex --project` (the real codex on PATH, asked about trust) writes a hooks.json of
  Codex's shape whose commands answer Codex-shaped input as Codex expects; `uninstall` gives the file
  back byte for byte. (The real Codex running them: tests/e2e/test_codex_e2e.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h
from tests.e2e import install_helpers as ih
from tests.e2e import pi_helpers as ph
from tests.e2e.fakemodel import FakeModel

pytestmark = pytest.mark.e2e

CLAUDE_SETTINGS = ('{\n  "permissions": {"allow": ["Bash(git status)"]},\n'
                   '  "env": {"EDITOR": "vi"}\n}\n')
PI_SETTINGS = '{\n  "theme": "light"\n}\n'
CODEX_HOOKS = ('{\n  "hooks": {\n    "Stop": [{"hooks": [{"type": "command", "command": "true", "timeout": 3}]}]\n'
               '  }\n}\n')


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> ih.FreshInstall:
    """One wheel build and one fresh venv for the whole module (~15 s)."""
    return ih.fresh_install(tmp_path_factory.mktemp("fresh-install"))


def _ok(proc, what: str) -> str:
    assert proc.returncode == 0, f"{what}: rc={proc.returncode}\nstdout={proc.stdout}\nstderr={proc.stderr}"
    return proc.stdout


def test_the_fresh_install_uses_its_package_data(fresh: ih.FreshInstall, tmp_path: Path) -> None:
    code = ("from kijito_pull.harnesses import plugin_files as p; "
            "print(p.bundle_root('claude-plugin')); print(p.bundle_root('pi'))")
    import subprocess

    out = subprocess.run([str(fresh.bin / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         timeout=30, check=True).stdout.split()
    assert out[0].endswith("site-packages/kijito_pull/data/claude-plugin"), out
    assert out[1].endswith("site-packages/kijito_pull/data/pi"), out


# -- Claude Code ------------------------------------------------------------------------------------------


def test_claude_install_round_trip(fresh: ih.FreshInstall, claude_harness: h.Harness, fake_model: FakeModel,
                                   sandbox, e2e_home: Path, tmp_path: Path) -> None:
    project = ch.make_project(tmp_path)
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(CLAUDE_SETTINGS)
    before = ih.snapshot(project)
    claude_bin = Path(claude_harness.argv[0]).parent
    env = ih.user_env(e2e_home, fresh, claude_bin)

    dry = _ok(ih.kp(fresh, "install", "claude", "--project", "--dry-run", env=env, cwd=project), "dry run")
    assert "claude plugin marketplace add" in dry and "+    \"kijito-pull@kijito-pull\": true" in dry
    assert ih.snapshot(project) == before and not (e2e_home / ".claude").exists()

    out = _ok(ih.kp(fresh, "install", "claude", "--project", env=env, cwd=project), "install")
    assert "installed" in out
    installed = settings.read_text()
    assert installed.startswith('{\n  "permissions": {"allow": ["Bash(git status)"]},\n  "env": {"EDITOR": "vi"},\n')
    listed = ch.claude_cli(claude_harness, e2e_home, project, "plugin", "list")
    assert "kijito-pull@kijito-pull" in listed.stdout, listed.stdout + listed.stderr
    again = _ok(ih.kp(fresh, "install", "claude", "--project", env=env, cwd=project), "second install")
    assert "already installed" in again and settings.read_text() == installed

    # The real Claude Code, no --plugin-dir: the installed plugin's hooks run the wheel's kijito-pull.
    sandbox.send(ch.PERSONA, "loom", "MAIL-VIA-INSTALL: the wheel's plugin works")
    state = tmp_path / "state"
    hook_env = {**ch.hook_env(sandbox.url, state), "PATH": env["PATH"]}
    result = h.run_claude_p(claude_harness, "check in", base_url=fake_model.url, home=e2e_home, cwd=project,
                            env=hook_env, timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    convo = ch.conversation_requests(fake_model, "check in")
    assert convo and "MAIL-VIA-INSTALL: the wheel's plugin works" in fake_model.text_of(convo[0]), result.stderr

    out = _ok(ih.kp(fresh, "uninstall", "claude", "--project", env=env, cwd=project), "uninstall")
    assert "byte for byte" in out
    assert ih.snapshot(project) == before  # settings.json as it was; no backup left behind
    listed = ch.claude_cli(claude_harness, e2e_home, project, "plugin", "list")
    assert "kijito-pull@kijito-pull" not in listed.stdout


def test_claude_user_scope_round_trip_without_settings(fresh: ih.FreshInstall, claude_harness: h.Harness,
                                                       e2e_home: Path, tmp_path: Path) -> None:
    project = ch.make_project(tmp_path)
    env = ih.user_env(e2e_home, fresh, Path(claude_harness.argv[0]).parent)
    settings = e2e_home / ".claude" / "settings.json"
    _ok(ih.kp(fresh, "install", "claude", "--user", env=env, cwd=project), "install")
    data = json.loads(settings.read_text())
    assert data["enabledPlugins"] == {"kijito-pull@kijito-pull": True}
    _ok(ih.kp(fresh, "uninstall", "claude", "--user", env=env, cwd=project), "uninstall")
    assert not settings.exists()


def test_claude_not_installed_exits_2_with_manual_steps(fresh: ih.FreshInstall, e2e_home: Path,
                                                        tmp_path: Path) -> None:
    project = ch.make_project(tmp_path)
    proc = ih.kp(fresh, "install", "claude", "--project", env=ih.user_env(e2e_home, fresh), cwd=project)
    assert proc.returncode == 2 and "claude plugin install kijito-pull@kijito-pull" in proc.stderr
    assert not (project / ".claude").exists()


# -- pi -----------------------------------------------------------------------------------------------------


def test_pi_install_round_trip(fresh: ih.FreshInstall, pi_harness: h.Harness, fake_model: FakeModel, sandbox,
                               e2e_home: Path, tmp_path: Path) -> None:
    project = ph.opt_in(tmp_path / "project")
    settings = project / ".pi" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(PI_SETTINGS)
    before = ih.snapshot(project)
    env = ih.user_env(e2e_home, fresh, ih.harness_bin(tmp_path, pi_harness, "pi"))

    out = _ok(ih.kp(fresh, "install", "pi", "--project", env=env, cwd=project), "install")
    assert "installed" in out
    again = _ok(ih.kp(fresh, "install", "pi", "--project", env=env, cwd=project), "second install")
    assert "already installed" in again

    # The real pi in RPC mode, no -e: the package loads from the project settings (pi 1.x: trusted).
    agent = h.write_pi_agent_dir(e2e_home / ".pi" / "agent", fake_model.url)
    run_env = h.pi_env(e2e_home, agent, {"KIJITO_BASE": sandbox.url, "KIJITOMON_TOKEN": ch.TOKEN,
                                         "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "PATH": env["PATH"]})
    trust = ["--approve"] if pi_harness.name == "pi1" else []
    argv = h.netns().wrap(h.pi_argv(pi_harness, mode="rpc", extra_args=trust))
    log = tmp_path / "unused.log"
    log.touch()
    with h.HarnessProcess(argv, env=run_env, cwd=project, name=f"{pi_harness.name}:installed") as proc:
        session = ph.PiSession(proc, fake_model, log)
        assert session.wait_status("watching", 30) is not None, session.diagnostics()
        sandbox.send(ch.PERSONA, "loom", "PI-VIA-INSTALL: the wheel's extension works")
        assert fake_model.wait_for_text("PI-VIA-INSTALL", timeout=15) is not None, session.diagnostics()

    out = _ok(ih.kp(fresh, "uninstall", "pi", "--project", env=env, cwd=project), "uninstall")
    assert "byte for byte" in out
    assert ih.snapshot(project) == before


# -- Codex ----------------------------------------------------------------------------------------------------


def test_codex_install_round_trip(fresh: ih.FreshInstall, sandbox, e2e_home: Path, tmp_path: Path) -> None:
    codex = h.require_harness("codex")
    project = ch.make_project(tmp_path)
    hooks = project / ".codex" / "hooks.json"
    hooks.parent.mkdir()
    hooks.write_text(CODEX_HOOKS)
    before = ih.snapshot(project)
    env = ih.user_env(e2e_home, fresh, Path(codex.argv[0]).parent)

    dry = _ok(ih.kp(fresh, "install", "codex", "--project", "--dry-run", env=env, cwd=project), "dry run")
    assert "hook codex-session-start" in dry and ih.snapshot(project) == before
    _ok(ih.kp(fresh, "install", "codex", "--project", env=env, cwd=project), "install")
    ours = ih.check_codex_hooks_shape(json.loads(hooks.read_text()))
    assert set(ours) == {"SessionStart", "Stop", "SessionEnd"}
    # The launcher in kijito-pull's data folder, which runs this installation first, by absolute path.
    launcher = e2e_home / ".local" / "share" / "kijito-pull" / "bin" / "kijito-pull-launch"
    assert ours["Stop"].split()[0] == str(launcher)
    assert f"HERE={fresh.kijito_pull}  # kijito-pull: the installer writes this line" in launcher.read_text()
    assert "already installed" in _ok(ih.kp(fresh, "install", "codex", "--project", env=env, cwd=project), "again")

    # The commands as Codex runs them, with Codex-shaped input. A PATH without any kijito-pull: the
    # launcher's absolute path to this installation is what makes them work from a desktop launcher too.
    hook_env = {**ch.hook_env(sandbox.url, tmp_path / "state"), "PATH": ih.SYSTEM_PATH, "HOME": str(e2e_home)}
    sandbox.send(ch.PERSONA, "loom", "CODEX-WAITING: read me first")
    start = ih.run_hook(ours["SessionStart"], ih.codex_payload("SessionStart", project), hook_env, project)
    assert start.returncode == 0, start.stderr
    context = json.loads(start.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart" and "CODEX-WAITING" in context["additionalContext"]
    nothing = ih.run_hook(ours["Stop"], ih.codex_payload("Stop", project), hook_env, project)
    assert (nothing.returncode, json.loads(nothing.stdout)) == (0, {})
    sandbox.send(ch.PERSONA, "loom", "CODEX-LATE: arrived mid-turn")
    block = json.loads(ih.run_hook(ours["Stop"], ih.codex_payload("Stop", project), hook_env, project).stdout)
    assert block["decision"] == "block" and "CODEX-LATE" in block["reason"]
    again = ih.run_hook(ours["Stop"], ih.codex_payload("Stop", project, stop_hook_active=True), hook_env, project)
    assert json.loads(again.stdout) == {}  # never twice for the same mail
    bad = ih.run_hook(ours["Stop"], "not json", hook_env, project)
    assert (bad.returncode, bad.stdout) == (0, "{}\n") and "the hook input is not valid JSON" in bad.stderr

    out = _ok(ih.kp(fresh, "uninstall", "codex", "--project", env=env, cwd=project), "uninstall")
    assert "byte for byte" in out
    assert ih.snapshot(project) == before
