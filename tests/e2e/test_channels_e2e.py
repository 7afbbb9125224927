"""kijito-pull installed through a harness's own plugin channel, from local artifacts only, with the pinned
real binary, in a fresh HOME where `kijito-pull` is NOT on PATH.

Claude Code: `claude plugin marketplace add <git URL of this repository>` then `claude plugin install
kijito-pull@kijito-pull`. The repository is a bare clone of this checkout's committed HEAD, served by a
smart-HTTP git server on the harnesses' loopback (tests/gitserver.py: Claude Code clones shallow, which
dumb HTTP cannot serve, and refuses file:// and git://). The plugin's hooks start kijito-pull through its
launcher, which finds no kijito-pull and runs `uvx --from kijito-pull==<version>` from a local wheel index
(this checkout's wheel and its dependencies', UV_OFFLINE=1).

- mail waiting at session start is in the first model request;
- a project that has not opted in sends Kijito no request;
- with neither kijito-pull nor uv on PATH, the session still runs and ends, and the launcher's one line
  of advice reaches the user (`claude -p` prints a failed SessionEnd hook on stderr);
- uninstalling through the channel (`plugin uninstall`, `marketplace remove`) removes the plugin and leaves
  the user's settings as they were but for the two keys Claude Code added and leaves behind, emptied.

Copilot CLI: `copilot plugin marketplace add <git URL>` reads the repository's .github/plugin/marketplace.json
(not Claude's) and installs plugins/copilot/, whose hooks (the ones `kijito-pull install copilot` writes, run
through the plugin's own launcher) hand waiting mail to the first model request with kijito-pull not on
PATH; installing the repository directly (`copilot plugin install <git URL>`) finds no plugin at its root
any more, so none of Claude's hooks.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kijito_pull import __version__
from tests import gitserver, wheelindex
from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h
from tests.e2e import install_helpers as ih
from tests.e2e.fakemodel import FakeModel

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/bin:/bin"  # no kijito-pull here (nor this checkout's .venv)
COPILOT_SETTINGS = '{\n  "theme": "dark"\n}\n'
USER_SETTINGS = '{\n  "permissions": {"allow": ["Bash(git status)"]},\n  "theme": "dark"\n}\n'


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """This checkout's wheel and its dependencies', standing in for PyPI."""
    root = tmp_path_factory.mktemp("index")
    return wheelindex.wheel_index(ih.build_wheel(root / "dist"), root / "wheels")


@pytest.fixture(scope="module")
def uv_dir(tmp_path_factory) -> Path:
    return wheelindex.uv_folder(tmp_path_factory.mktemp("uvbin"))


@pytest.fixture
def git_server(tmp_path: Path):
    """This checkout's committed HEAD as kijito/kijito-pull.git on the harnesses' loopback."""
    root = tmp_path / "git"
    gitserver.bare_clone(REPO, root, "kijito/kijito-pull")
    server = h.netns().call(lambda: gitserver.GitHttp(root).start())
    try:
        yield server
    finally:
        server.stop()


def claude_path(harness: h.Harness, *more: Path) -> str:
    return os.pathsep.join([str(Path(harness.argv[0]).parent), *map(str, more), SYSTEM_PATH])


def install_from_marketplace(harness: h.Harness, home: Path, project: Path, url: str) -> None:
    added = ch.claude_cli(harness, home, project, "plugin", "marketplace", "add", url, timeout=180)
    assert added.returncode == 0, added.stdout + added.stderr
    installed = ch.claude_cli(harness, home, project, "plugin", "install", "kijito-pull@kijito-pull", timeout=180)
    assert installed.returncode == 0, installed.stdout + installed.stderr


def test_claude_marketplace_from_a_git_url_without_kijito_pull_on_path(
        git_server, index: Path, uv_dir: Path, fake_model: FakeModel, sandbox, e2e_home: Path,
        tmp_path: Path) -> None:
    harness = h.require_harness("claude2")
    settings = e2e_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(USER_SETTINGS)
    project = ch.make_project(tmp_path)
    install_from_marketplace(harness, e2e_home, project, f"{git_server.url}/kijito/kijito-pull.git")
    assert any("git-upload-pack" in r for r in git_server.requests)
    cached = e2e_home / ".claude" / "plugins" / "cache" / "kijito-pull" / "kijito-pull" / __version__
    launcher = cached / "bin" / "kijito-pull-launch"
    assert launcher.is_file() and os.access(launcher, os.X_OK), sorted(p.name for p in cached.glob("*"))

    # Mail waiting at session start reaches the first model request, through uvx from the local index.
    sandbox.send(ch.PERSONA, "loom", "MAIL-VIA-MARKETPLACE: the plugin found its program")
    env = {**ch.hook_env(sandbox.url, tmp_path / "state"), "PATH": claude_path(harness, uv_dir),
           **wheelindex.uv_env(index, tmp_path / "uvcache")}
    result = h.run_claude_p(harness, "check in", base_url=fake_model.url, home=e2e_home, cwd=project, env=env,
                            timeout=150)
    assert result.returncode == 0, result.stderr[-3000:]
    convo = ch.conversation_requests(fake_model, "check in")
    assert convo and "MAIL-VIA-MARKETPLACE: the plugin found its program" in fake_model.text_of(convo[0]), \
        result.stderr[-3000:]

    # A project that has not opted in: no Kijito request at all.
    plain = ch.make_project(tmp_path, opted_in=False, name="plain")
    sandbox.clear_requests()
    result = h.run_claude_p(harness, "plain project", base_url=fake_model.url, home=e2e_home, cwd=plain, env=env,
                            timeout=150)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sandbox.requests == []

    # Uninstall through the channel: the user's settings file as it was.
    for argv in (("plugin", "uninstall", "kijito-pull@kijito-pull"),
                 ("plugin", "marketplace", "remove", "kijito-pull")):
        proc = ch.claude_cli(harness, e2e_home, project, *argv, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    # Claude Code 2.1.332 itself leaves the two keys it added, emptied (and rewrites the file in its own
    # style): all that differs. `kijito-pull uninstall claude` is the byte-for-byte way back.
    assert json.loads(settings.read_text()) == {**json.loads(USER_SETTINGS), "enabledPlugins": {},
                                                "extraKnownMarketplaces": {}}
    listed = ch.claude_cli(harness, e2e_home, project, "plugin", "list")
    assert listed.returncode == 0 and "kijito-pull@kijito-pull" not in listed.stdout, listed.stdout


def test_claude_marketplace_with_neither_kijito_pull_nor_uv_says_so_and_carries_on(
        git_server, fake_model: FakeModel, sandbox, e2e_home: Path, tmp_path: Path) -> None:
    harness = h.require_harness("claude2")
    project = ch.make_project(tmp_path)
    install_from_marketplace(harness, e2e_home, project, f"{git_server.url}/kijito/kijito-pull.git")
    env = {**ch.hook_env(sandbox.url, tmp_path / "state"), "PATH": claude_path(harness)}
    result = h.run_claude_p(harness, "no program", base_url=fake_model.url, home=e2e_home, cwd=project, env=env,
                            timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ch.conversation_requests(fake_model, "no program")  # the agent carried on
    advice = f"kijito-pull {__version__} is not installed, so the Kijito inbox is off"
    assert advice in result.stderr and f"uv tool install kijito-pull=={__version__}" in result.stderr, result.stderr
    assert "not found" not in result.stderr  # the launcher's line, not the shell's
    assert sandbox.requests == []


# -- the repository through another harness's channel: none of Claude's hooks ---------------------------------


def test_copilot_installing_this_repository_directly_finds_no_claude_hooks(git_server, e2e_home: Path,
                                                                          tmp_path: Path) -> None:
    """Copilot CLI installs a repository whose root holds `.claude-plugin/plugin.json` and `hooks/hooks.json`
    as its own plugin, Claude's hooks and all (measured at 6437a94: the claude-* handlers ran inside Copilot,
    a 604,800 s async waker among them). The Claude plugin now has its own folder: nothing at the root."""
    from tests.e2e import copilot_helpers as cp

    harness = h.require_harness("copilot")
    env = cp.copilot_env(harness, e2e_home, "http://127.0.0.1:9", "http://127.0.0.1:9", tmp_path / "state")
    proc = subprocess.run(h.netns().wrap(harness.cmd("plugin", "install", f"{git_server.url}/kijito/kijito-pull.git")),
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert any("git-upload-pack" in r for r in git_server.requests)  # it did fetch the repository
    assert proc.returncode != 0 and "No plugin.json found" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert not list((e2e_home / ".copilot").rglob("hooks.json"))


# -- Copilot CLI: its own marketplace (.github/plugin/marketplace.json) and plugin (plugins/copilot/) ---------


def test_copilot_marketplace_from_a_git_url_without_kijito_pull_on_path(
        git_server, index: Path, uv_dir: Path, fake_model: FakeModel, sandbox, e2e_home: Path,
        tmp_path: Path) -> None:
    from tests.e2e import copilot_helpers as cp

    harness = h.require_harness("copilot")
    state = tmp_path / "state"
    env = cp.copilot_env(harness, e2e_home, fake_model.url, sandbox.url, state)
    env.update({"PATH": os.pathsep.join([str(Path(harness.argv[0]).parent), str(uv_dir), SYSTEM_PATH]),
                **wheelindex.uv_env(index, tmp_path / "uvcache")})
    project = ch.make_project(tmp_path)
    settings = e2e_home / ".copilot" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(COPILOT_SETTINGS)
    for argv in (("plugin", "marketplace", "add", f"{git_server.url}/kijito/kijito-pull.git"),
                 ("plugin", "install", "kijito-pull@kijito-pull")):
        proc = subprocess.run(h.netns().wrap(harness.cmd(*argv)), env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    # Copilot took its own plugin (.github/plugin/marketplace.json), not the Claude Code one.
    installed = e2e_home / ".copilot" / "installed-plugins" / "kijito-pull" / "kijito-pull"
    hooks = json.loads((installed / "hooks" / "hooks.json").read_text())["hooks"]
    commands = [h_["command"] for groups in hooks.values() for g in groups for h_ in g["hooks"]]
    assert commands and all(" hook copilot-" in c for c in commands), commands
    assert os.access(installed / "bin" / "kijito-pull-launch", os.X_OK)

    # Mail waiting at session start is in the first model request (kijito-pull through uvx, offline).
    sandbox.send(ch.PERSONA, "loom", "MAIL-VIA-COPILOT-MARKETPLACE: the plugin found its program")
    run = cp.run_p(harness, env, project, "summarize the task", timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    first = cp.model_requests(fake_model)[0]
    assert "MAIL-VIA-COPILOT-MARKETPLACE" in fake_model.text_of(first), run.stderr[-3000:]

    # A project that has not opted in: no Kijito request.
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    sandbox.clear_requests()
    run = cp.run_p(harness, env, plain, "hello", timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert sandbox.requests == []

    # Uninstall through the channel.
    for argv in (("plugin", "uninstall", "kijito-pull@kijito-pull"),
                 ("plugin", "marketplace", "remove", "kijito-pull")):
        proc = subprocess.run(h.netns().wrap(harness.cmd(*argv)), env=env, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not installed.exists()
    # Copilot CLI 1.0.102, like Claude Code, leaves the two keys it added, emptied.
    assert json.loads(settings.read_text()) == {**json.loads(COPILOT_SETTINGS), "extraKnownMarketplaces": {},
                                                "enabledPlugins": {}}


# -- Gemini CLI: the repository's root is its extension (gemini-extension.json, hooks/hooks.json) --------------


def test_gemini_extension_from_a_git_url_without_kijito_pull_on_path(
        git_server, index: Path, uv_dir: Path, fake_model: FakeModel, sandbox, e2e_home: Path,
        tmp_path: Path) -> None:
    from tests.e2e import gemini_helpers as gm

    harness = h.require_harness("gemini")
    env = gm.gemini_env(harness, e2e_home, fake_model.url, sandbox.url, tmp_path / "state")
    env.update({"PATH": os.pathsep.join([str(gm.gemini_bin(harness)), str(uv_dir), SYSTEM_PATH]),
                **wheelindex.uv_env(index, tmp_path / "uvcache")})
    settings = gm.write_settings(e2e_home)
    before = settings.read_bytes()
    project = ch.make_project(tmp_path)
    (e2e_home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    url = f"{git_server.url}/kijito/kijito-pull.git"
    proc = subprocess.run(h.netns().wrap(harness.cmd("extensions", "install", url, "--consent")), env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    extension = e2e_home / ".gemini" / "extensions" / "kijito-pull"
    assert os.access(extension / "bin" / "kijito-pull-launch", os.X_OK)

    # Mail waiting at session start is in the first model request (kijito-pull through uvx, offline).
    sandbox.send(ch.PERSONA, "loom", "MAIL-VIA-GEMINI-EXTENSION: the extension found its program")
    run = gm.run_p(harness, env, project, "summarize the task", timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    first = gm.stream_requests(fake_model)[0]
    assert "MAIL-VIA-GEMINI-EXTENSION" in fake_model.text_of(first), run.stderr[-3000:]
    assert "Invalid hook event name" not in run.stderr  # Gemini's own hooks: no Claude event among them

    # A project that has not opted in: no Kijito request.
    plain = ch.make_project(tmp_path / "other", opted_in=False)
    trusted = json.loads((e2e_home / ".gemini" / "trustedFolders.json").read_text())
    (e2e_home / ".gemini" / "trustedFolders.json").write_text(json.dumps({**trusted, str(plain): "TRUST_FOLDER"}))
    sandbox.clear_requests()
    run = gm.run_p(harness, env, plain, "hello", timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert sandbox.requests == []

    # Uninstall through the channel: the user's settings file byte for byte.
    proc = subprocess.run(h.netns().wrap(harness.cmd("extensions", "uninstall", "kijito-pull")), env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not extension.exists()
    assert settings.read_bytes() == before


def test_gemini_and_copilot_with_neither_kijito_pull_nor_uv_say_so_and_carry_on(
        git_server, fake_model: FakeModel, sandbox, e2e_home: Path, tmp_path: Path) -> None:
    from tests.e2e import copilot_helpers as cp
    from tests.e2e import gemini_helpers as gm

    advice = f"kijito-pull {__version__} is not installed, so the Kijito inbox is off"
    url = f"{git_server.url}/kijito/kijito-pull.git"
    project = ch.make_project(tmp_path)
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOBODY-READS")
    # Gemini CLI 0.61.0 in -p names a failed hook on its stderr (the hook's own stderr only in the TUI's
    # debug drawer, F12): the launcher's line itself does not reach a `gemini -p` user.
    gemini = h.require_harness("gemini")
    env = gm.gemini_env(gemini, e2e_home, fake_model.url, sandbox.url, tmp_path / "state",
                        PATH=os.pathsep.join([str(gm.gemini_bin(gemini)), SYSTEM_PATH]))
    gm.write_settings(e2e_home)
    (e2e_home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    proc = subprocess.run(h.netns().wrap(gemini.cmd("extensions", "install", url, "--consent")), env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = gm.run_p(gemini, env, project, "gemini without a program", timeout=120)
    assert run.returncode == 0 and gm.stream_requests(fake_model), run.stderr[-3000:]
    assert "Hook(s) [gemini-session-start] failed for event SessionStart" in run.stderr, run.stderr[-3000:]
    # Copilot CLI, in -p, records a failed hook in the session's events.jsonl.
    copilot = h.require_harness("copilot")
    env = cp.copilot_env(copilot, e2e_home, fake_model.url, sandbox.url, tmp_path / "state")
    env["PATH"] = os.pathsep.join([str(Path(copilot.argv[0]).parent), SYSTEM_PATH])
    for argv in (("plugin", "marketplace", "add", url), ("plugin", "install", "kijito-pull@kijito-pull")):
        proc = subprocess.run(h.netns().wrap(copilot.cmd(*argv)), env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    run = cp.run_p(copilot, env, project, "copilot without a program", timeout=180)
    assert run.returncode == 0 and cp.model_requests(fake_model), run.stderr[-3000:]
    assert any(advice in p.read_text() for p in cp.records(e2e_home)), [p.read_text()[-2000:] for p in
                                                                          cp.records(e2e_home)]
    assert sandbox.requests == []
