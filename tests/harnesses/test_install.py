"""`kijito-pull install | uninstall`: the wheel carries the plugin files; each target's round trip is
idempotent, backs up what it edits, never clobbers other settings, prints exactly what --dry-run
promises, and uninstall gives a settings file back byte for byte.

The harness commands are fakes here (small Python scripts on PATH that edit the settings the way the
real ones do, and log their argv); tests/e2e/test_install_e2e.py runs the real Claude Code and pi.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kijito_pull import __version__
from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses import jsontext, plugin_files
from kijito_pull.harnesses.claude import installer as claude_inst
from kijito_pull.harnesses.codex import installer as codex_inst
from kijito_pull.harnesses.daemon import supervision
from kijito_pull.harnesses.installkit import Wiring
from kijito_pull.harnesses.registry import wiring

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugins" / "claude"  # the Claude Code plugin's own folder


# -- the wheel ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                           str(out), str(REPO)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:  # no hatchling in this environment: let pip fetch the build backend
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (found,) = out.glob("kijito_pull-*.whl")
    return found


def test_the_wheel_carries_the_plugin_the_extension_and_the_templates(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in plugin_files.CLAUDE_FILES:
        assert f"kijito_pull/data/claude-plugin/{rel}" in names
    for rel in plugin_files.PI_FILES:
        assert f"kijito_pull/data/pi/{rel}" in names
    assert "kijito_pull/harnesses/daemon/templates/kijito-pull@.service" in names
    assert "kijito_pull/harnesses/daemon/templates/com.kijito.pull.PERSONA.plist" in names
    # Byte for byte the repository's files (one copy to edit).
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("kijito_pull/data/claude-plugin/hooks/hooks.json") == (PLUGIN / "hooks/hooks.json").read_bytes()
        assert zf.read("kijito_pull/data/pi/extensions/kijito-pull.ts") == \
            (REPO / "extensions/kijito-pull.ts").read_bytes()


def test_plugin_files_are_found_in_a_checkout_and_in_package_data(tmp_path, monkeypatch):
    # This checkout: no kijito_pull/data, so the repository root.
    found = plugin_files.claude_plugin_files()
    assert found[".claude-plugin/plugin.json"] == PLUGIN / ".claude-plugin" / "plugin.json"
    assert plugin_files.pi_extension() == REPO / "extensions" / "kijito-pull.ts"
    # A wheel's layout wins when it is there.
    data = tmp_path / "data"
    for rel in plugin_files.CLAUDE_FILES:
        (data / "claude-plugin" / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / "claude-plugin" / rel).write_text("{}")
    monkeypatch.setattr(plugin_files, "DATA", data)
    assert plugin_files.bundle_root("claude-plugin") == data / "claude-plugin"
    assert plugin_files.bundle_root("pi") == REPO  # not in that data dir: the checkout's
    monkeypatch.setattr(plugin_files, "REPO_ROOT", tmp_path / "nowhere")
    with pytest.raises(plugin_files.MissingPluginFiles, match="reinstall kijito-pull"):
        plugin_files.bundle_root("pi")


# -- helpers --------------------------------------------------------------------------------------------------


class Machine:
    """A private HOME, a project (a git repository), a bin dir of fake harness commands first on PATH."""

    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.project = root / "proj"
        (self.project / ".git").mkdir(parents=True)
        (self.project / "sub").mkdir()
        self.bin = root / "bin"
        self.bin.mkdir()
        self.log = root / "argv.log"
        self.log.touch()
        self.environ = {"HOME": str(self.home), "PATH": str(self.bin),  # only the fakes (no real systemctl)
                        "USER": "tester", "FAKE_LOG": str(self.log)}

        # A `codex` that cannot be asked anything: install still writes the hooks and says it could not
        # ask Codex about trust (the real Codex's answers are proven in tests/e2e/test_codex_e2e.py).
        self.fake("codex", "import sys\nsys.exit(1)\n")

    def run(self, *argv: str, cwd: Path | None = None, env: dict | None = None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                            environ={**self.environ, **(env or {})}, cwd=str(cwd or self.project)))
        return code, out.getvalue(), err.getvalue()

    def fake(self, name: str, body: str) -> Path:
        path = self.bin / name
        path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
        path.chmod(0o755)
        return path

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def m(tmp_path) -> Machine:
    return Machine(tmp_path)


def snapshot(*paths: Path) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.exists() else None) for p in paths}


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


USER_SETTINGS = ('{\n    "permissions": {"allow": ["Bash(ls)"]},\n    "model": "opus",\n'
                 '    "enabledPlugins": {"other@x": true}\n}\n')


# -- Codex ------------------------------------------------------------------------------------------------------


def test_codex_round_trip_in_a_fresh_project_leaves_nothing_behind(m):
    before = tree(m.project)
    code, out, err = m.run("install", "codex", "--project")
    assert code == 0, err
    hooks = m.project / ".codex" / "hooks.json"
    data = json.loads(hooks.read_text())
    assert set(data) == {"hooks"} and set(data["hooks"]) == {"SessionStart", "Stop", "SessionEnd"}
    start = data["hooks"]["SessionStart"][0]["hooks"][0]
    assert start["type"] == "command" and start["timeout"] == codex_inst.TIMEOUT
    assert start["command"].endswith(" hook codex-session-start")
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"].endswith(" hook codex-stop")
    end = data["hooks"]["SessionEnd"][0]["hooks"][0]
    assert end["command"].endswith(" hook codex-session-end") and end["timeout"] == 5
    assert "installed" in out
    assert "could not ask Codex whether it trusts the hooks" in out  # the fake codex answers nothing
    code, out, err = m.run("uninstall", "codex", "--project")
    assert code == 0 and "removed" in out, (out, err)
    assert tree(m.project) == before
    assert not (m.project / ".codex").exists()


def test_codex_hooks_run_the_command_that_installed_them(m, tmp_path):
    """The hooks file names this installation's kijito-pull by absolute path, and that command answers
    Codex-shaped input with one JSON object."""
    assert m.run("install", "codex", "--user")[0] == 0
    data = json.loads((m.home / ".codex" / "hooks.json").read_text())
    command = data["hooks"]["Stop"][0]["hooks"][0]["command"]
    words = command.split()
    assert os.path.isabs(words[0]) and os.access(words[0], os.X_OK), command
    (m.project / "AGENTS.md").write_text("- inbox monitor: raise on start\n- inbox persona: river\n")
    payload = json.dumps({"session_id": "s1", "turn_id": "t1", "cwd": str(m.project), "hook_event_name": "Stop",
                          "stop_hook_active": False, "last_assistant_message": "ok", "model": "m",
                          "permission_mode": "default", "transcript_path": None})
    proc = subprocess.run(command, shell=True, input=payload, capture_output=True, text=True, cwd=m.project,
                          timeout=30, env={**os.environ, "KIJITOMON_TOKEN": "t", "KIJITO_BASE": "http://127.0.0.1:9",
                                           "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"),
                                           "KIJITO_PULL_HOOK_BUDGET": "2"})
    assert proc.returncode == 0 and json.loads(proc.stdout) == {}, (proc.stdout, proc.stderr)
    assert "codex-stop" in proc.stderr


CODEX_EXISTING = """{
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
    "Stop": [
      {"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}
    ]
  },
  "note": "mine"
}
"""


def test_codex_existing_file_keeps_everything_else_byte_for_byte(m):
    path = m.project / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text(CODEX_EXISTING)
    assert m.run("install", "codex", "--project")[0] == 0
    after = path.read_text()
    data = json.loads(after)
    assert data["note"] == "mine" and data["hooks"]["PreToolUse"] == json.loads(CODEX_EXISTING)["hooks"]["PreToolUse"]
    assert data["hooks"]["Stop"][0] == {"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}
    assert len(data["hooks"]["Stop"]) == 2
    # The user's lines are untouched: every original line is still there, in order.
    old_lines = CODEX_EXISTING.splitlines()
    new_lines = after.splitlines()
    it = iter(new_lines)
    assert all(any(line.rstrip(",") == n.rstrip(",") for n in it) for line in old_lines), after
    assert common.backup_path(path).read_text() == CODEX_EXISTING
    # Idempotent: a second install changes nothing, not even the backup.
    stamp = snapshot(path, common.backup_path(path))
    code, out, _ = m.run("install", "codex", "--project")
    assert code == 0 and "already installed" in out
    assert snapshot(path, common.backup_path(path)) == stamp
    # Uninstall: the original bytes, and the backup is gone (it equals the file now).
    code, out, _ = m.run("uninstall", "codex", "--project")
    assert code == 0 and "byte for byte" in out
    assert path.read_text() == CODEX_EXISTING
    assert not common.backup_path(path).exists()
    # Uninstalling again: nothing to do.
    code, out, _ = m.run("uninstall", "codex", "--project")
    assert code == 0 and "not installed" in out and path.read_text() == CODEX_EXISTING


def test_codex_dry_run_prints_the_exact_diff_and_changes_nothing(m):
    path = m.home / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text(CODEX_EXISTING)
    before = tree(m.home)
    code, out, err = m.run("install", "codex", "--dry-run")  # --user is the default
    assert code == 0, err
    assert tree(m.home) == before
    assert "dry run, nothing changed" in out
    diff = out[out.index("--- "):]
    # Apply the printed diff with patch(1): the result is what the real install writes.
    scratch = m.root / "scratch.json"
    scratch.write_text(CODEX_EXISTING)
    subprocess.run(["patch", "-s", str(scratch)], input=diff, text=True, check=True, timeout=30)
    assert m.run("install", "codex")[0] == 0
    assert scratch.read_bytes() == path.read_bytes()
    # And the uninstall's dry run shows the way back.
    code, out, _ = m.run("uninstall", "codex", "--dry-run")
    assert code == 0 and "+++ " in out and path.read_bytes() == scratch.read_bytes()


def test_codex_uninstall_after_other_edits_removes_only_ours(m):
    path = m.project / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text(CODEX_EXISTING)
    assert m.run("install", "codex", "--project")[0] == 0
    data = json.loads(path.read_text())
    data["added later"] = True
    path.write_text(json.dumps(data, indent=2) + "\n")
    code, out, _ = m.run("uninstall", "codex", "--project")
    assert code == 0 and "removed from" in out, out
    left = json.loads(path.read_text())
    expected = json.loads(CODEX_EXISTING)
    expected["added later"] = True
    assert left == expected
    assert "backup:" in out  # the file as it was before this uninstall
    backups = list(path.parent.glob("hooks.json.kijito-pull-*.bak"))
    assert len(backups) == 1 and codex_inst.our_handlers(json.loads(backups[0].read_text()))


def test_codex_reinstall_updates_a_moved_command_in_place(m):
    assert m.run("install", "codex", "--project", "--command", "/old/place/kijito-pull")[0] == 0
    path = m.project / ".codex" / "hooks.json"
    rows = wiring("codex", m.environ, str(m.project / "sub"))
    row = next(r for r in rows if r.scope == "project")
    assert row.installed and row.command == "/old/place/kijito-pull" and row.command_exists is False
    assert "does not exist" in row.detail
    code, out, _ = m.run("install", "codex", "--project")
    assert code == 0 and "installed" in out
    data = json.loads(path.read_text())
    assert [len(data["hooks"][e]) for e in ("SessionStart", "Stop")] == [1, 1]
    assert "/old/place" not in path.read_text()
    row = next(r for r in wiring("codex", m.environ, str(m.project)) if r.scope == "project")
    assert row.command_exists is True
    # Uninstall still gives the project back as it was: no file.
    assert m.run("uninstall", "codex", "--project")[0] == 0
    assert not path.exists()


def test_codex_install_refuses_without_codex_unless_told(m):
    (m.bin / "codex").unlink()
    hooks = m.project / ".codex" / "hooks.json"
    code, out, err = m.run("install", "codex", "--project")
    assert code == 2 and "`codex` command is not on PATH" in err and "--no-codex" in err
    assert not hooks.exists()
    code, out, err = m.run("install", "codex", "--project", "--no-codex")
    assert code == 0 and hooks.exists(), err
    assert "`codex` is not on PATH: run `kijito-pull install codex --project --trust` once it is" in out


@pytest.mark.parametrize("harness", ["codex", "claude", "pi"])
def test_a_dry_run_without_the_harness_command_agrees_for_every_harness(m, harness):
    """Without the harness's own command a dry run exits 0 and says the real install would stop there
    (Codex used to exit 2 where Claude Code and pi said so); nothing is written either way."""
    (m.bin / "codex").unlink()
    before = tree(m.root)
    code, out, err = m.run("install", harness, "--project", "--dry-run")
    assert (code, err) == (0, ""), err
    assert f"the `{harness}` command is not on PATH: the real install would stop here" in out
    assert tree(m.root) == before


def test_codex_refuses_a_file_it_cannot_parse(m):
    path = m.project / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text("{ not json")
    code, out, err = m.run("install", "codex", "--project")
    assert code == 2 and "is not valid JSON" in err and "nothing was changed" in err
    assert path.read_text() == "{ not json" and not common.backup_path(path).exists()


def test_codex_project_dir_option_and_git_root(m, tmp_path):
    # From a subfolder, --project means the repository root.
    assert m.run("install", "codex", "--project", cwd=m.project / "sub")[0] == 0
    assert (m.project / ".codex" / "hooks.json").exists()
    other = tmp_path / "other"
    other.mkdir()
    assert m.run("install", "codex", "--project", str(other))[0] == 0
    assert (other / ".codex" / "hooks.json").exists()
    assert m.run("install", "codex", "--project", str(tmp_path / "missing"))[0] == 2


def test_codex_home_override(m, tmp_path):
    home = tmp_path / "codex-home"
    assert m.run("install", "codex", "--user", env={"CODEX_HOME": str(home)})[0] == 0
    assert (home / "hooks.json").exists() and not (m.home / ".codex").exists()


# -- Claude Code (a fake `claude` that edits settings as 2.1.197 does) -----------------------------------------

FAKE_CLAUDE = r'''
import json, os, sys
from pathlib import Path
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(["claude", *sys.argv[1:]]) + "\n")
args = sys.argv[1:]
scope = args[args.index("--scope") + 1] if "--scope" in args else "user"
config = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path(os.environ["HOME"]) / ".claude")
settings = config / "settings.json" if scope == "user" else Path.cwd() / ".claude" / "settings.json"
registry = config / "plugins" / "installed_plugins.json"
def load(p, default):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return default
def save(p, data):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=2))  # its own style: 2 spaces, no final newline
data = load(settings, {})
reg = load(registry, {"version": 2, "plugins": {}})
if args[:3] == ["plugin", "marketplace", "add"]:
    src = args[3]
    name = json.loads((Path(src) / ".claude-plugin" / "marketplace.json").read_text())["name"]
    markets = data.pop("extraKnownMarketplaces", {})  # it moves the key to the end
    markets[name] = {"source": {"source": "directory", "path": src}}
    data["extraKnownMarketplaces"] = markets
    save(settings, data)
elif args[:2] == ["plugin", "install"]:
    data.setdefault("enabledPlugins", {})[args[2]] = True
    save(settings, data)
    row = {"scope": scope, "installPath": "x", "version": "0.1.0"}
    if scope == "project":
        row["projectPath"] = str(Path.cwd())
    reg["plugins"].setdefault(args[2], []).append(row)
    save(registry, reg)
elif args[:2] == ["plugin", "uninstall"]:
    data.setdefault("enabledPlugins", {}).pop(args[2], None)
    save(settings, data)
    rows = [r for r in reg["plugins"].get(args[2], []) if r["scope"] != scope]
    reg["plugins"][args[2]] = rows
    if not rows:
        del reg["plugins"][args[2]]
    save(registry, reg)
elif args[:3] == ["plugin", "marketplace", "remove"]:
    data.setdefault("extraKnownMarketplaces", {}).pop(args[3], None)
    save(settings, data)
elif args[:2] == ["plugin", "update"]:
    pass
else:
    sys.exit(f"fake claude: unexpected {args}")
'''


def test_claude_project_round_trip_is_byte_for_byte(m):
    m.fake("claude", FAKE_CLAUDE)
    path = m.project / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(USER_SETTINGS)
    code, out, err = m.run("install", "claude", "--project")
    assert code == 0, err
    plugin = common.data_dir(m.environ) / "claude-plugin"
    assert [c[1:] for c in m.calls()] == [
        ["plugin", "marketplace", "add", str(plugin), "--scope", "project"],
        ["plugin", "install", "kijito-pull@kijito-pull", "--scope", "project"]]
    assert (plugin / "hooks" / "hooks.json").read_bytes() == (PLUGIN / "hooks" / "hooks.json").read_bytes()
    data = json.loads(path.read_text())
    assert data["enabledPlugins"] == {"other@x": True, "kijito-pull@kijito-pull": True}
    assert data["extraKnownMarketplaces"]["kijito-pull"]["source"] == {"source": "directory", "path": str(plugin)}
    # Put back in the user's style, not the fake's: the user's lines are still there as they were.
    text = path.read_text()
    assert text.startswith('{\n    "permissions": {"allow": ["Bash(ls)"]},\n    "model": "opus",\n')
    assert text.endswith("}\n")
    assert common.backup_path(path).read_text() == USER_SETTINGS
    rows = [r for r in wiring("claude", m.environ, str(m.project)) if r.scope == "project"]
    assert rows and rows[0].installed and rows[0].path == str(path)
    # Idempotent.
    calls = len(m.calls())
    stamp = snapshot(path, common.backup_path(path))
    code, out, _ = m.run("install", "claude", "--project")
    assert code == 0 and "already installed" in out and len(m.calls()) == calls
    assert snapshot(path, common.backup_path(path)) == stamp
    # Uninstall: Claude's own commands, then the settings as they were, byte for byte.
    code, out, err = m.run("uninstall", "claude", "--project")
    assert code == 0, err
    assert [c[1:3] for c in m.calls()[calls:]] == [["plugin", "uninstall"], ["plugin", "marketplace"]]
    assert path.read_text() == USER_SETTINGS
    assert not common.backup_path(path).exists()
    assert not plugin.exists()  # no scope uses the plugin files any more


def test_claude_project_is_the_folder_claude_starts_in(m):
    """Claude Code loads a project-scope plugin only when started in that folder: --project from a
    subfolder wires the subfolder (Codex, by contrast, takes the repository root)."""
    m.fake("claude", FAKE_CLAUDE)
    assert m.run("install", "claude", "--project", cwd=m.project / "sub")[0] == 0
    assert (m.project / "sub" / ".claude" / "settings.json").exists()
    assert not (m.project / ".claude").exists()
    assert m.run("install", "claude", "--project")[0] == 0
    rows = [r for r in wiring("claude", m.environ, str(m.project / "sub")) if r.scope == "project"]
    assert [r.path for r in rows] == [str(m.project / "sub" / ".claude" / "settings.json"),
                                      str(m.project / ".claude" / "settings.json")]
    assert "not in" not in rows[0].detail and f"when started in {m.project}" in rows[1].detail


def test_claude_round_trip_without_a_settings_file_removes_it_again(m):
    m.fake("claude", FAKE_CLAUDE)
    before = tree(m.project)
    assert m.run("install", "claude", "--project")[0] == 0
    path = m.project / ".claude" / "settings.json"
    assert path.read_text().endswith("}\n")  # ours, not the fake's style
    assert m.run("uninstall", "claude", "--project")[0] == 0
    assert tree(m.project) == before and not (m.project / ".claude").exists()


def test_claude_dry_run_shows_commands_and_diff_and_changes_nothing(m):
    m.fake("claude", FAKE_CLAUDE)
    path = m.home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(USER_SETTINGS)
    before = tree(m.root)
    code, out, err = m.run("install", "claude", "--user", "--dry-run")
    assert code == 0, err
    assert tree(m.root) == before and m.calls() == []
    assert "run: " in out and "claude plugin marketplace add" in out and "--scope user" in out
    diff = out[out.index("--- "):]
    scratch = m.root / "scratch.json"
    scratch.write_text(USER_SETTINGS)
    subprocess.run(["patch", "-s", str(scratch)], input=diff, text=True, check=True, timeout=30)
    assert m.run("install", "claude", "--user")[0] == 0
    assert path.read_bytes() == scratch.read_bytes()


def test_claude_missing_says_how_by_hand_and_exits_2(m):
    code, out, err = m.run("install", "claude", "--project")
    assert code == 2
    assert "`claude` command is not on PATH" in err and "claude plugin marketplace add" in err
    assert "--scope project" in err
    assert not (m.project / ".claude").exists()
    # The dry run still shows the plan, and says the real one would stop.
    code, out, _ = m.run("install", "claude", "--project", "--dry-run")
    assert code == 0 and "would stop here" in out


def test_claude_uninstall_keeps_the_marketplace_while_another_scope_uses_it(m):
    m.fake("claude", FAKE_CLAUDE)
    assert m.run("install", "claude", "--user")[0] == 0
    assert m.run("install", "claude", "--project")[0] == 0
    calls = len(m.calls())
    assert m.run("uninstall", "claude", "--project")[0] == 0
    # Only `plugin uninstall`: `marketplace remove` would drop it for the user scope too.
    assert [c[1:3] for c in m.calls()[calls:]] == [["plugin", "uninstall"]]
    assert not (m.project / ".claude").exists()
    assert (common.data_dir(m.environ) / "claude-plugin").exists()
    user = [r for r in wiring("claude", m.environ, str(m.project)) if r.scope == "user"]
    assert user and user[0].installed


def test_claude_wiring_says_how_the_hooks_find_kijito_pull(m):
    m.fake("claude", FAKE_CLAUDE)
    assert m.run("install", "claude", "--user")[0] == 0
    rows = wiring("claude", m.environ, str(m.project))
    (row,) = [r for r in rows if r.scope == "user"]
    assert isinstance(row, Wiring) and row.installed
    # The installed launcher tries the installing kijito-pull first (this test's own).
    assert row.command == common.this_command()[0] and row.command_exists is True
    assert "the kijito-pull that installed them" in row.detail
    # The launcher as a marketplace ships it (no installing command): PATH, then uvx, else nothing.
    launcher = claude_inst.plugin_dir(m.environ) / plugin_files.LAUNCHER
    launcher.write_bytes(plugin_files.launcher().read_bytes())
    (row,) = [r for r in wiring("claude", m.environ, str(m.project)) if r.scope == "user"]
    assert row.command == "kijito-pull" and row.command_exists is False  # neither on this PATH
    assert "neither kijito-pull nor uv is on this PATH" in row.detail and str(launcher) in row.detail
    uvx = m.fake("uvx", "")
    (row,) = [r for r in wiring("claude", m.environ, str(m.project)) if r.scope == "user"]
    assert row.command_exists is True and f"uvx --from kijito-pull=={__version__}" in row.detail
    uvx.unlink()
    (m.bin / "kijito-pull").write_text("#!/bin/sh\n")
    (m.bin / "kijito-pull").chmod(0o755)
    (row,) = [r for r in wiring("claude", m.environ, str(m.project)) if r.scope == "user"]
    assert row.command == str(m.bin / "kijito-pull") and row.command_exists is True
    assert "kijito-pull on PATH" in row.detail


# -- pi (a fake `pi` that edits settings as pi does) -----------------------------------------------------------

FAKE_PI = r'''
import json, os, sys
from pathlib import Path
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(["pi", *sys.argv[1:]]) + "\n")
args = sys.argv[1:]
if args == ["--version"]:
    print(os.environ.get("FAKE_PI_VERSION", "0.73.1"))
    sys.exit(0)
local = "-l" in args
agent = Path(os.environ.get("PI_CODING_AGENT_DIR") or Path(os.environ["HOME"]) / ".pi" / "agent")
settings = Path.cwd() / ".pi" / "settings.json" if local else agent / "settings.json"
try:
    data = json.loads(settings.read_text())
except (OSError, ValueError):
    data = {}
entry = os.path.relpath(args[1], settings.parent)
packages = data.setdefault("packages", [])
if args[0] == "install":
    if entry not in packages:
        packages.append(entry)
elif args[0] == "remove":
    if entry not in packages:
        print("No matching package found", file=sys.stderr)
        sys.exit(1)
    packages.remove(entry)
settings.parent.mkdir(parents=True, exist_ok=True)
settings.write_text(json.dumps(data, indent=2))
'''


@pytest.mark.parametrize("version,approve", [("0.73.1", False), ("1.6.0", True)])
def test_pi_project_round_trip(m, version, approve):
    m.fake("pi", FAKE_PI)
    env = {"FAKE_PI_VERSION": version}
    path = m.project / ".pi" / "settings.json"
    path.parent.mkdir()
    original = '{\n  "theme": "dark",\n  "packages": ["npm:other-thing"]\n}\n'
    path.write_text(original)
    code, out, err = m.run("install", "pi", "--project", env=env)
    assert code == 0, err
    package = common.data_dir(m.environ) / "pi"
    installs = [c for c in m.calls() if c[1] == "install"]
    assert installs == [["pi", "install", str(package), "-l", *(["--approve"] if approve else [])]]
    assert (package / "extensions" / "kijito-pull.ts").read_bytes() == (REPO / "extensions/kijito-pull.ts").read_bytes()
    assert json.loads((package / "package.json").read_text())["pi"] == {"extensions": ["./extensions/kijito-pull.ts"]}
    data = json.loads(path.read_text())
    assert data["packages"] == ["npm:other-thing", os.path.relpath(package, path.parent)]
    assert path.read_text().startswith('{\n  "theme": "dark",\n  "packages": ["npm:other-thing", ')  # inline kept
    (row,) = [r for r in wiring("pi", m.environ, str(m.project)) if r.scope == "project"]
    assert row.installed and str(package) in row.detail and "trusted" in row.detail
    calls = len(m.calls())
    code, out, _ = m.run("install", "pi", "--project", env=env)
    assert code == 0 and "already installed" in out and len(m.calls()) == calls
    code, out, err = m.run("uninstall", "pi", "--project", env=env)
    assert code == 0, err
    assert path.read_text() == original and not common.backup_path(path).exists()


def test_pi_user_round_trip_with_an_agent_dir_override(m, tmp_path):
    m.fake("pi", FAKE_PI)
    agent = tmp_path / "agent"
    env = {"PI_CODING_AGENT_DIR": str(agent)}
    assert m.run("install", "pi", "--user", env=env)[0] == 0
    assert json.loads((agent / "settings.json").read_text())["packages"]
    (row,) = [r for r in wiring("pi", {**m.environ, **env}, str(m.project)) if r.scope == "user"]
    assert row.installed and row.path == str(agent / "settings.json")
    assert m.run("uninstall", "pi", "--user", env=env)[0] == 0
    assert not (agent / "settings.json").exists()


def test_pi_missing_exits_2_with_the_manual_steps(m):
    code, out, err = m.run("install", "pi", "--user")
    assert code == 2 and "`pi` command is not on PATH" in err and "pi install" in err
    assert not (m.home / ".pi").exists()


def test_pi_uninstall_without_pi_edits_the_settings_itself(m):
    m.fake("pi", FAKE_PI)
    assert m.run("install", "pi", "--user")[0] == 0
    (m.bin / "pi").unlink()
    code, out, err = m.run("uninstall", "pi", "--user")
    assert code == 0 and "not on PATH" in out, (out, err)
    assert not (m.home / ".pi" / "agent" / "settings.json").exists()


# -- the daemon (fake systemctl, loginctl, launchctl) ---------------------------------------------------------

FAKE_CTL = r'''
import json, os, sys
from pathlib import Path
name = os.path.basename(sys.argv[0])
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps([name, *sys.argv[1:]]) + "\n")
state = Path(os.environ["FAKE_LOG"]).with_name(name + ".state")
on = set(state.read_text().split()) if state.exists() else set()
args = [a for a in sys.argv[1:] if a != "--user"]
if name == "loginctl":
    print("Linger=" + os.environ.get("FAKE_LINGER", "no"))
elif name == "systemctl":
    if args[0] == "is-enabled":
        print("enabled" if args[1] in on else "disabled"); sys.exit(0 if args[1] in on else 1)
    if args[0] == "is-active":
        print("active" if args[1] in on else "inactive"); sys.exit(0 if args[1] in on else 3)
    if args[0] == "enable":
        on.add(args[-1])
    if args[0] == "disable":
        on.discard(args[-1])
elif name == "launchctl":
    if args[0] == "print":
        sys.exit(0 if args[1] in on else 113)
    if args[0] == "bootstrap":
        on.add(args[1] + "/" + Path(args[2]).stem)
    if args[0] == "bootout":
        on.discard(args[1])
state.write_text(" ".join(sorted(on)))
'''


def test_daemon_systemd_round_trip(m):
    for name in ("systemctl", "loginctl"):
        m.fake(name, FAKE_CTL)
    unit = m.home / ".config" / "systemd" / "user" / "kijito-pull@.service"
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--dry-run")
    assert code == 0, err
    assert not unit.exists() and [c for c in m.calls() if c[0] == "systemctl" and c[2] == "enable"] == []
    assert "run: " in out and "enable --now kijito-pull@river.service" in out
    assert "+ExecStart=" in out and "lingering is off" in out
    assert "no token file" in out
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "systemd")
    assert code == 0, err
    assert unit.read_text() == supervision.render_systemd()
    ctl = [c[1:] for c in m.calls() if c[0] == "systemctl"]
    assert ["--user", "daemon-reload"] in ctl and ["--user", "enable", "--now", "kijito-pull@river.service"] in ctl
    assert "lingering is off" in out and "loginctl enable-linger tester" in out
    (row,) = wiring("daemon", m.environ, str(m.project))
    assert row.installed and row.path == str(unit)
    # Twice: nothing changes, nothing is enabled again.
    calls = len(m.calls())
    code, out, _ = m.run("install", "daemon", "--persona", "river", "--system", "systemd", env={"FAKE_LINGER": "yes"})
    assert code == 0 and "already installed" in out and "lingering is on" in out
    assert not [c for c in m.calls()[calls:] if c[0] == "systemctl" and c[2] in ("enable", "daemon-reload")]
    code, out, err = m.run("uninstall", "daemon", "--persona", "river", "--system", "systemd")
    assert code == 0, err
    assert ["systemctl", "--user", "disable", "--now", "kijito-pull@river.service"] in m.calls()
    assert not unit.exists()


def test_daemon_persona_from_the_project_and_missing_systemctl(m):
    (m.project / "AGENTS.md").write_text("- inbox monitor: raise on start\n- inbox persona: brook\n")
    code, out, err = m.run("install", "daemon", "--system", "systemd", "--dry-run")
    assert code == 0 and "kijito-pull@brook.service" in out, err
    code, out, err = m.run("install", "daemon", "--system", "systemd")
    assert code == 2 and "systemctl" in err
    (m.project / "AGENTS.md").unlink()
    code, out, err = m.run("install", "daemon", "--system", "systemd", "--dry-run")
    assert code == 2 and "--persona" in err


def test_daemon_launchd_round_trip(m):
    m.fake("launchctl", FAKE_CTL)
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "launchd")
    assert code == 0, err
    plist = m.home / "Library" / "LaunchAgents" / "com.kijito.pull.river.plist"
    assert plist.read_text() == supervision.render_launchd(None, "river", str(m.home))
    assert ["launchctl", "bootstrap", f"gui/{os.getuid()}", str(plist)] in m.calls()
    assert any(r.path == str(plist) and r.installed for r in wiring("daemon", m.environ, str(m.project)))
    code, out, _ = m.run("install", "daemon", "--persona", "river", "--system", "launchd")
    assert code == 0 and "already installed" in out
    assert m.run("uninstall", "daemon", "--persona", "river", "--system", "launchd")[0] == 0
    assert not plist.exists()


# -- the command line -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["install", "--help"], ["uninstall", "--help"], ["install", "claude", "--help"],
                                  ["install", "pi", "--help"], ["install", "codex", "--help"],
                                  ["install", "daemon", "--help"], ["uninstall", "codex", "--help"]])
def test_help(m, argv):
    code, out, _ = m.run(*argv)
    assert code == 0 and "usage: kijito-pull" in out


def test_install_without_a_target_is_a_usage_error(m):
    assert m.run("install")[0] == 2
    assert m.run("install", "emacs")[0] == 2
    assert m.run("install", "codex", "--project", "--user")[0] == 2


def test_quiet_install_prints_nothing(m):
    code, out, err = m.run("install", "codex", "--project", "-q")
    assert (code, out, err) == (0, "", "")
    code, out, err = m.run("uninstall", "-q", "codex", "--project")
    assert (code, out, err) == (0, "", "")


def test_wiring_api_shape(m):
    for harness in ("claude", "pi", "codex", "daemon"):
        assert wiring(harness, m.environ, str(m.project)) == []
    with pytest.raises(ValueError):
        wiring("emacs", m.environ, str(m.project))


def test_claude_entries_helpers():
    env = {"HOME": "/h"}
    data = claude_inst.with_ours({"enabledPlugins": {"a@b": True}}, env)
    assert claude_inst.is_ours(data, env)
    assert claude_inst.without_ours(data, env) == {"enabledPlugins": {"a@b": True}, "extraKnownMarketplaces": {}}


# -- editing JSON text in place -------------------------------------------------------------------------------

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=6), kids, max_size=3)), max_leaves=12)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


@settings(max_examples=300, deadline=None)
@given(old=json_objects, extra=json_objects, indent=st.sampled_from([None, 2, 4, "\t"]),
       nested=st.booleans())
def test_patch_adds_and_leaves_the_rest_alone(old, extra, indent, nested):
    text = json.dumps(old, indent=indent)
    new = json.loads(json.dumps(old))
    target = new
    if nested:
        target = new.setdefault("hooks", {}) if isinstance(new.get("hooks", {}), dict) else new
    for key, value in extra.items():
        target.setdefault(key, value)
    out = jsontext.patch(text, old, new, indent if indent is not None else 2)
    assert out is not None
    assert json.loads(out) == new
    if new == old:
        assert out == text


def test_patch_keeps_inline_parts_and_declines_removals():
    text = '{\n  "a": {"x": [1, 2]},\n  "b": 1\n}\n'
    out = jsontext.patch(text, json.loads(text), {"a": {"x": [1, 2]}, "b": 1, "c": {"d": True}})
    assert out == '{\n  "a": {"x": [1, 2]},\n  "b": 1,\n  "c": {\n    "d": true\n  }\n}\n'
    assert jsontext.patch(text, json.loads(text), {"a": {"x": [1, 2]}}) is None
    assert jsontext.patch('{"a": 1, "a": 2}', {"a": 2}, {"a": 2, "b": 1}) is None  # duplicate keys: rewrite


def test_restore_prunes_only_the_empties_we_left():
    assert common.prune_empty({"a": {}, "b": [], "c": {"d": {}}}, {"b": []}) == {"b": []}
    assert common.prune_empty({"c": {"d": {}}}, {"c": {}}) == {"c": {}}


def test_claude_install_with_source_writes_it_into_every_hook_command_and_a_plain_install_takes_it_out(m):
    m.fake("claude", FAKE_CLAUDE)
    code, _out, err = m.run("install", "claude", "--project", "--source", "redis://10.0.0.5:6379/0",
                            "--consumer", "ci")
    assert code == 0, err
    plugin = common.data_dir(m.environ) / "claude-plugin"
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())
    commands = [h["command"] for groups in hooks["hooks"].values() for g in groups for h in g["hooks"]]
    assert commands and all(c.startswith('"${CLAUDE_PLUGIN_ROOT}/bin/kijito-pull-launch" hook claude-')
                            and c.endswith(" --source redis://10.0.0.5:6379/0 --consumer ci") for c in commands)
    # Installed again without them: the plugin's own hooks.json again (Claude Code told to update it).
    code, _out, err = m.run("install", "claude", "--project")
    assert code == 0, err
    assert (plugin / "hooks" / "hooks.json").read_bytes() == (PLUGIN / "hooks" / "hooks.json").read_bytes()
    assert m.calls()[-1][1:3] == ["plugin", "update"]
    # A password in the URL is refused before anything is written: exit 2, one line, the secret not echoed.
    code, out, err = m.run("install", "claude", "--project", "--source", "redis://:s3cret@10.0.0.5:6379/0")
    assert code == 2 and "s3cret" not in out + err and len(err.strip().splitlines()) == 1, err
    assert (plugin / "hooks" / "hooks.json").read_bytes() == (PLUGIN / "hooks" / "hooks.json").read_bytes()
