"""Reliability over real processes: kill -9 at any moment, concurrent pullers, and the token kept secret.

(a) scripts/crash_trials.py SIGKILLs `kijito-pull --once --json` at random moments and checks that
    nothing is lost, order holds, and no kill causes more than one duplicate (one ack per message).
(b) Eight `--once` processes on one persona and consumer, mail arriving before and during, and one
    of them holding the lock through a slow request: every message exactly once overall, all exit 0,
    no lock left behind.
(c) The token never appears in stdout, stderr, the state directory or any process's argv, for
    `--once`, `status`, `show`, `send` and a run rejected with 401 (whose wrong token is not echoed).
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kijito_pull.sandbox import Sandbox
from tests.clirunner import REPO, Cli
from tests.entrypoints import argv_of_tree

PERSONA = "relbot"


def _lock_rows(cli: Cli) -> list[dict]:
    status = cli.run("status", "--json")
    assert status.code == 0, status.stderr
    return [json.loads(line) for line in status.stdout.splitlines() if line.strip()]


# -- (a) kill -9 crash trials ----------------------------------------------------------------------


@pytest.mark.slow
def test_crash_trials_lose_nothing_and_duplicate_at_most_once_per_kill(tmp_path):
    seed = secrets.randbelow(2**31)
    cmd = [sys.executable, str(REPO / "scripts" / "crash_trials.py"), "--trials", "200", "--json",
           "--seed", str(seed), "--max-batch", "20", "--big-batch", "60", "--workdir", str(tmp_path / "work")]
    # ~60 s on an idle 2-core machine (nearly all of it interpreter start-ups of the killed children);
    # the timeout is a deadlock guard with room for a loaded machine, not a performance bound.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary (exit {proc.returncode}); stderr:\n{proc.stderr[-3000:]}"
    s = json.loads(lines[-1])
    context = f"seed={seed}: {json.dumps(s)}"
    assert s["problems"] == [], context
    assert s["lost"] == 0, context
    assert s["delivered"] == s["sent"], context
    assert s["max_dup_per_kill"] <= 1, context
    assert s["duplicates"] <= s["kills"], context
    # The trials must really have exercised crashes, or the zeros above prove nothing.
    assert s["trials"] == 200, context
    assert s["kills"] >= 100, context
    assert s["killed_during_delivery"] >= 20, context
    assert s["backward_pages"] > 0, context
    assert s["self_echo_sent"] > 0, context
    assert proc.returncode == 0, context


# -- (b) concurrent pullers ------------------------------------------------------------------------


def test_concurrent_once_runs_deliver_each_message_exactly_once(tmp_path):
    token = "conc-" + secrets.token_hex(8)
    with Sandbox(token=token, window_limit=20).start() as sb:
        cli = Cli(sb.url, token, tmp_path / "state")
        first = cli.run("--once", "--json", "--persona", PERSONA, "--consumer", "shared")
        assert first.code == 0, first.stderr  # cursor established: everything below is NORMAL mode

        sent = [sb.send(to=PERSONA, sender="river", content=f"before {i}") for i in range(45)]
        for i in range(10):
            sb.send(to="elsewhere", sender="river", content=f"noise {i}")
        # The first puller to reach the server holds the cursor's lock through a 1 s answer, so the
        # others really wait on the lock (bounded by --lock-timeout) instead of merely taking turns.
        sb.add_fault({"kind": "hang", "seconds": 1, "path": "/api/inbox", "persona": PERSONA, "times": 1})

        stop = threading.Event()
        during: list[int] = []

        def keep_sending():  # until every puller has exited, so late lock holders find new mail too
            n = 0
            while not stop.is_set() and n < 5000:
                during.append(sb.send(to=PERSONA, sender="loom", content=f"during {n}"))
                n += 1
                stop.wait(0.005)

        sender = threading.Thread(target=keep_sending)
        sender.start()
        started = time.monotonic()
        # Output goes to files, not pipes: a puller blocked writing to a pipe this test is not reading
        # yet would hold the lock and make the others time out.
        procs, files = [], []
        for n in range(8):
            out_path, err_path = tmp_path / f"{n}.out", tmp_path / f"{n}.err"
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                procs.append(cli.spawn("--once", "--json", "--persona", PERSONA, "--consumer", "shared",
                                       "--lock-timeout", "30", stdout=out, stderr=err))
            files.append((out_path, err_path))
        results = []
        try:
            for p, (out_path, err_path) in zip(procs, files):
                p.wait(timeout=60)  # a deadlock fails here
                results.append((p.returncode, out_path.read_text(), err_path.read_text()))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            stop.set()
            sender.join()
        elapsed = time.monotonic() - started
        assert [code for code, _, _ in results] == [0] * 8, [err for _, _, err in results]

        # Then sweep up what arrived after the last of them took the lock.
        runs = [[json.loads(line)["id"] for line in out.splitlines()
                 if line.strip() and json.loads(line)["event"] == "new"] for _, out, _ in results]
        for _ in range(3):
            more = cli.run("--once", "--json", "--persona", PERSONA, "--consumer", "shared")
            assert more.code == 0, more.stderr
            runs.append(more.new_ids)
            if not more.new_ids:
                break

        everything = [i for run in runs for i in run]
        expected = sent + during
        assert during, "nothing was sent while the pullers ran"
        assert len(everything) == len(set(everything)), "a message was delivered twice"
        assert sorted(everything) == sorted(expected), "a message was lost or invented"
        for run in runs:
            assert run == sorted(run)
        assert sum(1 for run in runs[:8] if run) >= 2, "only one puller delivered: no contention was tested"
        assert elapsed < 60
        rows = _lock_rows(cli)
        assert [r["consumer"] for r in rows] == ["shared"]
        assert rows[0]["lock"] == "free", rows
        assert rows[0]["cursor"] == max(expected)


# -- (c) the token stays secret --------------------------------------------------------------------


class _Secret:
    """A token and the ways it could leak: whole, or a distinctive piece of it."""

    def __init__(self, prefix: str):
        self.value = f"{prefix}-{secrets.token_hex(16)}"
        self.pieces = [self.value, self.value[-16:], self.value[-32:-16]]

    def find_in(self, data: bytes | str) -> list[str]:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        return [p for p in self.pieces if p in text]


def _wait_for_request(sb: Sandbox, path: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r["path"] == path and r["status"] is None for r in sb.requests):
            return
        time.sleep(0.01)
    raise AssertionError(f"no held request to {path}")


def _run_held(cli: Cli, sb: Sandbox, path: str, argv: list[str]) -> tuple[int, str, str, list[bytes]]:
    """Run a command whose request to `path` the sandbox holds for 3 s; read argv while it is held."""
    sb.clear_requests()
    sb.add_fault({"kind": "hang", "seconds": 3, "path": path, "times": 1})
    proc = cli.spawn(*argv)
    argvs = argv_of_tree(proc.pid)
    _wait_for_request(sb, path)
    argvs += argv_of_tree(proc.pid)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err, argvs


def _assert_no_leak(what: str, secrets_: list[_Secret], *blobs: bytes | str) -> None:
    for s in secrets_:
        for blob in blobs:
            found = s.find_in(blob)
            assert not found, f"{what}: token material {found} leaked in {blob[:400]!r}"


def _state_blobs(state_dir: Path) -> list[bytes]:
    return [p.read_bytes() for p in state_dir.rglob("*") if p.is_file()]


def test_the_token_never_appears_in_output_state_or_argv(tmp_path):
    token = _Secret("kjt")
    wrong = _Secret("wrong")
    both = [token, wrong]
    with Sandbox(token=token.value, window_limit=20).start() as sb:
        state = tmp_path / "state"
        cli = Cli(sb.url, token.value, state)
        mid = sb.send(to=PERSONA, sender="river", content="hello")

        code, out, err, argvs = _run_held(cli, sb, "/api/inbox", ["--once", "--json", "--persona", PERSONA])
        assert code == 0, err
        assert [json.loads(line)["id"] for line in out.splitlines()] == [mid]
        assert len(argvs) >= 2
        _assert_no_leak("--once --json", both, out, err, *argvs, *_state_blobs(state))

        sb.send(to=PERSONA, sender="river", content="second")
        code, out, err, argvs = _run_held(cli, sb, "/api/inbox", ["--once", "--persona", PERSONA])
        assert code == 0 and "second" in out, err
        _assert_no_leak("--once (text)", both, out, err, *argvs)

        code, out, err, argvs = _run_held(cli, sb, "/api/inbox", ["show", str(mid), "--persona", PERSONA])
        assert code == 0 and "hello" in out, err
        _assert_no_leak("show", both, out, err, *argvs)

        code, out, err, argvs = _run_held(cli, sb, "/api/send", ["send", "--to", PERSONA, "--json", "hi"])
        assert code == 0 and json.loads(out)["to"] == PERSONA, err
        _assert_no_leak("send", both, out, err, *argvs)

        for argv in (["status"], ["status", "--json"]):
            proc = cli.spawn(*argv)
            argvs = argv_of_tree(proc.pid)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0 and PERSONA in out, err
            _assert_no_leak(" ".join(argv), both, out, err, *argvs)

        # A rejected token: the run fails with 401 and echoes neither the wrong token nor the right one.
        bad = {"KIJITOMON_TOKEN": wrong.value}
        for argv in (["--once", "--json", "--persona", PERSONA], ["--once", "--persona", PERSONA],
                     ["show", str(mid), "--persona", PERSONA], ["send", "--to", PERSONA, "x"]):
            result = cli.run(*argv, env=bad)
            assert result.code == 1, (argv, result.stderr)
            assert "401" in result.stderr, result.stderr
            _assert_no_leak(f"401 {argv}", both, result.stdout, result.stderr)
        _assert_no_leak("state after 401", both, *_state_blobs(state))

    # The argv of a run with the wrong token, held by a server that accepts and never answers.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        held = Cli(f"http://127.0.0.1:{listener.getsockname()[1]}", wrong.value, state)
        proc = held.spawn("--once", "--json", "--persona", PERSONA, "--timeout", "20")
        try:
            listener.settimeout(20)
            conn, _ = listener.accept()
            with conn:
                argvs = argv_of_tree(proc.pid)
                assert argvs
                _assert_no_leak("held run with a wrong token (argv)", both, *argvs)
        finally:
            proc.kill()
            out, err = proc.communicate(timeout=30)
        _assert_no_leak("held run with a wrong token (output)", both, out, err, *_state_blobs(state))
