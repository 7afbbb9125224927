"""`kijito-pull exec -- COMMAND ...` (kijito_pull.cli.exec_cmd) as a real process running a real command,
against the sandbox over real HTTP. The commands are small Python programs that record what they were
handed (stdin, argv, environment) in a file and exit as told; each test then asks the cursor
(`kijito-pull status --json`) and a script on the same cursor (`kijito-pull --once --json`) what is
acknowledged and what is still unseen. The real `claude -p --bare` is run by tests/e2e.
"""

from __future__ import annotations

import json
import signal
import sys

import pytest

from kijito_pull.core import render
from tests.waiting import until

TOKEN = "exec-token-31d9"  # tests/conftest.py's `sb` serves it; the tests check it never reaches the command
PERSONA = "river"
PY = sys.executable


def status(cli) -> dict:
    result = cli("status", "--json")
    assert result.code == 0, result.stderr
    [row] = result.events
    return row


def unseen(cli) -> list[int]:
    """What a script on the same cursor is handed now."""
    result = cli("--once", "--json", "--persona", PERSONA)
    assert result.code == 0, result.stderr
    return result.new_ids


def establish_cursor(cli, sb) -> int:
    mid = sb.send(to=PERSONA, sender="loom", content="before")
    assert unseen(cli) == [mid]
    return mid


def program(body: str) -> list[str]:
    """A command line running `body` as Python (no shell)."""
    return [PY, "-c", body]


def run_exec(cli, *command: str, extra: tuple[str, ...] = ()):
    return cli.run("exec", "--persona", PERSONA, *extra, "--", *command)


RECORD_STDIN = "import sys; data = sys.stdin.read(); open(sys.argv[1], 'w').write(data); sys.exit(int(sys.argv[2]))"


def test_mail_on_stdin_is_acknowledged_when_the_command_exits_0(cli, sb, tmp_path):
    before = establish_cursor(cli, sb)
    ids = [sb.send(to=PERSONA, sender="loom", content=f"please look at item {i}") for i in range(2)]
    got = tmp_path / "stdin.txt"
    result = run_exec(cli, *program(RECORD_STDIN), str(got), "0")
    assert result.code == 0, result.stderr
    text = got.read_text()
    assert "please look at item 0" in text and "please look at item 1" in text
    assert all(render.ref(PERSONA, i) in text for i in ids)
    assert f"handing 2 message(s) to {PY} (ids {ids[0]}, {ids[1]})" in result.stderr
    row = status(cli)
    assert row["pending"] == [] and row["cursor"] >= before
    assert unseen(cli) == []  # acknowledged: nobody is handed them again
    assert status(cli)["cursor"] == ids[-1]


@pytest.mark.parametrize("code", [1, 3, 255])
def test_a_command_that_fails_leaves_its_mail_unseen(cli, sb, tmp_path, code):
    before = establish_cursor(cli, sb)
    ids = [sb.send(to=PERSONA, sender="loom", content=f"m{i}") for i in range(2)]
    got = tmp_path / "stdin.txt"
    result = run_exec(cli, *program(RECORD_STDIN), str(got), str(code))
    assert result.code == code  # the command's own status
    assert all(render.ref(PERSONA, i) in got.read_text() for i in ids)  # it was handed the mail...
    assert f"exited {code}; the 2 message(s) it was handed are unseen again" in result.stderr
    assert "arrived during the run" not in result.stderr and "did not fit" not in result.stderr
    row = status(cli)
    assert row["cursor"] == before
    assert [(p["holder"], p["ids"]) for p in row["pending"]] == [(None, ids)]  # released, count kept
    assert unseen(cli) == ids  # ...and it is not lost


def test_a_command_killed_by_a_signal_leaves_its_mail_unseen(cli, sb):
    before = establish_cursor(cli, sb)
    mid = sb.send(to=PERSONA, sender="loom", content="die")
    result = run_exec(cli, *program("import os, signal, sys; sys.stdin.read(); os.kill(os.getpid(), signal.SIGKILL)"))
    assert result.code == 128 + signal.SIGKILL  # as a shell reports it
    assert "was ended by SIGKILL; the 1 message(s) it was handed are unseen again" in result.stderr
    assert "arrived during the run" not in result.stderr
    assert status(cli)["cursor"] == before
    assert unseen(cli) == [mid]


def test_waiting_mail_that_did_not_fit_in_the_input_is_announced_and_kept(cli, sb, tmp_path):
    establish_cursor(cli, sb)
    ids = [sb.send(to=PERSONA, sender="loom", content=f"short {i}") for i in range(60)]
    got = tmp_path / "stdin.txt"
    result = run_exec(cli, *program(RECORD_STDIN), str(got), "0")
    assert result.code == 0, result.stderr
    handed = [i for i in ids if render.ref(PERSONA, i) in got.read_text()]
    assert handed == ids[:len(handed)] and 0 < len(handed) < len(ids)  # what fits, oldest first
    rest = ids[len(handed):]
    assert f"{len(rest)} more message(s) for {PERSONA} did not fit in this run's input (ids {rest[0]}," in result.stderr
    assert "arrived during the run" not in result.stderr
    assert unseen(cli) == rest  # acknowledged only what it was handed


def test_the_placeholder_argument_carries_the_mail_instead_of_stdin(cli, sb, tmp_path):
    establish_cursor(cli, sb)
    mid = sb.send(to=PERSONA, sender="loom", content="in an argument")
    got = tmp_path / "argv.json"
    body = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"
    result = run_exec(cli, *program(body), str(got), "before", "{kijito-mail}", "after")
    assert result.code == 0, result.stderr
    argv = json.loads(got.read_text())
    assert argv[0] == "before" and argv[2] == "after" and len(argv) == 3  # one argument, no shell splitting
    assert "in an argument" in argv[1] and render.ref(PERSONA, mid) in argv[1]
    assert unseen(cli) == []


def test_neither_the_kijito_token_nor_the_redis_password_is_passed_to_the_command(cli, sb, tmp_path):
    establish_cursor(cli, sb)
    sb.send(to=PERSONA, sender="loom", content="hello")
    got = tmp_path / "env.json"
    body = "import json, os, sys; sys.stdin.read(); open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))"
    password = "redis-pw-77c1"  # set as a fleet host's environment would; this run reads Kijito, not Redis
    result = cli.run("exec", "--persona", PERSONA, "--", *program(body), str(got),
                     env={"KIJITO_PULL_REDIS_PASSWORD": password, "GH_TOKEN": "the-agents-own"})
    assert result.code == 0, result.stderr
    seen = json.loads(got.read_text())
    assert "KIJITOMON_TOKEN" not in seen and TOKEN not in json.dumps(seen)
    assert "KIJITO_PULL_REDIS_PASSWORD" not in seen and password not in json.dumps(seen)
    assert seen["GH_TOKEN"] == "the-agents-own"  # the agent's own credentials are the agent's
    assert seen["KIJITO_BASE"] == sb.url  # the rest of the environment is the command's


def test_with_no_mail_the_command_runs_without_input_and_its_status_is_passed_on(cli, sb, tmp_path):
    establish_cursor(cli, sb)
    got = tmp_path / "ran.txt"
    body = "import sys; open(sys.argv[1], 'w').write('ran'); print('out of the command'); sys.exit(5)"
    result = run_exec(cli, *program(body), str(got))
    assert result.code == 5 and got.read_text() == "ran"
    assert result.stdout == "out of the command\n"  # its stdout is its own, untouched
    assert "handing" not in result.stderr


def test_mail_held_by_a_running_exec_goes_to_no_one_else(cli, sb, tmp_path):
    establish_cursor(cli, sb)
    mid = sb.send(to=PERSONA, sender="loom", content="for the run only")
    started, go = tmp_path / "started", tmp_path / "go"
    body = ("import os, sys, time\nsys.stdin.read()\nopen(sys.argv[1], 'w').close()\n"
            "while not os.path.exists(sys.argv[2]): time.sleep(0.02)\n")
    proc = cli.spawn("exec", "--persona", PERSONA, "--", *program(body), str(started), str(go))
    try:
        assert until(started.exists, timeout=20.0), "the command never started"
        assert unseen(cli) == []  # pending with a live exec process: not handed to a script...
        [held] = status(cli)["pending"]
        assert held["ids"] == [mid] and held["holder"].startswith("exec:")
        late = sb.send(to=PERSONA, sender="loom", content="arrived during the run")
        go.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    # Mail that arrived during the run is announced, not handed to a run that is over.
    assert f"1 new message(s) for {PERSONA} arrived during the run (ids {late})" in err
    assert unseen(cli) == [late]


def test_when_the_inbox_cannot_be_read_the_command_is_not_run(cli, sb, tmp_path):
    establish_cursor(cli, sb)
    sb.send(to=PERSONA, sender="loom", content="unreachable")
    sb.add_fault({"kind": "status", "status": 401, "path": "/api/inbox"})
    got = tmp_path / "ran.txt"
    body = "import sys; open(sys.argv[1], 'w').write('ran')"
    result = run_exec(cli, *program(body), str(got))
    assert result.code == 1 and not got.exists()
    assert "the inbox could not be read" in result.stderr and "not running the command" in result.stderr

    result = run_exec(cli, *program(body), str(got), extra=("--run-anyway",))
    assert result.code == 0 and got.read_text() == "ran"
    assert "running without mail" in result.stderr
    sb.clear_faults()
    assert len(unseen(cli)) == 1  # nothing was acknowledged either way


def test_usage_errors(cli, sb, tmp_path):
    result = cli.run("exec", "--persona", PERSONA)
    assert result.code == 2 and "no command given" in result.stderr
    result = run_exec(cli, str(tmp_path / "no-such-command"))
    assert result.code == 127 and "command not found" in result.stderr
    assert sb.requests == []  # decided before any request


