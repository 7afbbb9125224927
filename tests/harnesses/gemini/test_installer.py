"""`kijito-pull install | uninstall gemini` and Gemini's folder trust, in-process on a private HOME: the hooks
in Gemini CLI's settings.json (timeouts in milliseconds), everything else in the file kept byte for byte,
--dry-run showing exactly what a real run writes, uninstall giving the file back byte for byte, trust
recorded only with --trust and the way Gemini's own dialog records it, and doctor's `gemini.trust`.
The real Gemini CLI reads what this writes in tests/e2e/test_gemini_e2e.py.
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
from kijito_pull.harnesses.gemini import installer, trust

KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
USER_SETTINGS = ('{\n    "security": {"auth": {"selectedType": "gemini-api-key"}},\n    "ui": {"theme": "Dracula"},\n'
                 '    "hooks": {"BeforeAgent": [{"hooks": [{"type": "command", "command": "./mine.sh"}]}]}\n}\n')


class Machine:
    """A private HOME (Gemini's ~/.gemini in it) and a project folder."""

    def __init__(self, root: Path):
        self.home = root / "home"
        (self.home / ".gemini").mkdir(parents=True)
        self.project = root / "proj"
        (self.project / ".git").mkdir(parents=True)
        self.environ = {"HOME": str(self.home), "PATH": os.environ.get("PATH", ""),
                        "KIJITO_PULL_STATE_DIR": str(root / "state"), "KIJITO_PULL_CONFIG": os.devnull}
        self.settings = self.home / ".gemini" / "settings.json"
        self.folders = self.home / ".gemini" / "trustedFolders.json"

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


def test_user_install_writes_three_hooks_in_gemini_shape_and_uninstall_restores_the_file(m):
    m.settings.write_text(USER_SETTINGS)
    code, out, err = m.run("install", "gemini", "--user", "--command", KIJITO_PULL)
    assert code == 0, err
    found = ours(m.settings)
    assert set(found) == {"SessionStart", "AfterAgent", "SessionEnd"}
    for event, hook in found.items():
        name = installer.EVENTS[event]
        assert hook == {"type": "command", "name": name, "command": f"{KIJITO_PULL} hook {name}",
                        "timeout": 5000 if event == "SessionEnd" else 15000}
    data = json.loads(m.settings.read_text())
    assert data["ui"] == {"theme": "Dracula"} and data["hooks"]["BeforeAgent"][0]["hooks"][0]["command"] == "./mine.sh"
    assert m.settings.read_text().startswith('{\n    "security": {"auth": {"selectedType": "gemini-api-key"}},\n')
    assert f"Gemini CLI does not trust {m.project}" in out and not m.folders.exists()
    assert m.run("install", "gemini", "--user", "--command", KIJITO_PULL)[1].startswith(
        "kijito-pull: gemini (user scope): already installed")
    code, out, _ = m.run("uninstall", "gemini", "--user")
    assert code == 0 and "restored byte for byte" in out, out
    assert m.settings.read_text() == USER_SETTINGS


def test_dry_run_shows_exactly_what_the_real_run_writes_and_writes_nothing(m):
    m.settings.write_text(USER_SETTINGS)
    code, dry, _ = m.run("install", "gemini", "--user", "--trust", "--command", KIJITO_PULL, "--dry-run")
    assert code == 0 and "dry run, nothing changed" in dry
    assert m.settings.read_text() == USER_SETTINGS and not m.folders.exists()
    assert m.run("install", "gemini", "--user", "--trust", "--command", KIJITO_PULL)[0] == 0
    for line in m.settings.read_text().splitlines():
        if "kijito-pull" in line:
            assert f"+{line}" in dry, line
    assert f'+  "{m.project}": "TRUST_FOLDER"' in dry


def test_project_round_trip_leaves_nothing_behind(m):
    code, out, err = m.run("install", "gemini", "--project", "--command", KIJITO_PULL)
    assert code == 0, err
    path = m.project / ".gemini" / "settings.json"
    assert set(ours(path)) == {"SessionStart", "AfterAgent", "SessionEnd"}
    code, out, _ = m.run("uninstall", "gemini", "--project")
    assert code == 0 and "removed" in out
    assert sorted(p.name for p in m.project.iterdir()) == [".git"]


def test_a_settings_file_that_does_not_parse_is_never_rewritten(m):
    m.settings.write_text('{"ui": {"theme": "x"}, // a comment Gemini allows\n}\n')
    code, _, err = m.run("install", "gemini", "--user")
    assert code != 0 and "is not valid JSON" in err and "nothing was changed" in err
    assert m.settings.read_text() == '{"ui": {"theme": "x"}, // a comment Gemini allows\n}\n'


# -- trust -------------------------------------------------------------------------------------------------


def test_trust_is_written_only_when_asked_and_as_gemini_writes_it(m):
    assert m.run("install", "gemini", "--user")[0] == 0
    assert not m.folders.exists()
    code, out, _ = m.run("install", "gemini", "--user", "--trust")
    assert code == 0 and f"Gemini CLI now trusts {m.project}" in out, out
    assert m.folders.read_bytes() == json.dumps({str(m.project): "TRUST_FOLDER"}, indent=2).encode()
    assert m.folders.stat().st_mode & 0o777 == 0o600
    code, out, _ = m.run("install", "gemini", "--user", "--trust")
    assert f"Gemini CLI trusts {m.project}" in out and "now" not in out
    assert m.run("uninstall", "gemini", "--user")[0] == 0
    assert m.folders.exists()  # the user's trust decision is Gemini's record: left alone


def test_trust_keeps_every_other_rule_byte_for_byte(m):
    other = '{\n  "/srv/elsewhere": "DO_NOT_TRUST",\n  "/home/x/work": "TRUST_PARENT"\n}'
    m.folders.write_text(other)
    assert m.run("install", "gemini", "--user", "--trust")[0] == 0
    text = m.folders.read_text()
    assert text.startswith('{\n  "/srv/elsewhere": "DO_NOT_TRUST",\n  "/home/x/work": "TRUST_PARENT"')
    assert json.loads(text) == {"/srv/elsewhere": "DO_NOT_TRUST", "/home/x/work": "TRUST_PARENT",
                                str(m.project): "TRUST_FOLDER"}


def test_doctor_fails_gemini_trust_until_trusted(m):
    assert m.doctor()["gemini.trust"]["verdict"] == "ok"  # no hooks of ours: nothing to check
    assert m.run("install", "gemini", "--user")[0] == 0
    found = m.doctor()["gemini.trust"]
    assert found["verdict"] == "fail" and "kijito-pull install gemini --user --trust" in found["fix"], found
    assert m.run("install", "gemini", "--user", "--trust")[0] == 0
    assert m.doctor()["gemini.trust"]["verdict"] == "ok"


def _verdict(m: Machine, rules: dict | None = None, **env: str) -> trust.Verdict:
    if rules is not None:
        m.folders.write_text(json.dumps(rules))
    return trust.verdict({**m.environ, **env}, m.project)


def test_verdict_follows_geminis_own_rules(m, tmp_path):
    parent = str(m.project.parent)
    assert not _verdict(m).trusted  # no rule: Gemini asks, headless refuses
    assert _verdict(m, {str(m.project): "TRUST_FOLDER"}).trusted
    assert _verdict(m, {parent: "TRUST_FOLDER"}).trusted  # a parent folder's rule covers it
    assert _verdict(m, {str(m.project / "x"): "TRUST_PARENT"}).trusted  # TRUST_PARENT trusts the rule's parent
    assert not _verdict(m, {parent: "TRUST_FOLDER", str(m.project): "DO_NOT_TRUST"}).trusted  # longest rule wins
    assert _verdict(m, {parent: "DO_NOT_TRUST", str(m.project): "TRUST_FOLDER"}).trusted
    assert not _verdict(m, {str(m.project) + "-other": "TRUST_FOLDER"}).trusted  # a sibling is not a parent
    assert not _verdict(m, {str(m.project): "MAYBE"}).trusted  # Gemini stops on an invalid level
    assert _verdict(m, {}, GEMINI_CLI_TRUST_WORKSPACE="true").trusted
    assert not _verdict(m, {str(m.project): "TRUST_FOLDER"}, GEMINI_CLI_TRUST_WORKSPACE="false").trusted
    link = tmp_path / "link"
    link.symlink_to(m.project)
    assert trust.verdict(m.environ, link).trusted  # symlinks resolved, as Gemini does
    moved = tmp_path / "elsewhere.json"
    moved.write_text(json.dumps({str(m.project): "TRUST_FOLDER"}))
    m.folders.unlink()
    assert _verdict(m, None, GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(moved)).trusted
    m.settings.write_text(json.dumps({"security": {"folderTrust": {"enabled": False}}}))
    assert _verdict(m).trusted


def test_doctor_looks_at_the_folder_gemini_is_started_in(m):
    sub = m.project / "sub"
    sub.mkdir()
    m.project = sub  # `install --project` and doctor run in a subfolder of the repository
    assert m.run("install", "gemini", "--project")[0] == 0
    assert (sub / ".gemini" / "settings.json").exists()
    wired = [w for w in installer.wiring(m.environ, str(sub)) if w.installed]
    assert [(w.scope, w.path) for w in wired] == [("project", str(sub / ".gemini" / "settings.json"))]
    assert m.doctor()["harness.gemini"]["verdict"] == "ok"
