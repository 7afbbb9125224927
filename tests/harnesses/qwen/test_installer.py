"""`kijito-pull install | uninstall qwen`, in-process on a private HOME: the hooks in Qwen Code's settings.json
(timeouts in seconds), everything else in the file kept byte for byte, --dry-run writing nothing, uninstall
giving the file back byte for byte (and removing a project file it created even after Qwen added its
`$version` to it), `$QWEN_HOME`, and doctor's `harness.qwen` and `qwen.trust`. The real Qwen Code reads what
this writes in tests/e2e/test_qwen_e2e.py.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses.qwen import installer

KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
USER_SETTINGS = ('{\n    "general": {"enableAutoUpdate": false},\n    "ui": {"theme": "Dracula"},\n'
                 '    "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "./mine.sh"}]}]},\n'
                 '    "$version": 4\n}\n')


class Machine:
    """A private HOME (Qwen's ~/.qwen in it) and a project folder."""

    def __init__(self, root: Path):
        self.home = root / "home"
        (self.home / ".qwen").mkdir(parents=True)
        self.project = root / "proj"
        (self.project / ".git").mkdir(parents=True)
        self.environ = {"HOME": str(self.home), "PATH": os.environ.get("PATH", ""),
                        "KIJITO_PULL_STATE_DIR": str(root / "state"), "KIJITO_PULL_CONFIG": os.devnull}
        self.settings = self.home / ".qwen" / "settings.json"

    def run(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                            environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def doctor(self) -> dict[str, dict]:
        _, out, _ = self.run("doctor", "--json", "--persona", "river")
        return {f["check"]: f for f in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}


@pytest.fixture
def m(tmp_path) -> Machine:
    return Machine(tmp_path)


def ours(path: Path) -> dict[str, dict]:
    data = json.loads(path.read_text())
    return {event: group["hooks"][0] for event, groups in data["hooks"].items() for group in groups
            if "kijito-pull" in group["hooks"][0]["command"]}


def test_user_install_adds_one_handler_per_event_in_seconds_and_uninstall_restores_the_bytes(m):
    m.settings.write_text(USER_SETTINGS)
    code, out, err = m.run("install", "qwen", "--user", "--dry-run")
    assert code == 0 and "hook qwen-prompt" in out, (out, err)
    assert m.settings.read_text() == USER_SETTINGS
    code, out, err = m.run("install", "qwen", "--user", "--command", KIJITO_PULL)
    assert code == 0, err
    found = ours(m.settings)
    assert {e: h["command"].split()[-1] for e, h in found.items()} == {
        "SessionStart": "qwen-session-start", "UserPromptSubmit": "qwen-prompt", "Stop": "qwen-stop",
        "SessionEnd": "qwen-session-end"}
    assert {e: h["timeout"] for e, h in found.items()} == {"SessionStart": 15, "UserPromptSubmit": 15, "Stop": 15,
                                                          "SessionEnd": 5}
    data = json.loads(m.settings.read_text())
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"] == "./mine.sh" and data["ui"] == {"theme": "Dracula"}
    assert m.doctor()["harness.qwen"]["verdict"] == "ok"
    assert m.run("install", "qwen", "--user", "--command", KIJITO_PULL)[1].count("already installed") == 1
    code, out, _ = m.run("uninstall", "qwen", "--user")
    assert code == 0 and "restored byte for byte" in out, out
    assert m.settings.read_text() == USER_SETTINGS


def test_qwen_home_moves_the_user_settings(m, tmp_path):
    m.environ["QWEN_HOME"] = str(tmp_path / "elsewhere")
    assert installer.settings_path("user", m.environ, m.project) == tmp_path / "elsewhere" / "settings.json"
    assert m.run("install", "qwen", "--user", "--command", KIJITO_PULL)[0] == 0
    assert ours(tmp_path / "elsewhere" / "settings.json") and not m.settings.exists()


def test_a_project_file_the_install_made_goes_even_after_qwen_added_its_version(m):
    assert m.run("install", "qwen", "--project", "--command", KIJITO_PULL)[0] == 0
    path = m.project / ".qwen" / "settings.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "$version": 4}, indent=2))  # what Qwen 0.24.4 does at its next start
    code, out, _ = m.run("uninstall", "qwen", "--project")
    assert code == 0 and "removed" in out, out
    assert not (m.project / ".qwen").exists()


def test_a_project_file_with_anything_else_in_it_is_edited_not_removed(m):
    assert m.run("install", "qwen", "--project", "--command", KIJITO_PULL)[0] == 0
    path = m.project / ".qwen" / "settings.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "$version": 4, "ui": {"theme": "X"}}, indent=2))
    assert m.run("uninstall", "qwen", "--project")[0] == 0
    assert json.loads(path.read_text()) == {"hooks": {}, "$version": 4, "ui": {"theme": "X"}} or \
        json.loads(path.read_text()) == {"$version": 4, "ui": {"theme": "X"}}


def test_folder_trust_on_warns_of_project_hooks_qwen_would_skip_and_names_the_fix(m):
    assert m.doctor()["qwen.trust"]["verdict"] == "ok"  # nothing of ours here
    m.settings.write_text(json.dumps({"security": {"folderTrust": {"enabled": True}}}))
    code, out, _ = m.run("install", "qwen", "--project", "--command", KIJITO_PULL)
    assert code == 0 and "folder trust is on" in out and "--user" in out, out
    found = m.doctor()["qwen.trust"]
    assert found["verdict"] == "warn" and "install qwen --user" in found["fix"], found
    folders = m.home / ".qwen" / "trustedFolders.json"
    folders.write_text(json.dumps({str(m.project.parent): "TRUST_FOLDER"}))  # a parent folder's rule holds it
    assert m.doctor()["qwen.trust"]["verdict"] == "ok"
    folders.write_text(json.dumps({str(m.project.parent): "TRUST_FOLDER", str(m.project): "DO_NOT_TRUST"}))
    assert m.doctor()["qwen.trust"]["verdict"] == "warn"  # the longest rule decides
    m.environ["QWEN_CODE_TRUSTED_FOLDERS_PATH"] = str(m.home / "other.json")
    (m.home / "other.json").write_text(json.dumps({str(m.project / "sub"): "TRUST_PARENT"}))  # trusts its parent
    assert m.doctor()["qwen.trust"]["verdict"] == "ok"
