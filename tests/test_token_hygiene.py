"""The token never leaks, through any entry point (issue 6, item 7).

Every command and hook runs as a real subprocess with a distinctive token (`kjt-<32 hex>`), and the
token, or either 16-hex half of it, must appear in none of:

- its stdout and stderr;
- the argv of it and of every process under it (`/proc/<pid>/cmdline`), read right after it starts and
  again while the sandbox holds its request (a `hang` fault), so a helper started with the token in its
  arguments would be caught;
- the environment a `--exec` command gets (dumped to a file, and read from `/proc/<pid>/environ` of
  the running command);
- any file the runs left behind: the state dir (cursors, locks, leases, markers), the events file, the
  exec dumps, the project, $HOME.

Entry points: `--once` (JSON and text; token from the environment and from `--token-file`), `watch`
(stdout, `--events-file`, `--emit exec-per-event`, `--self-test`), `exec -- COMMAND` (the command's
environment and what it was handed), the pi child (`watch --ack-stdin`),
`show`, `send`, `status`, `optin`, `doctor`, `session status` and `session arm`, every Claude hook
(`claude-session-start`, `-stop`, `-prompt`, `-waker`, `-session-end`) and both Codex hooks, and
`install ... --dry-run` for each target. Then the failing runs: the same with a wrong (equally
distinctive) token, rejected with 401, which must echo neither token; and a wrong-token run held by a
listener that accepts and never answers, whose argv is read while it waits.

tests/test_reliability.py checks the same for `--once`, `show`, `send` and `status` only.
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from kijito_pull.harnesses.claude.gate import DOORBELL
from kijito_pull.sandbox import Sandbox
from tests.entrypoints import (
    CODEX_SESSION_START,
    CODEX_STOP,
    HOOK_NAMES,
    KIJITO_PULL,
    SESSION_START,
    STOP,
    FileEvents,
    PiChild,
    System,
    argv_of_tree,
    descendants,
)

PERSONA = "tokenbot"
HOLD = 0.6  # seconds the sandbox holds a request while the argv of the process tree is read


class Secret:
    """A token and the ways it could leak: whole, or a distinctive half of it."""

    def __init__(self, prefix: str):
        self.value = f"{prefix}-{secrets.token_hex(16)}"
        self.pieces = [self.value, self.value[-16:], self.value[-32:-16]]

    def found_in(self, data: bytes | str) -> list[str]:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        return [p for p in self.pieces if p in text]


class Audit:
    """Everything a run showed the world, checked for token material."""

    def __init__(self, secrets_: list[Secret]):
        self.secrets = secrets_
        self.checked: list[str] = []
        self.leaks: list[str] = []

    def check(self, what: str, *blobs: bytes | str) -> None:
        self.checked.append(what)
        for s in self.secrets:
            for blob in blobs:
                found = s.found_in(blob)
                if found:
                    self.leaks.append(f"{what}: {found} in {blob[:300]!r}")

    def files(self, root: Path, skip: set[Path]) -> int:
        n = 0
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and path not in skip:
                self.check(f"file {path.relative_to(root)}", path.read_bytes())
                n += 1
        return n


class Runner:
    def __init__(self, sb: Sandbox, system: System, audit: Audit):
        self.sb = sb
        self.system = system
        self.audit = audit

    def _wait_held(self, path: str, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(r["path"] == path and r["status"] is None for r in self.sb.requests):
                return True
            time.sleep(0.01)
        return False

    def start(self, what: str, spawn, hold: str | None) -> tuple[subprocess.Popen, list[bytes]]:
        """Start a process (with its request to `hold` held by the sandbox); its argv tree, read twice."""
        self.sb.clear_requests()
        if hold:
            self.sb.add_fault({"kind": "hang", "seconds": HOLD, "path": hold, "times": 1})
        proc = spawn()
        argvs = argv_of_tree(proc.pid)
        if hold:
            assert self._wait_held(hold), f"{what}: no held request to {hold}"
            argvs += argv_of_tree(proc.pid)
        assert argvs, what
        return proc, argvs

    def run(self, what: str, argv: list[str], *, hold: str | None = "/api/inbox", env: dict | None = None,
            expect: int | None = 0, timeout: float = 60) -> tuple[int, str, str]:
        out, err = self.system.next_paths("tok")
        proc, argvs = self.start(what, lambda: self.system.spawn(argv, out, err, env=env, cwd=self.system.project),
                                 hold)
        code = proc.wait(timeout)
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        if expect is not None:
            assert code == expect, f"{what}: exit {code}; stderr {stderr!r}"
        self.audit.check(what, stdout, stderr, *argvs)
        return code, stdout, stderr

    def hook(self, what: str, entry_or_name: str, payload: str, *, hold: str | None = "/api/inbox",
             env: dict | None = None, expect: int = 0, timeout: float = 60) -> tuple[str, str]:
        out, err = self.system.next_paths("tok-hook")

        def spawn():
            with open(out, "ab") as o, open(err, "ab") as e:
                proc = subprocess.Popen([KIJITO_PULL, "hook", entry_or_name], stdin=subprocess.PIPE, stdout=o,
                                        stderr=e, env={**self.system.env, **(env or {})},
                                        cwd=str(self.system.project))
            proc.stdin.write(payload.encode())
            proc.stdin.close()
            proc.stdin = None
            return proc

        proc, argvs = self.start(what, spawn, hold)
        code = proc.wait(timeout)
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        assert code == expect, f"{what}: exit {code}; stderr {stderr!r}"
        self.audit.check(what, stdout, stderr, *argvs)
        return stdout, stderr


def _claude_payload(system: System, event: str, **fields) -> str:
    return json.dumps({"session_id": "tok-session", "cwd": str(system.project), "hook_event_name": event,
                       **fields})


def test_no_entry_point_shows_the_token_anywhere(tmp_path):
    token, wrong = Secret("kjt"), Secret("wrong")
    audit = Audit([token, wrong])
    work = tmp_path / "work"
    with Sandbox(token=token.value, window_limit=20).start() as sb:
        sb.add_persona(PERSONA, memory_count=1)
        system = System(sb.url, token.value, work, PERSONA)
        r = Runner(sb, system, audit)
        mail = lambda text: sb.send(to=PERSONA, sender="river", content=text)  # noqa: E731

        # --once, JSON and text, the token from the environment and from --token-file
        mid = mail("first")
        _, out, _ = r.run("--once --json", system.once_argv())
        assert [json.loads(line)["id"] for line in out.splitlines()] == [mid]
        mail("second")
        _, out, _ = r.run("--once (text)", system.cli_argv("--once", "--persona", PERSONA))
        assert "second" in out
        token_file = tmp_path / "token"  # outside the scanned tree: it is the one file that holds it
        token_file.write_text(token.value + "\n")
        token_file.chmod(0o600)
        mail("by file")
        _, out, _ = r.run("--once --token-file", system.once_argv("--token-file", str(token_file)),
                          env={"KIJITOMON_TOKEN": ""})
        assert "by file" in out

        # show, send, status, optin, doctor, session status
        _, out, _ = r.run("show", system.cli_argv("show", str(mid), "--persona", PERSONA))
        assert "first" in out
        _, out, _ = r.run("send", system.cli_argv("send", "--to", "elsewhere", "--json", "hi"), hold="/api/send")
        assert json.loads(out)["to"] == "elsewhere"
        for argv in (["status"], ["status", "--json"], ["optin", "--json"], ["session", "status"]):
            r.run(" ".join(argv), system.cli_argv(*argv), hold=None)
        _, out, _ = r.run("doctor", system.cli_argv("doctor", "--persona", PERSONA, "--json"), expect=None)
        assert '"token"' in out

        # watch: NDJSON on stdout, then --events-file, each held at its first inbox read, then fed mail
        events_file = work / "events" / "tokenbot.ndjson"
        for what, extra, stream_of in (("watch (stdout)", [], None), ("watch --events-file",
                                                                      ["--events-file", str(events_file)],
                                                                      events_file)):
            out, err = system.next_paths("tok-watch")
            proc, argvs = r.start(what, lambda extra=extra, out=out, err=err: system.spawn(
                system.watch_argv("--wait", "5", *extra), out, err), "/api/inbox")
            stream = FileEvents(stream_of or out)
            assert stream.wait_for(lambda e: e["event"] == "armed", 20), what
            m = mail(f"for {what}")
            assert stream.wait_for(lambda e, m=m: e.get("id") == m, 20), what
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(20) == 0, what
            audit.check(what, out.read_bytes(), err.read_bytes(), *argvs)

        # watch --emit exec-per-event: the command dumps its environment; its /proc environ is read too
        dumps = work / "exec-env"
        dumps.mkdir()
        command = f'env > "{dumps}/$KIJITOMON_NONCE.env"; sleep 0.5'
        out, err = system.next_paths("tok-exec")
        proc, argvs = r.start("watch --emit exec-per-event", lambda: system.spawn(
            system.watch_argv("--wait", "5", "--emit", "exec-per-event", "--exec", command), out, err), "/api/inbox")
        mail("for exec")
        environs, deadline = [], time.monotonic() + 20
        while time.monotonic() < deadline and not (environs and any(dumps.glob("*.env"))):
            for pid in descendants(proc.pid)[1:]:  # the running --exec command (the shell and its sleep)
                argvs += argv_of_tree(pid)
                try:
                    environs.append(Path(f"/proc/{pid}/environ").read_bytes())
                except OSError:
                    pass
            time.sleep(0.02)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert environs, "never saw a running --exec command"
        dumped = [p.read_bytes() for p in dumps.glob("*.env")]
        assert any(b"KIJITOMON_EVENT=new" in d for d in dumped), dumped
        audit.check("watch --emit exec-per-event", out.read_bytes(), err.read_bytes(), *argvs, *environs, *dumped)

        # watch --self-test, and the pi child
        r.run("watch --self-test", system.watch_argv("--self-test"), hold="/api/inbox")
        child = PiChild.start(system, "--wait", "5")
        argvs = argv_of_tree(child.proc.pid)
        assert child.wait_for(lambda e: e["event"] == "armed", 20)
        m = mail("for pi")
        assert child.wait_for(lambda e: e.get("id") == m, 20)
        argvs += argv_of_tree(child.proc.pid)
        assert child.close() == 0
        audit.check("pi child", child.out.read_bytes(), child.err.read_bytes(), *argvs)

        # every hook, Claude's and Codex's
        for entry in (SESSION_START, STOP, CODEX_SESSION_START, CODEX_STOP):
            mail(f"for {entry}")
            stdout, _ = r.hook(entry, HOOK_NAMES[entry], system.hook_payload(entry))
            assert f"for {entry}" in stdout, (entry, stdout)
        mail("for the doorbell")
        stdout, _ = r.hook("claude-prompt", "claude-prompt",
                           _claude_payload(system, "UserPromptSubmit", prompt=f"{DOORBELL} new mail"))
        assert "for the doorbell" in stdout
        interactive = {"CLAUDE_CODE_ENTRYPOINT": "cli", "KIJITO_PULL_CLAUDE_WAKER": "rewake"}
        mail("for the waker")
        _, stderr = r.hook("claude-waker", "claude-waker",
                           _claude_payload(system, "SessionStart", source="startup"), env=interactive, expect=2)
        assert DOORBELL in stderr
        r.hook("claude-session-end", "claude-session-end", _claude_payload(system, "SessionEnd", reason="exit"),
               hold=None, env=interactive)
        m = mail("for session arm")
        _, out, _ = r.run("session arm", system.cli_argv("session", "arm", "--session-id", "tok-arm", "--persona",
                                                         PERSONA), env=interactive)
        assert str(m) in out

        # exec: the command it runs gets the mail on stdin and dumps its environment (checked with the rest of
        # the files on disk); its /proc environ is read while it runs, too
        m = mail("for exec")
        exec_dump = work / "exec-cmd.env"
        script = (f"import os, sys, time; data = sys.stdin.read(); open({str(exec_dump)!r}, 'w').write("
                  f"repr(dict(os.environ)) + data); time.sleep(0.5)")
        out, err = system.next_paths("tok-exec")
        proc = system.spawn(system.cli_argv("exec", "--persona", PERSONA, "--", sys.executable, "-c", script),
                            out, err, cwd=system.project)
        argvs, environs = argv_of_tree(proc.pid), []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None and not exec_dump.exists():
            time.sleep(0.02)
        for pid in descendants(proc.pid)[1:]:  # the command, sleeping after its dump
            argvs += argv_of_tree(pid)
            try:
                environs.append(Path(f"/proc/{pid}/environ").read_bytes())
            except OSError:
                pass
        assert environs, "never saw the exec command running"
        assert proc.wait(60) == 0, err.read_text()
        assert str(m) in exec_dump.read_text()  # the mail reached the command
        audit.check("exec", out.read_bytes(), err.read_bytes(), *argvs, *environs, exec_dump.read_bytes())

        # install --dry-run for every target (they would write the harness's files; nothing is changed)
        for target in ("claude", "pi", "codex"):
            r.run(f"install {target} --dry-run", system.cli_argv("install", target, "--dry-run"), hold=None,
                  expect=None)
        r.run("install daemon --dry-run", system.cli_argv("install", "daemon", "--dry-run", "--persona", PERSONA),
              hold=None, expect=None)
        r.run("install daemon --relay --dry-run", system.cli_argv("install", "daemon", "--relay", "--redis",
                                                                  "redis://127.0.0.1:6379/0", "--dry-run"),
              hold=None, expect=None)

        # -- the failing runs: a wrong token, rejected with 401, echoed by none of them ------------------
        bad = {"KIJITOMON_TOKEN": wrong.value}
        for what, argv in (("401 --once --json", system.once_argv()),
                           ("401 --once", system.cli_argv("--once", "--persona", PERSONA)),
                           ("401 show", system.cli_argv("show", str(mid), "--persona", PERSONA)),
                           ("401 send", system.cli_argv("send", "--to", PERSONA, "x")),
                           ("401 watch --self-test", system.watch_argv("--self-test"))):
            _, _, stderr = r.run(what, argv, hold=None, env=bad, expect=1)
            assert "401" in stderr, (what, stderr)
        _, out, _ = r.run("401 doctor", system.cli_argv("doctor", "--persona", PERSONA, "--json"), hold=None,
                          env=bad, expect=1)
        assert "401" in out
        for entry in (SESSION_START, STOP, CODEX_SESSION_START, CODEX_STOP):
            name = HOOK_NAMES[entry]
            _, stderr = r.hook(f"401 {name}", name, system.hook_payload(entry), hold=None, env=bad)
            assert "401" in stderr, (name, stderr)
        for what, argv in (("401 watch", system.watch_argv("--wait", "5", "--alert-after", "1")),
                           ("401 pi child", system.watch_argv("--wait", "5", "--alert-after", "1", "--ack-stdin"))):
            out, err = system.next_paths("tok-401-watch")
            proc = system.spawn(argv, out, err, env=bad, stdin=subprocess.PIPE)
            argvs = argv_of_tree(proc.pid)
            assert FileEvents(out).wait_for(lambda e: e["event"] == "alert", 20), (what, err.read_text())
            argvs += argv_of_tree(proc.pid)
            proc.stdin.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
            assert "401" in err.read_text(), what
            audit.check(what, out.read_bytes(), err.read_bytes(), *argvs)

    # A wrong-token run held by a listener that accepts and never answers: its argv tree while it waits.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(20)
        held = System(f"http://127.0.0.1:{listener.getsockname()[1]}", wrong.value, tmp_path / "held", PERSONA)
        for what, spawn in (
                ("held --once", lambda out, err: held.spawn(held.once_argv("--timeout", "20"), out, err)),
                ("held watch", lambda out, err: held.spawn(held.watch_argv("--timeout", "20"), out, err)),
                ("held claude-stop", lambda out, err: held.spawn_hook(STOP, out, err)),
                ("held codex-session-start", lambda out, err: held.spawn_hook(CODEX_SESSION_START, out, err))):
            out, err = held.next_paths("held")
            proc = spawn(out, err)
            try:
                conn, _ = listener.accept()
                with conn:
                    argvs = argv_of_tree(proc.pid)
                    assert argvs, what
            finally:
                proc.kill()
                proc.wait(30)
            audit.check(what, out.read_bytes(), err.read_bytes(), *argvs)

    # Whatever all of that left on disk: state, leases, markers, events, dumps, the project, $HOME.
    scanned = audit.files(work, skip=set()) + audit.files(tmp_path / "held", skip=set())
    assert scanned >= 10
    assert (work / "state" / "cursors").is_dir() and (work / "state" / "sessions").is_dir()
    assert events_file.exists()
    assert not audit.leaks, "\n".join(audit.leaks)
    assert len(audit.checked) >= 40, audit.checked


def test_the_exec_command_gets_no_variable_ending_in_token(tmp_path):
    """Variables named like tokens are stripped from the --exec environment, not only KIJITOMON_TOKEN."""
    token = Secret("kjt")
    other = Secret("other")
    with Sandbox(token=token.value).start() as sb:
        system = System(sb.url, token.value, tmp_path, PERSONA, extra_env={"GITHUB_TOKEN": other.value})
        dump = tmp_path / "env.txt"
        out, err = system.next_paths("exec")
        proc = system.spawn(system.watch_argv("--wait", "5", "--emit", "exec-per-event", "--exec",
                                              f'env >> "{dump}"'), out, err)
        try:
            sb.send(to=PERSONA, sender="river", content="x")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not (dump.exists() and b"KIJITOMON_EVENT=new" in dump.read_bytes()):
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        dumped = dump.read_bytes()
        assert b"KIJITOMON_EVENT=new" in dumped
        assert not token.found_in(dumped) and not other.found_in(dumped), dumped
