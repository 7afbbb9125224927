"""The Codex hooks (`kijito-pull hook codex-session-start | codex-stop`) with Codex-shaped input, against
the sandbox over real HTTP: Codex's rules (one JSON object on stdout, `{}` for nothing, never empty),
the same opt-in gate and fast path as the Claude hooks, no waker, and a Stop that never blocks twice
for the same mail (Codex has no cap of its own on consecutive blocks).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.codex import hooks as codex
from kijito_pull.sandbox import Sandbox

TOKEN = "codex-token-77a"
PERSONA = "river"
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"
NOTHING = "{}\n"


def _folder(tmp_path: Path, name: str, agents: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "AGENTS.md").write_text(agents)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _folder(tmp_path, "proj", OPT_IN)


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    return _folder(tmp_path, "plain", "# A project that did not opt in\n")


class Codex:
    """Runs the Codex hooks in-process for one project and state dir, with Codex-shaped input."""

    def __init__(self, sb: Sandbox | None, project: Path, state: Path, **extra: str):
        self.sb = sb
        self.project = project
        self.environ = {
            "KIJITOMON_TOKEN": TOKEN,
            "KIJITO_BASE": sb.url if sb else "http://127.0.0.1:9",
            "KIJITO_PULL_STATE_DIR": str(state),
            "KIJITO_PULL_CONFIG": os.devnull,
            "PATH": os.environ.get("PATH", ""),
            **extra,
        }

    def payload(self, event: str, **fields) -> str:
        """What Codex sends: session_id (a thread id), turn_id, cwd, transcript_path, model,
        permission_mode, hook_event_name, and per event `source` or `stop_hook_active` +
        `last_assistant_message`."""
        base = {"session_id": "019a7c3e-5b1f-7d20-9a41-3f0c2d9e8b11", "cwd": str(self.project),
                "transcript_path": None, "model": "gpt-5-codex", "permission_mode": "default",
                "hook_event_name": event}
        if event == "SessionStart":
            base["source"] = "startup"
        else:
            base.update({"turn_id": "turn-1", "stop_hook_active": False, "last_assistant_message": "done"})
        return json.dumps({**base, **fields})

    def __call__(self, name: str, stdin: str | None = None, env: dict | None = None, **fields):
        out, err = io.StringIO(), io.StringIO()
        event = "SessionStart" if name == codex.SESSION_START else "Stop"
        text = self.payload(event, **fields) if stdin is None else stdin
        code = main(["hook", name], Environment(stdin=io.StringIO(text), stdout=out, stderr=err,
                                                environ={**self.environ, **(env or {})}, cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()


@pytest.fixture
def hooks(sb, project, tmp_path) -> Codex:
    return Codex(sb, project, tmp_path / "state")


def one_json(out: str) -> dict:
    lines = out.splitlines()
    assert len(lines) == 1 and out.endswith("\n"), out
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    return value


# -- the gate ---------------------------------------------------------------------------------------------


def test_not_opted_in_answers_empty_object_without_network(sb, plain, tmp_path):
    h = Codex(sb, plain, tmp_path / "state")
    sb.send(PERSONA, "loom", "mail nobody should see")
    for name in codex.HOOKS:
        assert h(name) == (0, NOTHING, ""), name
    assert sb.requests == []
    assert not (tmp_path / "state").exists()


def test_not_opted_in_real_console_entry(plain):
    for name in codex.HOOKS:
        proc = subprocess.run([KIJITO_PULL, "hook", name], input=json.dumps({"cwd": str(plain)}),
                              capture_output=True, text=True, cwd=plain, timeout=30)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, NOTHING, ""), name


BAD_INPUTS = {
    "empty": "",
    "whitespace": "  \n",
    "not json": "hello there",
    "truncated": '{"session_id": "s", "cwd": "/tm',
    "a list": "[1, 2, 3]",
    "a string": '"just text"',
}


@pytest.mark.parametrize("name", codex.HOOKS)
@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_bad_stdin_is_empty_object_one_stderr_line_and_exit_0(hooks, name, kind):
    hooks.sb.send(PERSONA, "loom", "still waiting")
    code, out, err = hooks(name, stdin=BAD_INPUTS[kind])
    assert (code, out) == (0, NOTHING)
    assert err.startswith(f"kijito-pull: {name}: the hook input") and err.count("\n") == 1, err
    assert hooks.sb.requests == []


def test_bad_stdin_through_the_real_console_entry(project, tmp_path):
    proc = subprocess.run([KIJITO_PULL, "hook", "codex-stop"], input="{not json", capture_output=True, text=True,
                          cwd=project, timeout=30,
                          env={**os.environ, "KIJITO_PULL_STATE_DIR": str(tmp_path / "state")})
    assert (proc.returncode, proc.stdout) == (0, NOTHING)
    assert proc.stderr.startswith("kijito-pull: codex-stop: the hook input is not valid JSON"), proc.stderr


# -- SessionStart -----------------------------------------------------------------------------------------


def test_session_start_hands_waiting_mail_over_once(hooks):
    hooks.sb.send(PERSONA, "loom", "CODEX-WAITING the deploy key rotated")
    code, out, err = hooks("codex-session-start")
    assert code == 0, err
    answer = one_json(out)
    assert set(answer) == {"hookSpecificOutput"}
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert "CODEX-WAITING the deploy key rotated" in context and "loom" in context
    # Acknowledged once written: the next session start (resume) has nothing to say.
    assert hooks("codex-session-start", source="resume") == (0, NOTHING, "")


def test_session_start_with_nothing_waiting_is_empty_object(hooks):
    assert hooks("codex-session-start") == (0, NOTHING, "")


def test_session_start_never_promises_a_waker(hooks):
    """Codex sessions get no waker, even where a Claude hook would think it is interactive."""
    hooks.sb.send(PERSONA, "loom", "CODEX-NO-WAKER")
    code, out, err = hooks("codex-session-start", env={"KIJITO_PULL_MODE": "interactive",
                                                       "CLAUDE_CODE_ENTRYPOINT": "cli"})
    context = one_json(out)["hookSpecificOutput"]["additionalContext"]
    assert "CODEX-NO-WAKER" in context
    assert "wakes this session" not in context and "Monitor" not in context
    assert hooks("codex-session-start", env={"KIJITO_PULL_MODE": "interactive"}) == (0, NOTHING, "")


def test_session_start_without_a_token_says_so_in_context_and_on_stderr(hooks):
    code, out, err = hooks("codex-session-start", env={"KIJITOMON_TOKEN": ""})
    answer = one_json(out)
    assert "was not checked" in answer["hookSpecificOutput"]["additionalContext"]
    assert err.startswith("kijito-pull: codex-session-start: river: no Kijito token"), err
    assert "claude" not in err.lower()
    assert hooks.sb.requests == []


# -- Stop ---------------------------------------------------------------------------------------------------


def test_stop_blocks_with_new_mail_then_never_again_for_it(hooks):
    hooks.sb.send(PERSONA, "loom", "CODEX-LATE arrived while the agent worked")
    code, out, err = hooks("codex-stop")
    assert code == 0, err
    answer = one_json(out)
    assert answer["decision"] == "block"
    assert "CODEX-LATE arrived while the agent worked" in answer["reason"]
    # Codex continues the turn (stop_hook_active true); the same mail never blocks again.
    assert hooks("codex-stop", stop_hook_active=True) == (0, NOTHING, "")
    assert hooks("codex-stop") == (0, NOTHING, "")


def test_stop_with_nothing_new_is_empty_object(hooks):
    assert hooks("codex-stop") == (0, NOTHING, "")


def test_stop_caps_consecutive_blocks_per_session(hooks):
    """Fresh mail before every stop: Codex itself would let a Stop hook block forever."""
    blocks = 0
    for n in range(6):
        hooks.sb.send(PERSONA, "loom", f"CODEX-FLOOD {n}")
        code, out, err = hooks("codex-stop", stop_hook_active=n > 0)
        if one_json(out).get("decision") == "block":
            blocks += 1
        else:
            assert out == NOTHING
            assert "not blocking again after 3 consecutive blocks" in err
            assert err.startswith("kijito-pull: codex-stop:"), err
    assert blocks == 3
    # A new turn (stop_hook_active false) starts counting again, and gets what waited.
    code, out, err = hooks("codex-stop", stop_hook_active=False)
    reason = one_json(out)["reason"]
    assert "CODEX-FLOOD 3" in reason and "CODEX-FLOOD 5" in reason


def test_stop_cap_zero_never_blocks(hooks):
    hooks.sb.send(PERSONA, "loom", "CODEX-QUIET")
    assert hooks("codex-stop", env={"KIJITO_PULL_MAX_STOP_BLOCKS": "0"}) == (0, NOTHING, "")


def test_stop_with_the_server_down_lets_the_agent_stop_and_acknowledges_nothing(sb, project, tmp_path):
    down = Codex(None, project, tmp_path / "state")
    code, out, err = down("codex-stop")
    assert (code, out) == (0, NOTHING)
    assert err.startswith("kijito-pull: codex-stop: river: inbox not checked"), err
    assert err.count("\n") == 1
    # Nothing was acknowledged: once the server is reachable the mail is handed over.
    sb.send(PERSONA, "loom", "CODEX-AFTER-OUTAGE")
    up = Codex(sb, project, tmp_path / "state")
    assert "CODEX-AFTER-OUTAGE" in one_json(up("codex-stop")[1])["reason"]


def test_codex_and_claude_share_the_cursor(hooks):
    """One consumer per machine: mail a Codex hook handed over is not handed to a Claude hook again."""
    hooks.sb.send(PERSONA, "loom", "CODEX-SHARED")
    assert "CODEX-SHARED" in one_json(hooks("codex-stop")[1])["reason"]
    out, err = io.StringIO(), io.StringIO()
    main(["hook", "claude-stop"], Environment(stdin=io.StringIO(json.dumps({"session_id": "c", "cwd": str(
        hooks.project)})), stdout=out, stderr=err, environ=hooks.environ, cwd=str(hooks.project)))
    assert out.getvalue() == ""


# -- never empty stdout -----------------------------------------------------------------------------------


def test_budget_expiry_answers_empty_object_once():
    out, err = io.StringIO(), io.StringIO()
    exited = threading.Event()
    output = handover.Output(out, err, "codex-stop", 0.05, lambda code: exited.set(), nothing=NOTHING)
    with output:
        assert exited.wait(5)
    assert out.getvalue() == NOTHING
    assert "codex-stop: gave up after 0.05 s" in err.getvalue()
    assert output.json({"decision": "block", "reason": "late"}) is False  # nothing after the `{}`
    assert out.getvalue() == NOTHING


def test_hanging_server_costs_at_most_the_budget_and_still_answers(project, tmp_path):
    """A server that accepts and never answers: the real process prints `{}` and exits 0 in time."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        env = {**os.environ, "KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": f"http://127.0.0.1:{listener.getsockname()[1]}",
               "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "KIJITO_PULL_HOOK_BUDGET": "1"}
        started = time.monotonic()
        proc = subprocess.run([KIJITO_PULL, "hook", "codex-stop"], input=Codex(None, project, tmp_path).payload("Stop"),
                              capture_output=True, text=True, cwd=project, timeout=30, env=env)
        took = time.monotonic() - started
    finally:
        listener.close()
    assert (proc.returncode, proc.stdout) == (0, NOTHING), proc.stderr
    assert "gave up after 1 s" in proc.stderr
    assert took < 5, took


def test_internal_error_still_answers_empty_object(hooks, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    from kijito_pull.harnesses import handover

    monkeypatch.setattr(handover, "stop", broken)
    code, out, err = hooks("codex-stop")
    assert (code, out) == (0, NOTHING)
    assert "codex-stop: internal error (RuntimeError: boom)" in err


def test_help_lists_the_codex_hooks():
    out = io.StringIO()
    main(["hook", "--help"], Environment(stdout=out, stderr=io.StringIO()))
    assert "codex-session-start" in out.getvalue() and "codex-stop" in out.getvalue()
