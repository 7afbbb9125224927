"""`kijito-pull doctor`: each problem named with its fix, a healthy sandbox setup passing, the JSON shape,
and the token never shown."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kijito_pull import doctor
from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses.session import lifecycle
from tests.clirunner import REPO, unprivileged

TOKEN = "tok-DoctorSecret-8f3a1c"


def run(argv, environ, cwd):
    out, err = io.StringIO(), io.StringIO()
    code = main(["doctor", *argv], Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                               environ=environ, cwd=str(cwd)))
    return code, out.getvalue(), err.getvalue()


def findings(stdout: str) -> dict[str, dict]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return {row["check"]: row for row in rows}


@pytest.fixture
def machine(tmp_path):
    """A home with an opted-in project, a bin dir on PATH holding only kijito-pull, no config file."""
    home = tmp_path / "home"
    project = tmp_path / "work" / "proj"
    bindir = tmp_path / "bin"
    for d in (home, project, bindir):
        d.mkdir(parents=True)
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text("# agents\n\n- inbox monitor: raise on start\n- inbox persona: river\n")
    exe = bindir / "kijito-pull"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    environ = {
        "HOME": str(home),
        "PATH": str(bindir),
        "KIJITO_PULL_CONFIG": os.devnull,  # no config file; a test that wants one names it
        "KIJITO_PULL_STATE_DIR": str(home / ".local" / "state" / "kijito-pull"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    return {"home": home, "project": project, "bin": bindir, "environ": environ}


def fake_harness(bindir: Path, name: str) -> None:
    exe = bindir / name
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)


def test_broken_machine_names_each_problem_and_its_fix(machine, tmp_path):
    home, environ = machine["home"], dict(machine["environ"])
    # A world-readable token file named by the config file, a state dir inside the cache dir, and a
    # Claude Code on PATH with the plugin not installed, in an opted-in project.
    token_file = home / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    config = home / ".config" / "kijito-pull" / "config.toml"
    environ["KIJITO_PULL_CONFIG"] = str(config)
    config.parent.mkdir(parents=True)
    config.write_text(f'token_file = "{token_file}"\n')
    environ["KIJITO_PULL_STATE_DIR"] = str(home / ".cache" / "kijito-pull")
    fake_harness(machine["bin"], "claude")

    code, out, err = run(["--json"], environ, machine["project"])
    assert code == 1, out + err
    got = findings(out)

    token = got["token"]
    assert token["verdict"] == "fail"
    assert "readable by other users" in token["detail"] and "0644" in token["detail"]
    assert token["fix"] == f"chmod 600 {token_file}"

    state = got["state_dir"]
    assert state["verdict"] == "fail"
    assert "inside the cache directory" in state["detail"]
    assert "KIJITO_PULL_STATE_DIR" in state["fix"]

    claude = got["harness.claude"]
    assert claude["verdict"] == "fail"
    assert "not wired" in claude["detail"]
    assert "kijito-pull install claude" in claude["fix"]

    # No token, so no request: the reachability check says why it did not run.
    assert got["reachability"]["verdict"] == "warn"
    assert "not checked" in got["reachability"]["detail"]
    assert TOKEN not in out + err


def test_missing_token_is_named_with_its_fix(machine):
    code, out, err = run([], machine["environ"], machine["project"])
    assert code == 1
    line = next(line for line in out.splitlines() if " token " in line)
    assert "FAIL" in line and "no token" in line
    assert "KIJITOMON_TOKEN" in out and "fix:" in out
    assert "would stop mail reaching the agent" in out


def test_missing_token_json(machine):
    code, out, _ = run(["--json"], machine["environ"], machine["project"])
    got = findings(out)
    assert code == 1
    assert got["token"]["verdict"] == "fail"
    assert "export KIJITOMON_TOKEN" in got["token"]["fix"]


def test_healthy_setup_against_the_sandbox(machine, sandbox):
    sandbox.add_persona("river")
    sandbox.send("river", "loom", "hello")
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    # A private state dir with a cursor in it, as a previous pull leaves it.
    state = Path(environ["KIJITO_PULL_STATE_DIR"])
    code, out, err = run([], environ, machine["project"])
    assert code == 0, out + err
    assert "FAIL" not in out
    assert "Everything checked is fine." in out or "Mail can reach the agent" in out

    pulled = main(["--once", "--persona", "river"], Environment(stdout=io.StringIO(), stderr=io.StringIO(),
                                                                environ=environ, cwd=str(machine["project"])))
    assert pulled == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    code, out, err = run(["--json"], environ, machine["project"])
    got = findings(out)
    assert code == 0, out
    assert {row["verdict"] for row in got.values()} <= {"ok", "warn"}
    for check in ("token", "api_base", "optin", "reachability", "persona", "state_dir", "cursors"):
        assert got[check]["verdict"] == "ok", got[check]
    assert "private" in got["state_dir"]["detail"]
    assert "1 cursor" in got["cursors"]["detail"]
    # The peek marked nothing read, and the doctor sent exactly one inbox request per run.
    assert all(not m["read"] for m in sandbox.messages("river"))
    inbox = [r for r in sandbox.requests if r.get("path") == "/api/inbox"]
    assert inbox and all(r["query"].get("mark_read") == "false" for r in inbox)
    assert any(r["query"].get("limit") == "1" for r in inbox)


def test_json_shape(machine, sandbox):
    sandbox.add_persona("river")
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    code, out, _ = run(["--json"], environ, machine["project"])
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [r["check"] for r in rows] == list(doctor.CHECK_IDS)
    for row in rows:
        assert set(row) == {"check", "verdict", "detail", "fix"}
        assert row["verdict"] in ("ok", "warn", "fail")
        assert isinstance(row["detail"], str) and row["detail"]
        assert row["fix"] is None or isinstance(row["fix"], str)
        if row["verdict"] != "ok":
            assert row["fix"], row


def test_exactly_one_peek_request(machine, sandbox):
    sandbox.add_persona("river")
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    sandbox.clear_requests()
    run([], environ, machine["project"])
    paths = [r.get("path") for r in sandbox.requests]
    assert paths.count("/api/inbox") == 1
    peek = next(r for r in sandbox.requests if r.get("path") == "/api/inbox")
    assert peek["query"] == {"persona": "river", "mark_read": "false", "limit": "1"}
    assert set(paths) <= {"/api/inbox", "/api/personas"}


def test_rejected_token_never_shown(machine, sandbox):
    environ = {**machine["environ"], "KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sandbox.url}
    for argv in ([], ["--json"], ["-v"]):
        code, out, err = run(argv, environ, machine["project"])
        assert code == 1
        assert TOKEN not in out + err
    got = findings(run(["--json"], environ, machine["project"])[1])
    # The server answered: the token is what is wrong, and the token finding says so.
    assert got["token"]["verdict"] == "fail" and "rejected it (401)" in got["token"]["detail"]
    assert "expired or revoked" in got["token"]["fix"]
    assert got["reachability"]["verdict"] == "ok" and "rejected the token (401)" in got["reachability"]["detail"]
    assert got["persona"]["detail"].endswith("not looked up: the server rejected the token")


def test_without_a_persona_it_never_says_mail_can_reach_the_agent(machine, sandbox, tmp_path):
    """No persona (not an opted-in folder, none given): no peek is sent, and the summary does not claim
    that mail can reach the agent."""
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    plain = tmp_path / "plain"
    plain.mkdir()
    code, out, _err = run([], environ, plain)
    assert code == 0, out
    assert "Mail can reach the agent" not in out
    assert "whether it reaches the agent was not checked: no persona was given" in out
    assert "not checked: no persona" in findings(run(["--json"], environ, plain)[1])["reachability"]["detail"]


def pulled_twice(machine, sandbox) -> tuple[dict, Path]:
    """An environment whose river cursor has been saved twice (so its last good copy, .prev, exists)."""
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    for text in ("one", "two"):
        sandbox.send("river", "loom", text)
        assert main(["--once", "--persona", "river"], Environment(stdout=io.StringIO(), stderr=io.StringIO(),
                                                                  environ=environ, cwd=str(machine["project"]))) == 0
    (state,) = (Path(environ["KIJITO_PULL_STATE_DIR"]) / "cursors").glob("*.json")
    assert state.with_name(state.name + ".prev").exists()
    return environ, state


def test_a_damaged_cursor_restored_from_its_last_good_copy_is_shown(machine, sandbox):
    sandbox.add_persona("river")
    environ, state = pulled_twice(machine, sandbox)
    state.write_bytes(b'{"version": 1, "cursor": tr')
    got = findings(run(["--json"], environ, machine["project"])[1])
    assert got["cursors"]["verdict"] == "warn"
    assert "damaged (" in got["cursors"]["detail"] and "restored from its last good copy" in got["cursors"]["detail"]
    out = io.StringIO()
    assert main(["status"], Environment(stdout=out, stderr=io.StringIO(), environ=environ,
                                        cwd=str(machine["project"]))) == 0
    assert "DAMAGED (" in out.getvalue() and "restored from its last good copy (.prev)" in out.getvalue()
    out = io.StringIO()
    main(["status", "--json"], Environment(stdout=out, stderr=io.StringIO(), environ=environ, cwd="."))
    (row,) = map(json.loads, out.getvalue().splitlines())
    assert row["restored"] and row["status"] == "ok"


HOLD_AND_LEAVE = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, str(os.getpid()).encode())
child = os.fork()
if child == 0:  # inherits the locked descriptor, and with it the lock
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
"""


def test_a_lock_inherited_from_an_exited_pid_names_the_live_holder(machine, sandbox):
    import subprocess
    import sys

    sandbox.add_persona("river")
    environ, state = pulled_twice(machine, sandbox)
    lock = state.with_suffix(".lock")
    proc = subprocess.run([sys.executable, "-c", HOLD_AND_LEAVE, str(lock)], capture_output=True, text=True,
                          timeout=30)
    child = int(proc.stdout)
    try:
        got = findings(run(["--json"], environ, machine["project"])[1])
        detail = got["cursors"]["detail"]
        written = lock.read_text()  # the pid that took the lock, which has exited
        assert f"locked by pid {child} (inherited; pid {written} exited)" in detail, detail
    finally:
        os.kill(child, 9)


def test_token_from_file_never_shown(machine, sandbox):
    token_file = machine["home"] / "token"
    token_file.write_text(sandbox.token + "\n")
    token_file.chmod(0o600)
    environ = {**machine["environ"], "KIJITO_BASE": sandbox.url}
    sandbox.add_persona("river")
    code, out, err = run(["--token-file", str(token_file)], environ, machine["project"])
    assert code == 0, out
    assert sandbox.token not in out + err
    assert "--token-file" in out and "0600" in out


def test_forbidden_and_unreachable(machine, sandbox):
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    sandbox.add_fault({"kind": "status", "status": 403, "path": "/api/inbox"})
    got = findings(run(["--json"], environ, machine["project"])[1])
    assert got["reachability"]["verdict"] == "fail"
    assert "403" in got["reachability"]["detail"] and "firewall" in got["reachability"]["detail"]
    sandbox.clear_faults()

    closed = {**environ, "KIJITO_BASE": "http://127.0.0.1:9"}
    code, out, _ = run(["--json", "--timeout", "2"], closed, machine["project"])
    got = findings(out)
    assert code == 1
    assert got["reachability"]["verdict"] == "fail"
    assert "connection failed" in got["reachability"]["detail"]


def test_plain_http_to_a_remote_host_fails(machine):
    environ = {**machine["environ"], "KIJITOMON_TOKEN": TOKEN}
    code, out, _ = run(["--json", "--api-base", "http://example.com"], environ, machine["project"])
    got = findings(out)
    assert code == 1
    assert got["api_base"]["verdict"] == "fail"
    assert "https://" in got["api_base"]["fix"]


def test_case_variant_persona(machine, sandbox):
    sandbox.add_persona("River")
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    code, out, _ = run(["--json"], environ, machine["project"])
    got = findings(out)
    assert code == 1
    assert got["persona"]["verdict"] == "fail"
    assert "River" in got["persona"]["detail"] and "case-sensitive" in got["persona"]["detail"]
    assert "inbox persona: River" in got["persona"]["fix"]


def test_state_dir_modes_and_stale_lease_and_stop_marker(machine):
    environ = machine["environ"]
    state = Path(environ["KIJITO_PULL_STATE_DIR"])
    lifecycle.set_stop(environ, str(machine["project"]), "river")
    sessions = state / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / "dead-session.json").write_text(json.dumps({"session_id": "dead-session", "pid": 2 ** 22 + 12345,
                                                            "pid_start": "1", "persona": "river"}))
    os.chmod(sessions / "dead-session.json", 0o644)
    got = findings(run(["--json"], environ, machine["project"])[1])
    assert got["state_dir"]["verdict"] == "warn"
    assert "dead-session.json" in got["state_dir"]["detail"] and "chmod" in got["state_dir"]["fix"]
    assert got["leases"]["verdict"] == "warn" and "stale" in got["leases"]["detail"]
    assert got["stop_marker"]["verdict"] == "warn"
    assert got["stop_marker"]["fix"].startswith("kijito-pull session start")


def test_state_dir_not_writable(machine, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        environ = {**machine["environ"], "KIJITO_PULL_STATE_DIR": str(locked), "PYTHONPATH": str(REPO)}
        # a real process, and as root one that cannot ignore the mode (root can write anywhere)
        ran = subprocess.run([*unprivileged(), sys.executable, "-m", "kijito_pull", "doctor", "--json"], env=environ,
                             cwd=machine["project"], capture_output=True, text=True, timeout=60)
        got = findings(ran.stdout)
        assert got["state_dir"]["verdict"] == "fail" and "not writable" in got["state_dir"]["detail"], ran.stderr
    finally:
        locked.chmod(0o700)


def test_waker_of_the_current_session(machine):
    environ = {**machine["environ"], "CLAUDE_CODE_SESSION_ID": "sess-1", "CLAUDE_CODE_ENTRYPOINT": "cli"}
    got = findings(run(["--json"], environ, machine["project"])[1])
    assert got["waker"]["verdict"] == "warn" and "no waker" in got["waker"]["detail"]
    me = lifecycle.proc(os.getpid())
    lifecycle.acquire(environ, "sess-1", project=str(machine["project"]), persona="river", me=me, host=None)
    got = findings(run(["--json"], environ, machine["project"])[1])
    assert got["waker"]["verdict"] == "ok" and f"pid {os.getpid()}" in got["waker"]["detail"]
    headless = {**machine["environ"], "CLAUDE_CODE_SESSION_ID": "sess-2", "CLAUDE_CODE_ENTRYPOINT": "sdk-cli"}
    got = findings(run(["--json"], headless, machine["project"])[1])
    assert got["waker"]["verdict"] == "ok" and "headless" in got["waker"]["detail"]


def test_wired_harness_with_missing_command_fails(machine):
    from dataclasses import dataclass

    @dataclass
    class W:
        harness: str
        scope: str
        installed: bool
        path: str
        command: str
        command_exists: bool
        detail: str = ""

    def wiring(harness, environ, cwd):
        if harness == "codex":
            return [W("codex", "project", True, f"{cwd}/.codex/hooks.json", "/gone/kijito-pull hook codex-stop",
                      False)]
        return []

    ctx = doctor.Context(environ={**machine["environ"]}, cwd=str(machine["project"]), wiring=wiring)
    doctor.check_optin(ctx)
    by_id = {f.check: f for f in doctor.check_harnesses(ctx)}
    assert by_id["harness.codex"].verdict == "fail"
    assert "/gone/kijito-pull" in by_id["harness.codex"].detail
    assert by_id["harness.claude"].verdict == "ok"  # not on PATH: nothing to wire


def test_terminal_output_has_no_colour_when_piped(machine):
    _, out, _ = run([], machine["environ"], machine["project"])
    assert "\033[" not in out
    assert "FAIL" in out and "OK" in out


def _codex_hooks(project: Path, executable: str) -> None:
    hooks = {"hooks": {event: [{"hooks": [{"type": "command", "command": f"{executable} hook {name}", "timeout": 15}]}]
                       for event, name in (("SessionStart", "codex-session-start"), ("Stop", "codex-stop"))}}
    (project / ".codex").mkdir(exist_ok=True)
    (project / ".codex" / "hooks.json").write_text(json.dumps(hooks))


def test_wiring_from_the_installers_codex(machine):
    """The real read-only installers API: Codex hooks in the project, pointing at a command that exists,
    then at one that does not."""
    project, environ = machine["project"], machine["environ"]
    _codex_hooks(project, str(machine["bin"] / "kijito-pull"))
    got = findings(run(["--json"], environ, project)[1])
    assert got["harness.codex"]["verdict"] == "ok", got["harness.codex"]
    assert "wired: project" in got["harness.codex"]["detail"]

    _codex_hooks(project, "/gone/venv/bin/kijito-pull")
    code, out, _ = run(["--json"], environ, project)
    got = findings(out)
    assert got["harness.codex"]["verdict"] == "fail", got["harness.codex"]
    assert "/gone/venv/bin/kijito-pull" in got["harness.codex"]["detail"]
    assert "kijito-pull install codex" in got["harness.codex"]["fix"]
