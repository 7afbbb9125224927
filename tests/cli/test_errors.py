"""Every anticipated failure on every command: one line on stderr (or the documented short form), the
documented exit code, never a traceback (issue 28); and the trips of issue 27 it covers: a missing `redis`
extra is exit 2 naming the pip line and acknowledges nothing (trip 1), a rejected token and a refused
connection name the API base they tried and the doctor (trip 5). An error nobody anticipated is one line
naming a 0600 report with no token in it, or its traceback with --debug.

Each command runs as a real process (`python -m kijito_pull`), against a real sandbox and a real
redis-server; as root, the unreadable state directory is tested under `unshare --user`
(tests.clirunner.unprivileged), where the mode bits bind."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import kijito_pull.cli.status_cmd
from kijito_pull.cli.main import COMMANDS, build_parser
from kijito_pull.core.models import Message
from kijito_pull.sources import redis_streams
from tests.clirunner import REPO, Cli, unprivileged
from tests.redisserver import redis_server  # noqa: F401 - the fixture

TOKEN = "errors-token-5f1c7a"
PERSONA = "river"

#: A sitecustomize that makes `import redis` fail, as on an installation without the `redis` extra.
NO_REDIS = """\
import sys

class _NoRedis:
    def find_spec(self, name, path=None, target=None):
        if name == "redis" or name.startswith("redis."):
            raise ImportError("No module named 'redis' (blocked by the test)")
        return None

sys.meta_path.insert(0, _NoRedis())
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class World:
    """A world-traversable folder (so `unshare --user` can reach it): project, state, config files."""

    base: Path
    sb: object

    @property
    def project(self) -> Path:
        return self.base / "project"

    @property
    def state(self) -> Path:
        return self.base / "state"

    def cli(self) -> Cli:
        cli = Cli(self.sb.url, TOKEN, self.state)
        cli.environ.update({"KIJITO_PULL_CONFIG": str(self.base / "config.toml"), "KIJITO_PERSONA": PERSONA,
                            "HOME": str(self.base / "home"), "XDG_CONFIG_HOME": str(self.base / "home" / ".config")})
        return cli

    def run(self, argv: list[str], env: dict | None = None, prefix: list[str] | tuple = (), stdin: str = "",
            timeout: float = 60) -> subprocess.CompletedProcess:
        proc = self.cli().spawn(*argv, env=env, prefix=prefix, stdin=subprocess.PIPE, cwd=self.project)
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.fixture
def world(sb) -> Iterator[World]:
    base = Path(tempfile.mkdtemp(prefix="kijito-pull-errors-"))
    try:
        base.chmod(0o755)
        for folder in ("project", "home", "blocker"):
            (base / folder).mkdir(mode=0o755)
        (base / "project" / "AGENTS.md").write_text(f"inbox monitor: raise on start\ninbox persona: {PERSONA}\n")
        (base / "config.toml").write_text("")
        (base / "bad.toml").write_text("api_base = [\n")
        (base / "token").write_text(TOKEN + "\n")
        (base / "token").chmod(0o644)  # readable by others: refused
        (base / "token.toml").write_text(f'token_file = "{base / "token"}"\n')
        (base / "blocker" / "sitecustomize.py").write_text(NO_REDIS)
        for path in base.rglob("*"):
            if path.is_file() and path.name != "token":
                path.chmod(0o644)
        yield World(base, sb)
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


# -- the failures: what each changes of a working setup ------------------------------------------------

REDIS = "missing redis extra"
DOWN = "unreachable source"
STATE = "unreadable state dir"
CONFIG = "bad config file"
TOKEN_FILE = "bad token file"
FAILURES = (REDIS, DOWN, STATE, CONFIG, TOKEN_FILE)


def failure(world: World, name: str) -> tuple[dict, list[str]]:
    """(environment over the working one, argv prefix) for one failure."""
    if name == REDIS:
        return {"KIJITO_PULL_SOURCE": "redis://127.0.0.1:1/0",
                "PYTHONPATH": f"{world.base / 'blocker'}{os.pathsep}{REPO}"}, []
    if name == DOWN:
        return {"KIJITO_BASE": f"http://127.0.0.1:{_closed_port()}"}, []
    if name == STATE:
        (world.state / "cursors").mkdir(parents=True, exist_ok=True)
        world.state.chmod(0)
        return {}, unprivileged()
    if name == CONFIG:
        return {"KIJITO_PULL_CONFIG": str(world.base / "bad.toml")}, []
    return {"KIJITOMON_TOKEN": "", "KIJITO_PULL_CONFIG": str(world.base / "token.toml")}, []


# -- every command: its bounded command line, and its documented exit code under each failure -----------

HOOK_INPUT = json.dumps({"session_id": "sess-errors", "cwd": "{project}", "stop_hook_active": False})

#: command -> (argv, {failure: exit code}); a command the failure does not touch does its job (0).
MATRIX: dict[str, tuple[list[str], dict[str, int]]] = {
    "pull": (["--once", "--persona", PERSONA], {REDIS: 2, DOWN: 1, STATE: 1, CONFIG: 2, TOKEN_FILE: 2}),
    # --self-test: bounded (a watch that runs keeps going through a failing source, alerting)
    "watch": (["watch", "--persona", PERSONA, "--self-test"], {REDIS: 2, DOWN: 1, STATE: 0, CONFIG: 2, TOKEN_FILE: 2}),
    "show": (["show", "{id}", "--persona", PERSONA], {REDIS: 0, DOWN: 1, STATE: 0, CONFIG: 2, TOKEN_FILE: 2}),
    "status": (["status"], {REDIS: 2, DOWN: 0, STATE: 1, CONFIG: 2, TOKEN_FILE: 0}),
    "send": (["send", "--to", PERSONA, "hello"], {REDIS: 0, DOWN: 1, STATE: 0, CONFIG: 2, TOKEN_FILE: 2}),
    "optin": (["optin"], {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    "sandbox": (["sandbox", "--json"], {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    "demo": (["demo"], {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    # a hook never fails a session: exit 0, one line saying why nothing was handed over
    "hook": (["hook", "claude-stop"], {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    "session": (["session", "status"], {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    "completion": (["completion", "bash"], {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    # the doctor's findings are its output (stdout); it exits 1 when one fails
    "doctor": (["doctor", "--persona", PERSONA], {REDIS: 1, DOWN: 1, STATE: 1, CONFIG: 1, TOKEN_FILE: 1}),
    "install": (["install", "gemini", "--project", "--dry-run"],
                {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    "uninstall": (["uninstall", "gemini", "--project", "--dry-run"],
                  {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 0, TOKEN_FILE: 0}),
    "parked": (["parked"], {REDIS: 2, DOWN: 0, STATE: 1, CONFIG: 2, TOKEN_FILE: 0}),
    "exec": (["exec", "--persona", PERSONA, "--", "true"], {REDIS: 2, DOWN: 1, STATE: 1, CONFIG: 2, TOKEN_FILE: 2}),
    # Redis unreachable (nothing listens on port 1) but for what is found before it is tried
    "relay": (["relay", "--redis", "redis://127.0.0.1:1/0"], {REDIS: 2, DOWN: 1, STATE: 1, CONFIG: 2, TOKEN_FILE: 2}),
    # the journey is its output (stdout): a source it could not ask is a step saying so, and exit 1
    "track": (["track", "{id}", "--persona", PERSONA], {REDIS: 2, DOWN: 1, STATE: 1, CONFIG: 2, TOKEN_FILE: 2}),
    "dashboard": (["dashboard"], {REDIS: 0, DOWN: 0, STATE: 0, CONFIG: 2, TOKEN_FILE: 2}),
}
#: Commands that run until SIGTERM: started, their first stdout line read, stopped.
LONG_RUNNING = {"sandbox", "dashboard"}
#: Commands whose output says what failed (stdout), so exit 1 may come with no stderr line.
SAYS_ON_STDOUT = {"doctor", "track"}
#: The documented short forms: `watch --self-test` says each probe that failed on its own line.
MAX_LINES = {("watch", DOWN): 2}


def test_the_matrix_covers_every_command_the_help_lists():
    listed = set(build_parser()._subparsers._group_actions[0].choices)  # what `kijito-pull --help` lists
    assert listed == set(COMMANDS) == set(MATRIX)


@pytest.mark.parametrize("name", FAILURES)
def test_every_command_under_each_anticipated_failure_says_one_line_and_its_exit_code(world, name):
    message = world.sb.send(PERSONA, "loom", "one message to show")
    env, prefix = failure(world, name)
    problems = []
    for command, (argv, codes) in MATRIX.items():
        argv = [a.replace("{id}", str(message)) for a in argv]
        if command in LONG_RUNNING:
            ran = _long_running(world, argv, env, prefix)
        else:
            stdin = HOOK_INPUT.replace("{project}", str(world.project)) if command == "hook" else ""
            ran = world.run(argv, env=env, prefix=prefix, stdin=stdin)
        lines = ran.stderr.strip().splitlines()
        allowed = MAX_LINES.get((command, name), 1)
        if ran.returncode != codes[name]:
            problems.append(f"{command}: exit {ran.returncode}, documented {codes[name]}; stderr {ran.stderr!r}")
        if len(lines) > allowed or (ran.returncode != 0 and not lines and command not in SAYS_ON_STDOUT):
            problems.append(f"{command}: {len(lines)} stderr lines, expected {allowed}: {ran.stderr!r}")
        if "Traceback" in ran.stderr + ran.stdout or "unexpected error" in ran.stderr:
            problems.append(f"{command}: not anticipated: {ran.stderr[-600:]!r}")
        if TOKEN in ran.stderr + ran.stdout:
            problems.append(f"{command}: the token was shown")
    assert problems == [], "\n".join(problems)


def _long_running(world: World, argv: list[str], env: dict, prefix: list[str]) -> subprocess.CompletedProcess:
    """A command that runs until SIGTERM (`sandbox`, `dashboard`): started, its first line (its address)
    read, then stopped (exit 0); one that fails first has exited already."""
    proc = world.cli().spawn(*argv, env=env, prefix=prefix, cwd=world.project)
    try:
        first = proc.stdout.readline()
        if first:
            assert "http://127.0.0.1:" in first, first
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(argv, proc.returncode, first + out, err)


# -- trip 1: the redis extra ------------------------------------------------------------------------------


def test_without_the_redis_extra_a_redis_source_is_one_line_exit_2_and_nothing_is_acknowledged(
        world, redis_server):  # noqa: F811 - the fixture
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "test")
    appender.append(PERSONA, Message(7, "loom", "waiting in the stream", "2026-12-02T10:00:00Z", False, False))
    blocked = {"PYTHONPATH": f"{world.base / 'blocker'}{os.pathsep}{REPO}"}
    argv = ["--once", "--json", "--persona", PERSONA, "--source", redis_server.url]
    ran = world.run(argv, env=blocked)
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.strip().splitlines() == [
        "kijito-pull: a Redis source needs the redis package, which is not installed: "
        "pip install 'kijito-pull[redis]'"]
    # the trip as filed, to a Redis nobody listens on
    ran = world.run(["--once", "--persona", "x", "--source", "redis://127.0.0.1:1/0"], env=blocked)
    assert ran.returncode == 2 and "pip install 'kijito-pull[redis]'" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and "Traceback" not in ran.stderr
    # a hook with that source: exit 0 (the session goes on), the same line, nothing handed over
    hook = world.run(["hook", "claude-stop"], env={**blocked, "KIJITO_PULL_SOURCE": redis_server.url},
                     stdin=HOOK_INPUT.replace("{project}", str(world.project)))
    assert hook.returncode == 0 and hook.stdout == "", hook.stderr
    (line,) = hook.stderr.strip().splitlines()
    assert "pip install 'kijito-pull[redis]'" in line and "internal error" not in line
    # nothing was acknowledged: with the extra, the same group is handed the message
    again = world.run(argv)
    assert again.returncode == 0, again.stderr
    assert [e["id"] for e in map(json.loads, again.stdout.splitlines()) if e["event"] == "new"] == [7]


# -- trip 5: the API base and the doctor --------------------------------------------------------------------


def test_a_rejected_token_names_the_api_base_and_the_doctor(world):
    ran = world.run(["--once", "--persona", PERSONA], env={"KIJITOMON_TOKEN": "not-the-token"})
    assert ran.returncode == 1
    (line,) = ran.stderr.strip().splitlines()
    assert "rejected the token (401)" in line and world.sb.url in line and "kijito-pull doctor" in line
    assert "not-the-token" not in line


def test_a_refused_loopback_connection_names_the_base_the_sandbox_and_the_doctor(world):
    base = f"http://127.0.0.1:{_closed_port()}"
    for argv in (["--once", "--persona", PERSONA], ["send", "--to", PERSONA, "hi"], ["show", "1"]):
        ran = world.run(argv, env={"KIJITO_BASE": base})
        assert ran.returncode == 1, ran.stderr
        (line,) = ran.stderr.strip().splitlines()
        assert base in line and "is the sandbox still running? its port changes on restart" in line, line
        assert "`kijito-pull doctor`" in line


# -- what nobody anticipated ----------------------------------------------------------------------------


def _boom(args, env):  # noqa: ANN001, ANN202 - stands in for a bug in a command
    raise RuntimeError(f"a bug met the token {TOKEN} and Authorization: Bearer {TOKEN}")


def test_an_unexpected_error_is_one_line_naming_a_private_report_without_the_token(world, monkeypatch):
    monkeypatch.setattr(kijito_pull.cli.status_cmd, "run", _boom)
    cli = world.cli()
    result = cli("status")
    assert result.code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("kijito-pull: unexpected error (RuntimeError: ") and "--debug" in line
    assert TOKEN not in line and "Traceback" not in result.stderr
    report = Path(line.split("the full report is in ", 1)[1].split(";", 1)[0])
    assert report.parent == world.state / "crashes"
    assert stat.S_IMODE(report.stat().st_mode) == 0o600 and stat.S_IMODE(report.parent.stat().st_mode) == 0o700
    text = report.read_text()
    assert "Traceback" in text and "_boom" in text and "RuntimeError" in text and TOKEN not in text

    debug = cli("status", "--debug")
    assert debug.code == 1 and "Traceback (most recent call last)" in debug.stderr and "_boom" in debug.stderr
    assert TOKEN not in debug.stderr


def test_an_unexpected_error_whose_report_cannot_be_written_still_is_one_line(world, monkeypatch):
    monkeypatch.setattr(kijito_pull.cli.status_cmd, "run", _boom)
    world.state.parent.joinpath("a-file").write_text("")
    result = world.cli()("status", env={"KIJITO_PULL_STATE_DIR": str(world.base / "a-file" / "state")})
    assert result.code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "its report could not be written" in line and "--debug" in line and TOKEN not in line


# -- the boundary is one ------------------------------------------------------------------------------------

#: (`session`'s LifecycleError is not here: it is one of that command's typed results, startup_failed, which
#: --json prints as an object like every other result.)
PRODUCT_ERRORS = {"ApiError", "StateError", "LockTimeout", "Untrustworthy", "ConfigError", "InstallError",
                  "MissingExtra", "UsageError", "KijitoPullError"}


def test_commands_raise_and_only_the_boundary_maps_product_errors():
    """No cli module catches a product error class to map it, but main.py's one boundary; an except that
    keeps a behaviour (a loop that goes on) catches `SourceFailed`, the family, and never maps it to a code."""
    found = []
    for path in sorted((REPO / "kijito_pull" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
                         for n in ast.walk(node.type)}
                if names & PRODUCT_ERRORS:
                    found.append(f"{path.name}:{node.lineno}")
    assert len(found) == 1 and found[0].startswith("main.py:"), found


def test_one_personas_failed_source_is_its_line_and_the_others_still_get_their_mail(world):
    """`Carry`: a pull of several personas goes on past one whose state cannot be used, and exits 1."""
    from kijito_pull.core.paths import Paths

    cli = world.cli()
    river = world.sb.send(PERSONA, "loom", "for river")
    world.sb.send("argus", "loom", "for argus")
    _, lock = Paths(cli.environ).cursor_files(world.sb.url, "argus", "agent")
    lock.mkdir(parents=True)  # a directory where argus's lock file belongs: its pull fails, river's does not
    result = cli("--once", "--json", "--persona", "argus", "--persona", PERSONA)
    assert result.code == 1 and result.new_ids == [river]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("kijito-pull: argus: ") and "nothing was acknowledged" in line
