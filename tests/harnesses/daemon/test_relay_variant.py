"""`kijito-pull install daemon --relay --redis URL`: `kijito-pull relay` supervised (systemd Type=notify with
WatchdogSec, or a launchd agent). The dry run shows the exact file, uninstall leaves the home as it was
byte for byte, a password in the URL is refused before anything is written, the doctor's harness.daemon
row knows the relay, and the rendered command itself, run against the sandbox and a real redis-server
that requires a password, relays mail and speaks sd_notify over a real socket: tests/redis/test_relay_daemon.py.

Fake systemctl/loginctl/launchctl on PATH (tests/harnesses/test_install.py), the real CLI and rendering.
"""

from __future__ import annotations

import configparser
import json
import plistlib
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from kijito_pull.harnesses.daemon import supervision
from tests.harnesses.test_install import Machine

URL = "redis://10.0.0.5:6379/0"


def unit_file(m: Machine) -> Path:
    return m.home / ".config" / "systemd" / "user" / "kijito-pull-relay.service"


def plist_file(m: Machine) -> Path:
    return m.home / "Library" / "LaunchAgents" / "com.kijito.pull-relay.plist"


def exec_start(text: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    return shlex.split(line.split("=", 1)[1])


def tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def added_lines(out: str) -> list[str]:
    """The file a dry run's diff shows being created, line by line."""
    return [ln[1:] for ln in out.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


@pytest.mark.parametrize("system", ["systemd", "launchd"])
def test_dry_run_shows_the_exact_file_and_writes_nothing(m, system):
    before = tree(m.home)
    code, out, err = m.run("install", "daemon", "--relay", "--redis", URL, "--persona", "river", "--persona",
                           "argus", "--system", system, "--dry-run")
    assert code == 0, err
    assert tree(m.home) == before
    if system == "systemd":
        text = supervision.render_systemd_relay(None, URL, ["river", "argus"])
        assert "systemctl --user enable --now kijito-pull-relay.service\n" in out
    else:
        text = supervision.render_launchd_relay(None, URL, ["river", "argus"], str(m.home))
        assert "com.kijito.pull-relay.plist" in out
    assert added_lines(out) == text.splitlines()
    assert "relay to redis://10.0.0.5:6379/0 for river, argus" in out
    assert "Redis password: none given" in out


def test_the_unit_is_type_notify_with_a_watchdog_and_runs_exactly_the_relay_argv(m, tmp_path):
    password = tmp_path / "redis-password"
    text = supervision.render_systemd_relay("/usr/local/bin/kijito-pull", URL, ["river"], str(password))
    unit = configparser.ConfigParser(interpolation=None, strict=True)
    unit.optionxform = str
    unit.read_string(text)
    service = unit["Service"]
    assert service["Type"] == "notify" and int(service["WatchdogSec"]) > 0
    assert service["Restart"] == "on-failure" and service["RestartPreventExitStatus"] == "2"
    argv = [w.replace("%h", "/home/river") for w in exec_start(text)]
    assert argv == supervision.rendered_relay_argv("/usr/local/bin/kijito-pull", URL, ["river"], "/home/river",
                                                   str(password))
    assert argv[1:4] == ["relay", "--redis", URL] and argv[-2:] == ["--redis-password-file", str(password)]
    args = plistlib.loads(supervision.render_launchd_relay("/usr/local/bin/kijito-pull", URL, [], "/Users/r")
                          .encode())["ProgramArguments"]
    assert args == supervision.rendered_relay_argv("/usr/local/bin/kijito-pull", URL, [], "/Users/r",
                                                   system="launchd")
    assert "--persona" not in args  # none named: every persona of the account


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_itself_accepts_the_relay_unit(tmp_path):
    (tmp_path / supervision.RELAY_UNIT).write_text(supervision.render_systemd_relay(None, URL, ["river"]))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / supervision.RELAY_UNIT)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


@pytest.mark.parametrize("system", ["systemd", "launchd"])
def test_install_then_uninstall_leaves_the_home_as_it_was(m, system):
    before = tree(m.home)
    code, out, err = m.run("install", "daemon", "--relay", "--redis", URL, "--system", system)
    assert code == 0, err
    path = unit_file(m) if system == "systemd" else plist_file(m)
    want = (supervision.render_systemd_relay(None, URL, []) if system == "systemd"
            else supervision.render_launchd_relay(None, URL, [], str(m.home)))
    assert path.read_text() == want
    if system == "systemd":
        assert ["systemctl", "--user", "enable", "--now", "kijito-pull-relay.service"] in m.calls()
    code, out, err = m.run("uninstall", "daemon", "--relay", "--system", system)
    assert code == 0, err
    assert not path.exists()
    # every directory the install made stays (as a watch's uninstall leaves them); no file is left
    assert {k: v for k, v in tree(m.home).items() if v is not None} == {k: v for k, v in before.items()
                                                                       if v is not None}
    if system == "systemd":
        assert ["systemctl", "--user", "disable", "--now", "kijito-pull-relay.service"] in m.calls()
    else:
        assert any(c[:2] == ["launchctl", "bootout"] and c[-1].endswith("/com.kijito.pull-relay") for c in m.calls())
    assert m.run("uninstall", "daemon", "--relay", "--system", system)[0] == 0  # nothing left: nothing to do


def test_the_relay_and_a_watch_live_side_by_side(m):
    assert m.run("install", "daemon", "--persona", "relay", "--system", "launchd")[0] == 0
    assert m.run("install", "daemon", "--relay", "--redis", URL, "--system", "launchd")[0] == 0
    watch = m.home / "Library" / "LaunchAgents" / "com.kijito.pull.relay.plist"
    assert watch.exists() and plist_file(m).exists()  # a persona named "relay" does not collide
    assert m.run("uninstall", "daemon", "--relay", "--system", "launchd")[0] == 0
    assert watch.exists() and not plist_file(m).exists()


@pytest.mark.parametrize("argv, said", [
    (("--relay",), "--relay needs --redis"),
    (("--relay", "--redis", "http://10.0.0.5/0"), "a Redis source is redis://"),
    (("--relay", "--redis", "redis://:s3cret@10.0.0.5:6379/0"), "a password in the Redis URL"),
    (("--relay", "--redis", "redis://u:s3cret@10.0.0.5:6379/0"), "a password in the Redis URL"),
    (("--relay", "--redis", URL, "--consumer", "x"), "--consumer names a watch's cursor"),
    (("--relay", "--redis", URL, "--persona", "bad name"), "persona"),
    (("--redis", URL, "--persona", "river"), "--redis goes with --relay"),
    (("--persona", "river", "--persona", "argus"), "one --persona per watch"),
])
def test_bad_input_is_exit_2_before_anything_is_written(m, argv, said):
    before = tree(m.home)
    code, out, err = m.run("install", "daemon", *argv, "--system", "systemd")
    assert code == 2, out + err
    assert said in err and "s3cret" not in out + err
    assert tree(m.home) == before


def test_the_doctor_knows_the_relay_unit(m):
    assert m.run("install", "daemon", "--relay", "--redis", URL, "--persona", "river", "--system", "systemd")[0] == 0
    code, out, err = m.run("doctor", "--json")
    rows = {row["check"]: row for row in map(json.loads, out.splitlines())}
    daemon = rows["harness.daemon"]
    assert "kijito-pull-relay.service" in daemon["detail"]
    assert "relay to redis://10.0.0.5:6379/0 for river (systemd, Type=notify)" in daemon["detail"]
    assert "no token file at" in daemon["detail"]
    assert rows["daemon.consumer"]["verdict"] == "ok"  # a relay is no watch: it shares nobody's cursor
    # the command it runs gone (a moved installation): a failure with the fix
    text = unit_file(m).read_text()
    first = exec_start(text)[0]
    unit_file(m).write_text(text.replace(first, "/nowhere/kijito-pull", 1))
    daemon = {r["check"]: r for r in map(json.loads, m.run("doctor", "--json")[1].splitlines())}["harness.daemon"]
    assert daemon["verdict"] == "fail" and "/nowhere/kijito-pull" in daemon["detail"], daemon


def test_reinstalling_with_other_personas_restarts_the_relay_and_keeps_a_backup(m):
    assert m.run("install", "daemon", "--relay", "--redis", URL, "--persona", "river", "--system", "systemd")[0] == 0
    first = unit_file(m).read_text()
    code, out, err = m.run("install", "daemon", "--relay", "--redis", URL, "--persona", "river", "--persona",
                           "argus", "--system", "systemd")
    assert code == 0, err
    assert exec_start(unit_file(m).read_text()).count("--persona") == 2
    assert m.calls()[-1][-2:] == ["try-restart", "kijito-pull-relay.service"]
    assert [p.read_text() for p in unit_file(m).parent.glob("kijito-pull-relay.service.*bak*")] == [first]
