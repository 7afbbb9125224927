"""What a new user tripped over in `install` / `uninstall` (issue 27): advice that dropped the scope asked
for, "nothing changed" said of a run that changed trust, empty folders left in HOME, and a daemon unit left
behind where systemd has no user session. In-process on a private HOME with fake service commands
(tests/harnesses/test_install.py's Machine)."""

from __future__ import annotations

import json

import pytest

from tests.harnesses.test_install import FAKE_CTL, Machine

KIJITO_PULL = "kijito-pull"


@pytest.fixture
def m(tmp_path) -> Machine:
    return Machine(tmp_path)


def tree(m: Machine) -> list[str]:
    return sorted(str(p.relative_to(m.home)) for p in m.home.rglob("*"))


def test_opencode_project_advice_keeps_the_project_scope(m):
    code, out, err = m.run("install", "opencode", "--project", "--command", KIJITO_PULL)
    assert code == 0, err
    assert "run `kijito-pull install opencode --project` again once `opencode` is on PATH" in out
    code, out, err = m.run("install", "opencode", "--project", str(m.project), "--command", KIJITO_PULL,
                           cwd=m.project / "sub")
    assert f"run `kijito-pull install opencode --project {m.project}` again" in out, out


def test_gemini_trust_after_the_install_says_what_it_changed(m):
    (m.home / ".gemini").mkdir()
    assert m.run("install", "gemini", "--user", "--command", KIJITO_PULL)[0] == 0
    code, out, err = m.run("install", "gemini", "--user", "--trust", "--command", KIJITO_PULL)
    folders = m.home / ".gemini" / "trustedFolders.json"
    assert code == 0 and json.loads(folders.read_text()) == {str(m.project): "TRUST_FOLDER"}, err
    assert "nothing changed" not in out
    assert out.startswith(f"kijito-pull: gemini (user scope): already installed; changed: trust recorded in "
                          f"{folders}\n")
    again = m.run("install", "gemini", "--user", "--trust", "--command", KIJITO_PULL)[1]
    assert again.startswith("kijito-pull: gemini (user scope): already installed, nothing changed\n")


@pytest.mark.parametrize("target", ["copilot", "opencode", "gemini", "kimi", "qwen"])
def test_uninstall_leaves_home_as_the_install_found_it(m, target):
    assert tree(m) == []
    code, _, err = m.run("install", target, "--user", "--command", KIJITO_PULL)
    assert code == 0, err
    assert tree(m)
    code, out, err = m.run("uninstall", target, "--user")
    assert code == 0, err
    assert tree(m) == [], out


def test_uninstall_keeps_folders_that_were_there_and_folders_in_use(m):
    (m.home / ".config").mkdir()  # the user's own, from before
    assert m.run("install", "opencode", "--user", "--command", KIJITO_PULL)[0] == 0
    assert m.run("install", "copilot", "--user", "--command", KIJITO_PULL)[0] == 0
    (m.home / ".copilot" / "config.json").write_text("{}\n")  # Copilot wrote its own file meanwhile
    assert m.run("uninstall", "opencode", "--user")[0] == 0
    assert m.run("uninstall", "copilot", "--user")[0] == 0
    assert tree(m) == [".config", ".copilot", ".copilot/config.json"]
    (m.home / ".copilot" / "config.json").unlink()  # in use once: Copilot's from now on, never removed
    assert m.run("install", "copilot", "--user", "--command", KIJITO_PULL)[0] == 0
    assert m.run("uninstall", "copilot", "--user")[0] == 0
    assert tree(m) == [".config", ".copilot"]


def test_an_install_record_that_is_a_link_is_refused_not_followed(m, tmp_path):
    from kijito_pull.core.paths import Paths
    from kijito_pull.harnesses import installfolders

    record = Paths(m.environ).data_dir / installfolders.RECORD
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"copilot": [str(tmp_path / "not-ours")]}))
    (tmp_path / "not-ours").mkdir()
    record.parent.mkdir(parents=True)
    record.symlink_to(elsewhere)
    code, out, err = m.run("install", "copilot", "--user", "--command", KIJITO_PULL)
    assert code == 1 and err.count("\n") == 1, (out, err)
    assert f"install record {record} is a symbolic link; refusing to follow it" in err
    assert (tmp_path / "not-ours").is_dir() and record.is_symlink()


NO_BUS = FAKE_CTL.replace('''elif name == "systemctl":''', '''elif name == "systemctl" and args[0] != "is-enabled":
    print("Failed to connect to bus: No medium found", file=sys.stderr); sys.exit(1)
elif name == "systemctl":''')


def test_a_daemon_without_a_systemd_user_session_is_rolled_back_and_says_what_to_do(m):
    for name in ("loginctl", "launchctl"):
        m.fake(name, FAKE_CTL)
    m.fake("systemctl", NO_BUS)
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "systemd")
    assert code == 1 and out == ""
    assert err.count("\n") == 1, err
    assert "there is no systemd user session here" in err and "nothing is installed" in err
    assert "Run `kijito-pull install daemon` again from a normal login" in err
    assert tree(m) == []  # no unit file, and no ~/.config/systemd/user made for it
