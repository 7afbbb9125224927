"""The watcher of an interactive Codex session (`kijito-pull hook codex-watch`), as real processes against
the sandbox, with a stand-in `codex` whose `queue` does what Codex's does to the rollout: the queued text
becomes a user message of the session (or, told to, refuses). The real Codex TUI is woken in
tests/e2e/test_codex_e2e.py; here the rules around it are pinned down:

- a queued batch is pending with the watcher's own holder, so the session's hooks never hand it over too;
- it is confirmed only once the rollout shows it, and the next batch waits until then;
- a refused `codex queue` releases the batch at once (the hooks may hand it over);
- one watcher per session; it ends when the session ends (SessionEnd) or its host process is gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.harnesses.codex.test_hooks import KIJITO_PULL, OPT_IN, PERSONA, TOKEN, _folder
from tests.harnesses.codex.test_rollout import SID, Rollout, Session

FAKE_CODEX = textwrap.dedent("""\
    import json, os, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_CODEX_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    with open(os.environ["FAKE_CODEX_LOG"] + ".env", "a") as log:
        log.write("token " if "KIJITOMON_TOKEN" in os.environ else "none ")
    if args[:1] != ["queue"]:
        sys.exit(2)
    if os.environ.get("FAKE_CODEX_REFUSE") and os.path.exists(os.environ["FAKE_CODEX_REFUSE"]):
        print("error: thread not found", file=sys.stderr)
        sys.exit(1)
    text = args[args.index("--message") + 1]
    if not os.path.exists(os.environ.get("FAKE_CODEX_HOLD", "/nonexistent")):
        with open(os.environ["FAKE_ROLLOUT"], "a") as rollout:
            rollout.write(json.dumps({"type": "response_item", "payload": {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": text}]}}) + "\\n")
    print("Queued message 1 for thread", args[args.index("--thread") + 1])
""")


class Watched(Session):
    def __init__(self, sb, project: Path, state: Path, rollout: Rollout, tmp: Path):
        super().__init__(sb, project, state, rollout)
        codex = tmp / "bin" / "codex"
        codex.parent.mkdir()
        codex.write_text(f"#!{sys.executable}\n" + FAKE_CODEX)
        codex.chmod(0o755)
        self.log = tmp / "codex.log"
        self.log.touch()
        self.refuse = tmp / "refuse"
        self.hold = tmp / "hold"
        self.environ.update({"KIJITO_PULL_CODEX": str(codex), "FAKE_CODEX_LOG": str(self.log),
                             "FAKE_ROLLOUT": str(rollout.path), "FAKE_CODEX_REFUSE": str(self.refuse),
                             "FAKE_CODEX_HOLD": str(self.hold)})
        self.procs: list[subprocess.Popen] = []

    def watch(self, host: subprocess.Popen | None = None) -> subprocess.Popen:
        """Start a watcher the way codex-session-start does: detached, the hook input on stdin."""
        from kijito_pull.core import process

        env = dict(self.environ)
        if host is not None:
            proc = process.proc(host.pid)
            env["KIJITO_PULL_CODEX_HOST"] = f"{proc.pid}:{proc.start}"
        data = {"session_id": SID, "cwd": str(self.project), "transcript_path": str(self.rollout.path),
                "hook_event_name": "SessionStart", "source": "startup"}
        child = subprocess.Popen([KIJITO_PULL, "hook", "codex-watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env, cwd=self.project, text=True)
        child.stdin.write(json.dumps(data))
        child.stdin.close()
        self.procs.append(child)
        return child

    def queued(self) -> list[str]:
        return [json.loads(line)[-1] for line in self.log.read_text().splitlines() if line.startswith('["queue"')]

    def wait(self, predicate, timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def watched(sb, tmp_path):
    project = _folder(tmp_path, "proj", OPT_IN)
    w = Watched(sb, project, tmp_path / "state", Rollout(tmp_path / "rollout.jsonl", "codex-tui"), tmp_path)
    try:
        yield w
    finally:
        w.close()


def _diag(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        return "(still running)"
    return proc.stderr.read()[-3000:]


def test_new_mail_is_queued_once_confirmed_from_the_rollout_and_the_hooks_leave_it_alone(sb, watched):
    watcher = watched.watch()
    sb.send(PERSONA, "loom", "MAIL-QUEUED: build is red")
    assert watched.wait(lambda: watched.queued()), _diag(watcher)
    assert "MAIL-QUEUED: build is red" in watched.queued()[0]
    assert watched.wait(lambda: watched.status() == []), watched.status()  # the rollout shows it: confirmed
    # The session's Stop hook sees nothing new, and nothing is queued twice.
    assert watched.stop() == {}
    time.sleep(1.0)
    assert len(watched.queued()) == 1


def test_the_next_batch_waits_until_codex_took_the_last(sb, watched):
    watched.hold.touch()  # Codex keeps the message queued (the session is busy): the rollout does not show it
    watcher = watched.watch()
    sb.send(PERSONA, "loom", "MAIL-FIRST")
    assert watched.wait(lambda: watched.queued()), _diag(watcher)
    assert [p["holder"] for p in watched.status()] == [f"codex-queue:{SID}"]
    sb.send(PERSONA, "loom", "MAIL-SECOND")
    time.sleep(1.5)
    assert len(watched.queued()) == 1  # one batch in flight at a time
    # The turn's Stop hook neither hands the queued mail over nor blocks with the new one behind it twice.
    stop = watched.stop()
    assert "MAIL-FIRST" not in json.dumps(stop)
    if stop:
        watched.rollout.hook_prompt(stop["reason"])
        assert watched.stop(active=True) == {}  # the next Stop confirms the block from the rollout
    watched.hold.unlink()
    watched.rollout.developer(watched.queued()[0])  # Codex takes the queued turn at last
    assert watched.wait(lambda: all(p["holder"] is None for p in watched.status())), watched.status()
    everything = " ".join(watched.queued()) + json.dumps(stop)
    assert everything.count("MAIL-SECOND") == 1 and everything.count("MAIL-FIRST") == 1


def test_a_refused_queue_releases_the_mail_for_the_hooks(sb, watched):
    watched.refuse.touch()
    watcher = watched.watch()
    sb.send(PERSONA, "loom", "MAIL-REFUSED")
    assert watched.wait(lambda: watched.queued() or len(watched.log.read_text().splitlines()) >= 1), _diag(watcher)
    assert watched.wait(lambda: all(p["holder"] is None for p in watched.status())), watched.status()
    block = watched.stop()
    assert block["decision"] == "block" and "MAIL-REFUSED" in block["reason"]


def test_one_watcher_per_session_and_session_end_ends_it(sb, watched):
    first = watched.watch()
    assert watched.wait(lambda: (Path(watched.environ["KIJITO_PULL_STATE_DIR"]) / "sessions" / f"{SID}.json").exists())
    second = watched.watch()
    assert second.wait(timeout=15) == 0
    assert "already_armed" in second.stderr.read()
    code, out, err = watched.end()
    assert (code, out) == (0, "{}\n"), err
    assert first.wait(timeout=10) is not None


def test_the_watcher_ends_when_its_host_is_gone(sb, watched):
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watcher = watched.watch(host=host)
        assert watched.wait(lambda: (Path(watched.environ["KIJITO_PULL_STATE_DIR"]) / "sessions"
                                     / f"{SID}.json").exists()), _diag(watcher)
        host.kill()
        host.wait()
        assert watcher.wait(timeout=10) == 0
        assert "the session's Codex process is gone" in watcher.stderr.read()
    finally:
        if host.poll() is None:
            host.kill()


def test_the_watcher_gives_codex_no_token(sb, watched):
    watched.watch()
    sb.send(PERSONA, "loom", "MAIL-TOKEN-CHECK")
    assert watched.wait(lambda: watched.queued())
    assert TOKEN not in watched.log.read_text()
    env_log = Path(f"{watched.log}.env")
    assert watched.wait(lambda: env_log.exists() and env_log.read_text())
    assert env_log.read_text().split() == ["none"]
    assert watched.environ["KIJITOMON_TOKEN"] == TOKEN  # the watcher itself had it


def test_session_end_confirms_what_codex_took_even_after_a_hook_read_past_it(sb, watched):
    """The watcher was killed before it saw its queued turn in the rollout, and a Stop hook has read the
    rollout past it since: SessionEnd still confirms it (settling the watcher's holder too), so it is not
    handed over again."""
    import io

    from kijito_pull.cli.main import main
    from kijito_pull.core.environment import Environment

    sb.send(PERSONA, "loom", "MAIL-AT-START")
    started = watched.start()["hookSpecificOutput"]["additionalContext"]  # the hooks hold this one
    watched.hold.touch()  # Codex keeps the watcher's message queued for now
    watcher = watched.watch()
    sb.send(PERSONA, "loom", "MAIL-TAKEN-LATE")
    assert watched.wait(lambda: watched.queued()), _diag(watcher)
    assert "MAIL-AT-START" not in watched.queued()[0]
    watcher.kill()
    watcher.wait(timeout=10)
    watched.rollout.developer(watched.queued()[0])  # then Codex takes the queued turn,
    watched.rollout.developer(started)  # and the session-start context is recorded after it
    # The Stop hook confirms its own hand-over, reading the rollout past the watcher's marker too.
    assert watched.stop() == {}
    code, out, err = watched.end()
    assert (code, out) == (0, "{}\n"), err
    assert [p for p in watched.status() if p["holder"]] == []
    unseen = io.StringIO()
    main(["--once", "--peek", "--persona", PERSONA], Environment(stdout=unseen, stderr=io.StringIO(),
                                                                 environ=watched.environ, cwd=str(watched.project)))
    assert "MAIL-TAKEN-LATE" not in unseen.getvalue()
