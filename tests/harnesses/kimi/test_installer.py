"""`kijito-pull install | uninstall kimi`, in-process on a private HOME: the hooks as `[[hooks]]` tables in Kimi
Code CLI's config.toml (timeouts in seconds), every other byte of the file kept, --dry-run showing exactly
what a real run writes, uninstall giving the file back byte for byte, no project scope, and the TOML edge
cases the text edit must refuse rather than damage. The real Kimi Code CLI reads what this writes in
tests/e2e/test_kimi_e2e.py.
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
from kijito_pull.harnesses import installkit, plugin_files
from kijito_pull.harnesses.launcher import MARKER
from kijito_pull.harnesses.tomlhooks import tomllib  # the standard library's, or tomli before Python 3.11

KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
USER_CONFIG = ('# my Kimi settings\ndefault_model = "fake"\n\n[providers.fake]\ntype = "openai"\n'
               'base_url = "http://127.0.0.1:9/v1"\napi_key = "dummy"\n\n'
               '[[hooks]]\nevent = "PreToolUse"\ncommand = "./mine.sh"   # mine\n\n# trailing words\n')


class Machine:
    """A private HOME (Kimi's ~/.kimi-code in it) and a project folder."""

    def __init__(self, root: Path):
        self.home = root / "home"
        (self.home / ".kimi-code").mkdir(parents=True)
        self.project = root / "proj"
        (self.project / ".git").mkdir(parents=True)
        self.environ = {"HOME": str(self.home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
                        "KIJITO_PULL_STATE_DIR": str(root / "state"), "KIJITO_PULL_CONFIG": os.devnull}
        self.config = self.home / ".kimi-code" / "config.toml"
        #: what the hooks run without --command: the launcher in kijito-pull's data folder, as every installer's
        self.launcher = installkit.data_dir(self.environ) / plugin_files.LAUNCHER

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
    return {h["event"]: h for h in tomllib.loads(path.read_text()).get("hooks", []) if "kijito-pull" in h["command"]}


def test_user_install_appends_three_tables_and_uninstall_restores_the_file(m):
    m.config.write_text(USER_CONFIG)
    code, out, err = m.run("install", "kimi", "--user")
    assert code == 0, err
    assert "kimi (user scope): installed" in out
    text = m.config.read_text()
    assert text.startswith(USER_CONFIG)  # appended: every byte of the user's kept
    found = ours(m.config)
    assert set(found) == {"UserPromptSubmit", "Stop", "SessionEnd"}
    assert found["UserPromptSubmit"] == {"event": "UserPromptSubmit", "command": f"{m.launcher} hook kimi-prompt",
                                         "timeout": 15}
    assert os.access(m.launcher, os.X_OK)
    assert found["Stop"]["command"].endswith("hook kimi-stop") and found["SessionEnd"]["timeout"] == 5
    assert tomllib.loads(text)["hooks"][0] == {"event": "PreToolUse", "command": "./mine.sh"}
    assert m.run("install", "kimi", "--user")[1].count("already installed") == 1
    code, out, _ = m.run("uninstall", "kimi", "--user")
    assert code == 0 and "restored byte for byte" in out, out
    assert m.config.read_text() == USER_CONFIG
    assert m.run("uninstall", "kimi", "--user")[1].count("not installed") == 1


def test_dry_run_shows_exactly_what_the_real_run_writes_and_writes_nothing(m):
    m.config.write_text(USER_CONFIG)
    code, out, _ = m.run("install", "kimi", "--user", "--dry-run")
    assert code == 0 and "dry run" in out
    assert m.config.read_text() == USER_CONFIG
    added = [line[1:] for line in out.splitlines() if line.startswith("+") and not line.startswith("+++")]
    m.run("install", "kimi", "--user")
    assert m.config.read_text() == USER_CONFIG + "\n".join(added) + "\n"
    code, out, _ = m.run("uninstall", "kimi", "--user", "--dry-run")
    assert code == 0 and "-[[hooks]]" in out
    assert ours(m.config)


def test_a_file_the_install_made_is_removed_again_and_a_missing_newline_comes_back(m):
    assert not m.config.exists()
    m.run("install", "kimi", "--user")
    assert m.config.read_text().startswith("[[hooks]]\n") and len(ours(m.config)) == 3
    m.run("uninstall", "kimi", "--user")
    assert not m.config.exists()
    m.config.write_bytes(b'default_model = "fake"')  # no final newline
    m.run("install", "kimi", "--user")
    m.run("uninstall", "kimi", "--user")
    assert m.config.read_bytes() == b'default_model = "fake"'


def test_a_moved_kijito_pull_is_updated_and_uninstall_still_gives_the_first_bytes_back(m):
    m.config.write_text(USER_CONFIG)
    m.run("install", "kimi", "--user", "--command", "/old/bin/kijito-pull")
    assert ours(m.config)["Stop"]["command"] == "/old/bin/kijito-pull hook kimi-stop"
    code, out, _ = m.run("install", "kimi", "--user", "--source", "redis://127.0.0.1:6379/0", "--consumer", "kimi-a")
    assert code == 0 and "installed" in out
    stop = ours(m.config)["Stop"]["command"]
    assert stop == f"{m.launcher} hook kimi-stop --source redis://127.0.0.1:6379/0 --consumer kimi-a"
    assert m.config.read_text().count("[[hooks]]") == 4  # theirs, and ours once each
    m.run("uninstall", "kimi", "--user")
    assert m.config.read_text() == USER_CONFIG


def test_a_change_of_the_users_after_the_install_is_kept_by_uninstall(m):
    m.config.write_text(USER_CONFIG)
    m.run("install", "kimi", "--user")
    m.config.write_text(m.config.read_text() + '\n[ui]\ntheme = "dark"\n')
    code, out, _ = m.run("uninstall", "kimi", "--user")
    assert code == 0 and "kijito-pull's hooks removed" in out, out
    assert tomllib.loads(m.config.read_text()) == {**tomllib.loads(USER_CONFIG), "ui": {"theme": "dark"}}
    assert list(m.config.parent.glob("config.toml.*")), "the file as it was is kept in a backup"


@pytest.mark.parametrize("content", ['hooks = []\n', 'default_model = "x\n', '[hooks]\nx = 1\n'])
def test_a_file_that_cannot_be_edited_safely_is_never_rewritten(m, content):
    m.config.write_text(content)
    code, _, err = m.run("install", "kimi", "--user")
    assert code != 0 and str(m.config) in err, err
    assert m.config.read_text() == content


def test_a_file_that_cannot_be_edited_names_the_very_tables_install_writes(m):
    m.config.write_text("hooks = []\n")
    code, _, err = m.run("install", "kimi", "--user")
    assert code != 0 and "add these tables at its end" in err, err
    m.config.write_text("")
    assert m.run("install", "kimi", "--user")[0] == 0
    written = m.config.read_text()
    assert written.count("[[hooks]]") == 3 and written.strip() in err, (written, err)


def test_a_string_that_looks_like_a_table_is_left_alone(m):
    content = 'notes = """\n[[hooks]]\nevent = "Stop"\ncommand = "kijito-pull hook kimi-stop"\n"""\n'
    m.config.write_text(content)
    assert m.run("install", "kimi", "--user")[0] == 0
    assert tomllib.loads(m.config.read_text())["notes"] == tomllib.loads(content)["notes"]
    assert m.run("uninstall", "kimi", "--user")[0] == 0
    assert m.config.read_text() == content


def test_there_is_no_project_scope(m):
    code, _, err = m.run("install", "kimi", "--project")
    assert code != 0 and "only from its user config" in err and "--user" in err, err
    assert not m.config.exists()


def test_kimi_code_home_moves_the_config(m, tmp_path):
    m.environ["KIMI_CODE_HOME"] = str(tmp_path / "kh")
    m.run("install", "kimi", "--user")
    assert ours(tmp_path / "kh" / "config.toml") and not m.config.exists()


def test_doctor_names_the_fix(m):
    m.config.write_text(USER_CONFIG)
    found = m.doctor()
    assert found["kimi.config"]["verdict"] == "ok"  # nothing of ours to check
    m.run("install", "kimi", "--user", "--command", str(m.home / "gone" / "kijito-pull"))
    harness = m.doctor()["harness.kimi"]
    assert harness["verdict"] == "fail" and "does not exist" in harness["detail"], harness
    m.run("install", "kimi", "--user")
    harness = m.doctor()["harness.kimi"]
    assert "hooks find kijito-pull through" in harness["detail"] and MARKER in harness["detail"], harness
    text = m.config.read_text()
    m.config.write_text(text.replace('event = "Stop"', 'event = "Stopp"'))
    row = m.doctor()["harness.kimi"]
    assert "Stop" in row["detail"] and "kijito-pull install kimi --user" in row["detail"], row
    kimi = m.home / "bin" / "kimi"
    kimi.parent.mkdir()
    kimi.write_text(f'#!/bin/sh\nenv > {m.home}/kimi-env\necho "Kimi doctor found 1 issue."\necho\n'
                    'echo "ERROR config.toml  $3"\necho "  Validation issues:"\n'
                    'echo \'    hooks[2].event: Invalid option\' >&2\nexit 1\n')
    kimi.chmod(0o755)
    m.environ["PATH"] = f"{kimi.parent}{os.pathsep}{m.environ['PATH']}"
    m.environ["KIJITOMON_TOKEN"] = "kimi-doctor-secret-3f9"
    m.environ["KIJITO_PULL_REDIS_PASSWORD"] = "kimi-doctor-redis-7c1"
    check = m.doctor()["kimi.config"]
    seen = (m.home / "kimi-env").read_text()
    assert "kimi-doctor-secret-3f9" not in seen and "kimi-doctor-redis-7c1" not in seen  # our secrets stay ours
    assert check["verdict"] == "fail" and "hooks[2].event: Invalid option" in check["detail"], check
    assert "kijito-pull install kimi --user" in check["fix"]


def test_doctor_asks_for_the_user_install_in_an_opted_in_project(m):
    (m.project / "AGENTS.md").write_text("# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n")
    kimi = m.home / "bin" / "kimi"
    kimi.parent.mkdir()
    kimi.write_text("#!/bin/sh\nexit 0\n")
    kimi.chmod(0o755)
    m.environ["PATH"] = f"{kimi.parent}{os.pathsep}{m.environ['PATH']}"
    row = m.doctor()["harness.kimi"]
    assert row["fix"] == "kijito-pull install kimi --user", row
