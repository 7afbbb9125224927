"""The daemon's own consumer: `install daemon` renders `watch --consumer daemon` (or `--consumer NAME`),
uninstall finds a unit rendered either way (or by a version without --consumer), and `kijito-pull doctor`
fails (`daemon.consumer`) when an installed daemon shares the agent harnesses' cursor.

A private HOME and state dir, fake systemctl/loginctl/launchctl on PATH (tests/harnesses/test_install.py),
the real CLI, the real rendering and the real doctor.
"""

from __future__ import annotations

import json
import os
import plistlib
import shlex
from pathlib import Path

import pytest

from kijito_pull.core import paths
from kijito_pull.core.pending import Entry
from kijito_pull.core.state import CursorState, StateStore
from kijito_pull.harnesses.daemon import installer, supervision
from tests.harnesses.test_install import Machine


def unit_file(m: Machine) -> Path:
    return m.home / ".config" / "systemd" / "user" / "kijito-pull@.service"


def plist_file(m: Machine, persona: str = "river") -> Path:
    return m.home / "Library" / "LaunchAgents" / f"com.kijito.pull.{persona}.plist"


def exec_start(text: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith("ExecStart=") or ln.startswith("+ExecStart=")]
    return shlex.split(line.split("=", 1)[1])


def consumer_of(argv: list[str]) -> str | None:
    return argv[argv.index("--consumer") + 1] if "--consumer" in argv else None


def enable(m: Machine, persona: str) -> None:
    """What `systemctl --user enable kijito-pull@P` leaves behind (the fake systemctl does not)."""
    wants = unit_file(m).parent / "default.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / f"kijito-pull@{persona}.service").symlink_to(unit_file(m))


def write_old_unit(m: Machine) -> None:
    """A unit as versions before the daemon had its own consumer rendered it: no --consumer."""
    unit_file(m).parent.mkdir(parents=True, exist_ok=True)
    unit_file(m).write_text(supervision.render_systemd(consumer=None))


def opt_in(m: Machine, persona: str = "river") -> None:
    (m.project / "AGENTS.md").write_text(f"- inbox monitor: raise on start\n- inbox persona: {persona}\n")


def doctor(m: Machine, **env: str) -> dict[str, dict]:
    code, out, err = m.run("doctor", "--json", env=env)
    rows = {row["check"]: row for row in map(json.loads, out.splitlines())}
    assert "daemon.consumer" in rows, out + err
    return rows


# -- install ------------------------------------------------------------------------------------------------


def test_dry_run_shows_the_daemons_own_consumer_and_writes_nothing(m):
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--dry-run")
    assert code == 0, err
    assert not unit_file(m).exists()
    assert consumer_of(exec_start(next(ln for ln in out.splitlines() if ln.startswith("+ExecStart=")))) == "daemon"
    assert "consumer: daemon" in out and "WARNING" not in out
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "launchd", "--dry-run")
    assert code == 0, err
    assert not plist_file(m).exists()
    assert "+\t\t<string>--consumer</string>\n+\t\t<string>daemon</string>\n" in out


def test_dry_run_says_which_api_base_the_service_will_use(m):
    dry = ("install", "daemon", "--persona", "river", "--system", "systemd", "--dry-run")
    code, out, err = m.run(*dry)
    assert code == 0, err
    assert "  API base: https://api.kijito.ai (the default)\n" in out
    config_file = Path(m.environ["KIJITO_PULL_CONFIG"])
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text('api_base = "https://kijito.example.org/"\n')
    out = m.run(*dry)[1]
    assert "  API base: https://kijito.example.org (the config file)\n" in out
    out = m.run(*dry, env={"KIJITO_BASE": "http://127.0.0.1:8900"})[1]  # this shell's: not the service's
    assert ("API base: https://kijito.example.org (the config file; $KIJITO_BASE=http://127.0.0.1:8900 in "
            "this shell does not reach the service") in out
    config_file.write_text('api_base = "http://kijito.example.org"\n')
    code, out, err = m.run(*dry)
    assert code == 0 and "API base: none usable (config file api_base: plain http://" in out


def test_install_renders_the_consumer_into_the_unit_and_the_plist(m):
    assert m.run("install", "daemon", "--persona", "river", "--system", "systemd")[0] == 0
    assert unit_file(m).read_text() == supervision.render_systemd(consumer="daemon")
    argv = exec_start(unit_file(m).read_text())
    assert argv[argv.index("watch"):argv.index("watch") + 5] == ["watch", "--persona", "%i", "--consumer", "daemon"]
    assert m.run("install", "daemon", "--persona", "river", "--system", "launchd")[0] == 0
    args = plistlib.loads(plist_file(m).read_bytes())["ProgramArguments"]
    assert consumer_of(args) == "daemon" and args[args.index("--persona") + 1] == "river"


def test_consumer_flag_is_used(m):
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--consumer", "mailbot.1")
    assert code == 0, err
    assert consumer_of(exec_start(unit_file(m).read_text())) == "mailbot.1"
    assert "consumer: mailbot.1" in out and "WARNING" not in out
    code, out, err = m.run("install", "daemon", "--persona", "brook", "--system", "launchd", "--consumer", "mailbot.1")
    assert code == 0, err
    assert consumer_of(plistlib.loads(plist_file(m, "brook").read_bytes())["ProgramArguments"]) == "mailbot.1"


@pytest.mark.parametrize("bad", ["", "two words", "a/b", "x" * 65, "-rf"])
@pytest.mark.parametrize("system", ["systemd", "launchd"])
def test_a_bad_consumer_is_a_usage_error_before_anything_is_written(m, bad, system):
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", system, f"--consumer={bad}")
    assert code == 2, (out, err)
    assert "consumer" in err
    assert not unit_file(m).exists() and not plist_file(m).exists()
    assert [c for c in m.calls() if c[0] in ("systemctl", "launchctl")] == []


def test_the_agents_consumer_is_allowed_with_a_warning(m):
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--consumer", "agent")
    assert code == 0, err
    assert consumer_of(exec_start(unit_file(m).read_text())) == "agent"
    assert "WARNING: consumer agent is the one the agent harnesses use" in out
    assert "takes their mail" in out


def test_the_warning_follows_the_config_files_consumer(m):
    config = Path(m.environ["KIJITO_PULL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('consumer = "team"\n')
    out = m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--consumer", "agent",
                "--dry-run")[1]
    assert "WARNING" not in out and "the agent harnesses keep theirs, team" in out
    out = m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--consumer", "team", "--dry-run")[1]
    assert "WARNING: consumer team" in out


def test_reinstalling_over_an_old_unit_restarts_what_runs(m):
    write_old_unit(m)
    enable(m, "river")
    enable(m, "brook")
    code, out, err = m.run("install", "daemon", "--persona", "river", "--system", "systemd")
    assert code == 0, err
    assert consumer_of(exec_start(unit_file(m).read_text())) == "daemon"
    ctl = [c[1:] for c in m.calls() if c[0] == "systemctl"]
    assert ["--user", "daemon-reload"] in ctl
    assert ["--user", "try-restart", "kijito-pull@river.service", "kijito-pull@brook.service"] in ctl
    assert "brook also runs with consumer daemon" in out
    assert list((unit_file(m).parent).glob("kijito-pull@.service.*")), "the old unit is backed up"


def test_a_fresh_install_restarts_nothing(m):
    assert m.run("install", "daemon", "--persona", "river", "--system", "systemd")[0] == 0
    assert not [c for c in m.calls() if c[0] == "systemctl" and "try-restart" in c]


# -- uninstall ------------------------------------------------------------------------------------------------


def test_uninstall_removes_an_old_unit_without_a_consumer(m):
    write_old_unit(m)
    enable(m, "river")
    code, out, err = m.run("uninstall", "daemon", "--persona", "river", "--system", "systemd")
    assert code == 0, err
    assert ["systemctl", "--user", "disable", "--now", "kijito-pull@river.service"] in m.calls()
    assert not unit_file(m).exists()


@pytest.mark.parametrize("consumer", [[], ["--consumer", "mailbot"], ["--consumer", "agent"]])
def test_uninstall_removes_a_new_unit_whatever_its_consumer(m, consumer):
    assert m.run("install", "daemon", "--persona", "river", "--system", "systemd", *consumer)[0] == 0
    assert unit_file(m).exists()
    code, out, err = m.run("uninstall", "daemon", "--persona", "river", "--system", "systemd")
    assert code == 0, err
    assert not unit_file(m).exists()
    assert m.run("install", "daemon", "--persona", "river", "--system", "launchd", *consumer)[0] == 0
    code, out, err = m.run("uninstall", "daemon", "--persona", "river", "--system", "launchd")
    assert code == 0, err
    assert not plist_file(m).exists()
    assert ["launchctl", "bootout", f"gui/{os.getuid()}/com.kijito.pull.river"] in m.calls()


def test_uninstall_removes_an_old_plist_without_a_consumer(m):
    plist_file(m).parent.mkdir(parents=True)
    plist_file(m).write_text(supervision.render_launchd(None, "river", str(m.home), consumer=None))
    code, out, err = m.run("uninstall", "daemon", "--persona", "river", "--system", "launchd")
    assert code == 0, err
    assert not plist_file(m).exists()


# -- what an installed daemon is read back as ------------------------------------------------------------------


def test_installed_reads_back_the_consumer_and_personas(m):
    write_old_unit(m)
    enable(m, "river")
    m.run("install", "daemon", "--persona", "brook", "--system", "launchd", "--consumer", "mailbot")
    rows = {r.system: r for r in installer.installed(m.environ)}
    assert (rows["systemd"].personas, rows["systemd"].consumer) == (["river"], None)
    assert (rows["launchd"].personas, rows["launchd"].consumer) == (["brook"], "mailbot")


# -- doctor -----------------------------------------------------------------------------------------------------


def test_doctor_fails_on_an_old_unit_sharing_the_agents_cursor_and_passes_once_reinstalled(m):
    opt_in(m, "river")
    write_old_unit(m)
    enable(m, "river")
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "fail", found
    assert "river" in found["detail"] and "consumer agent" in found["detail"] and "share one cursor" in found["detail"]
    assert found["fix"].startswith("kijito-pull install daemon --persona river")
    assert "--system" not in found["fix"].split("(")[0] or installer.default_system() != "systemd"
    # The fix, as printed, then the doctor again.
    assert m.run(*shlex.split(found["fix"].split("   (")[0])[1:])[0] == 0
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "ok", found
    assert "own cursor: river (daemon)" in found["detail"]


def test_doctor_fails_on_a_daemon_installed_with_the_agents_consumer(m):
    opt_in(m, "river")
    assert m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--consumer", "agent")[0] == 0
    enable(m, "river")
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "fail", found
    assert "watches river with --consumer agent, the agent harnesses' consumer" in found["detail"]


def test_doctor_passes_on_a_daemon_with_its_own_consumer(m):
    opt_in(m, "river")
    assert m.run("install", "daemon", "--persona", "river", "--system", "systemd")[0] == 0
    enable(m, "river")
    assert doctor(m)["daemon.consumer"]["verdict"] == "ok"


def test_doctor_follows_the_config_files_consumer(m):
    opt_in(m, "river")
    config = Path(m.environ["KIJITO_PULL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('consumer = "team"\n')
    write_old_unit(m)  # no --consumer: its watch reads the same config file, so it runs as "team" too
    enable(m, "river")
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "fail" and "consumer team" in found["detail"]
    assert m.run("install", "daemon", "--persona", "river", "--system", "systemd", "--consumer", "agent")[0] == 0
    assert doctor(m)["daemon.consumer"]["verdict"] == "ok"


def test_doctor_checks_a_launchd_plist_too(m):
    opt_in(m, "river")
    plist_file(m).parent.mkdir(parents=True)
    plist_file(m).write_text(supervision.render_launchd(None, "river", str(m.home), consumer=None))
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "fail", found
    if installer.default_system() != "launchd":
        assert "--system launchd" in found["fix"]


def test_a_shared_consumer_on_a_persona_no_agent_is_known_to_serve_is_a_warning(m):
    write_old_unit(m)
    enable(m, "brook")  # this project has not opted in, and nothing names brook
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "warn", found
    assert found["fix"].startswith("kijito-pull install daemon --persona brook")


def test_a_pending_hand_over_on_the_agents_cursor_shows_an_agent_serves_the_persona(m):
    write_old_unit(m)
    enable(m, "brook")
    api_base = "https://api.kijito.ai"
    store = StateStore(*paths.cursor_paths(m.environ, api_base, "brook", "agent"),
                       identity={"api_base": api_base, "persona": "brook", "consumer": "agent"})
    store.save(CursorState(cursor=10, pending={11: Entry(holder="claude:s-1", count=1, since="2025-01-01T00:00:00Z",
                                                         until=4102444800.0)}))
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "fail", found
    assert "pending with an agent session" in found["detail"]


def test_a_waker_lease_shows_an_agent_serves_the_persona(m):
    write_old_unit(m)
    enable(m, "brook")
    sessions = Path(m.environ["KIJITO_PULL_STATE_DIR"]) / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "s-2.json").write_text(json.dumps({"session_id": "s-2", "pid": 2 ** 22 + 12345, "pid_start": "1",
                                                   "persona": "brook"}))
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "fail" and "waker" in found["detail"], found


def test_no_daemon_is_fine(m):
    opt_in(m, "river")
    found = doctor(m)["daemon.consumer"]
    assert found["verdict"] == "ok" and found["detail"] == "no daemon installed"
