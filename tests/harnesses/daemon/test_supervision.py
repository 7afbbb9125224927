"""Supervision templates: rendered with absolute paths, no token anywhere, running exactly one argv."""

from __future__ import annotations

import configparser
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from kijito_pull.harnesses.daemon import supervision
from kijito_pull.harnesses.daemon.supervision import (
    default_command,
    launchd_filename,
    launchd_label,
    render_launchd,
    render_systemd,
    rendered_watch_argv,
)

# A path with a space, a percent sign and a dollar: each means something to systemd.
AWKWARD_EXE = "/opt/kijito 100%/${bin} $x/kijito-pull"
HOME = "/home/river q"


def _unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(text)
    return parser


def _systemd_argv(exec_start: str, instance: str, home: str) -> list[str]:
    """ExecStart split and expanded the way systemd does it for this instance and user.

    Specifiers (%i, %h, %%) are expanded everywhere; in the arguments (not the executable) `$$` is a
    dollar and `${NAME}` a variable (unset here, so empty).
    """
    specifiers = {"%": "%", "i": instance, "h": home}
    words = [re.sub(r"%(.)", lambda m: specifiers[m.group(1)], w) for w in shlex.split(exec_start)]
    return words[:1] + [re.sub(r"\$(\$|\{[^}]*\})", lambda m: "$" if m.group(1) == "$" else "", w)
                        for w in words[1:]]


def test_systemd_unit_is_an_ini_file_with_a_bounded_restart_policy():
    unit = _unit(render_systemd("/usr/local/bin/kijito-pull"))
    assert unit.sections() == ["Unit", "Service", "Install"]
    service = unit["Service"]
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == "2"
    assert int(unit["Unit"]["StartLimitBurst"]) > 0 and int(unit["Unit"]["StartLimitIntervalSec"]) > 0
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert unit["Install"]["WantedBy"] == "default.target"


@pytest.mark.parametrize("executable", [AWKWARD_EXE, "/usr/bin/kijito-pull", [sys.executable, "-m", "kijito_pull"],
                                        ["/opt/py 3%/python", "-m", "kijito_pull", "--x=${y}$$"]])
@pytest.mark.parametrize("persona", ["river", "Argus.bot-2"])
def test_systemd_exec_start_is_exactly_the_rendered_watch_argv(executable, persona):
    extra = ["--heartbeat", "60", "--api-base", "http://127.0.0.1:8080/100%${x}"]
    unit = _unit(render_systemd(executable, extra))
    argv = _systemd_argv(unit["Service"]["ExecStart"], persona, HOME)
    assert argv == rendered_watch_argv(executable, persona, HOME, extra)
    words = [executable] if isinstance(executable, str) else executable
    assert argv[: len(words)] == words
    assert argv[len(words):len(words) + 3] == ["watch", "--persona", persona]
    assert argv[argv.index("--token-file") + 1] == f"{HOME}/.config/kijito-pull/token"
    assert argv[argv.index("--events-file-template") + 1] == \
        f"{HOME}/.local/state/kijito-pull/events/{{persona}}.ndjson"


@pytest.mark.parametrize("executable", [AWKWARD_EXE, [sys.executable, "-m", "kijito_pull"]])
@pytest.mark.parametrize("persona", ["river", "River & <Sons>", "@PROGRAM_ARGUMENTS@"])
def test_launchd_plist_runs_exactly_the_rendered_watch_argv(executable, persona):
    home = "/Users/river q"
    extra = ["--heartbeat", "60"]
    plist = plistlib.loads(render_launchd(executable, persona, home, extra).encode("utf-8"))
    assert plist["ProgramArguments"] == rendered_watch_argv(executable, persona, home, extra, system="launchd")
    assert plist["ProgramArguments"][plist["ProgramArguments"].index("--persona") + 1] == persona
    assert plist["Label"] == launchd_label(persona)
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["StandardErrorPath"].startswith(f"{home}/Library/Logs/")
    argv = plist["ProgramArguments"]
    assert argv[argv.index("--token-file") + 1] == f"{home}/Library/Application Support/kijito-pull/token"


def test_launchd_label_and_file_name_are_safe_and_distinct_per_persona():
    assert launchd_label("river") == "com.kijito.pull.river"
    assert launchd_filename("river") == "com.kijito.pull.river.plist"
    names = {launchd_filename(p).lower() for p in ["river", "River", "a/b", "a_b"]}
    assert len(names) == 4
    assert all("/" not in n for n in names)


def test_no_token_in_either_file(monkeypatch):
    secret = "kjt_live_5d1e0c8a"
    monkeypatch.setenv("KIJITOMON_TOKEN", secret)
    for text in (render_systemd("/usr/bin/kijito-pull"),
                 render_launchd("/usr/bin/kijito-pull", "river", "/Users/river")):
        assert secret not in text
        assert "KIJITOMON_TOKEN" not in text
        assert "EnvironmentVariables" not in text
        assert not re.search(r"^\s*(Environment|EnvironmentFile|PassEnvironment)=", text, re.M)
        assert "--token-file" in text


def test_no_placeholder_is_left_unfilled():
    for text in (render_systemd("/usr/bin/kijito-pull"),
                 render_launchd("/usr/bin/kijito-pull", "river", "/Users/river")):
        assert not re.search(r"@[A-Z_]+@", text)


def test_an_executable_systemd_cannot_run_is_refused():
    with pytest.raises(ValueError):
        render_systemd("kijito-pull")
    for awkward in ('/opt/a"b/kijito-pull', "/opt/a'b/kijito-pull", "/opt/a\\b/kijito-pull", "/opt/a\nb/kp"):
        with pytest.raises(ValueError):
            render_systemd(awkward)
    with pytest.raises(ValueError):
        render_launchd(["python3", "-m", "kijito_pull"], "river", "/Users/river")


def test_default_command_is_this_installation_by_absolute_path():
    command = default_command()
    assert os.path.isabs(command[0]) and os.access(command[0], os.X_OK)
    # Whatever form it takes, it runs this kijito-pull.
    done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    from kijito_pull import __version__
    assert __version__ in done.stdout


def test_the_templates_ship_inside_the_package():
    unit = supervision._template(supervision.SYSTEMD_UNIT)
    plist = supervision._template(supervision.LAUNCHD_TEMPLATE)
    assert "@EXEC_START@" in unit and "@PROGRAM_ARGUMENTS@" in plist


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_itself_accepts_the_unit(tmp_path):
    (tmp_path / supervision.SYSTEMD_UNIT).write_text(render_systemd(), encoding="utf-8")
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "kijito-pull@river.service")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # warnings (unknown keys, bad values) count as failures too


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_reads_an_awkward_executable_path_as_written(tmp_path):
    # verify names the executable it failed to find: exactly the path we rendered, unexpanded.
    exe = str(tmp_path / "no such dir 100% ${x} $y" / "kijito-pull")
    (tmp_path / supervision.SYSTEMD_UNIT).write_text(render_systemd(exe), encoding="utf-8")
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "kijito-pull@river.service")],
                          capture_output=True, text=True, timeout=60)
    assert f"Command {exe} is not executable" in done.stderr
