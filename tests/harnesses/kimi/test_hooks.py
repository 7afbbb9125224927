"""The Kimi Code CLI hooks (`kijito-pull hook kimi-prompt | kimi-stop | kimi-session-end | kimi-settle`) with
Kimi-shaped input (captured from Kimi Code CLI 2.1.0), against the sandbox over real HTTP.

Kimi's rules: "nothing to do" is empty stdout (any other stdout, `{}` included, would reach the model as a
message); mail before a prompt as `{"message": ...}`; a Stop block as `permissionDecision: "deny"` with the
mail as its reason; the input names no transcript, so the session's wire.jsonl is found from its id (the
index, else Kimi's own folder name for the working folder); only a `context.append_message` record holding a
hand-over's marker confirms it. The records here are written the way Kimi writes them; the real binary does
the same in tests/e2e/test_kimi_e2e.py.
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
from kijito_pull.core.paths import Paths
from kijito_pull.core.process import proc
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.hookgate import HookInput
from kijito_pull.harnesses.kimi import HARNESS, record

TOKEN = "kimi-token-7a2"
PERSONA = "river"
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"
SID = "session_ac8d5d85-1f2e-4a3b-9c8d-7e6f5a4b3c2d"
HOOKS = ("kimi-prompt", "kimi-stop", "kimi-session-end")
EVENTS = {"kimi-prompt": "UserPromptSubmit", "kimi-stop": "Stop", "kimi-session-end": "SessionEnd",
          "kimi-settle": "Stop"}


def _folder(tmp_path: Path, name: str, agents: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "AGENTS.md").write_text(agents)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _folder(tmp_path, "My Proj", OPT_IN)


class Kimi:
    """One Kimi Code CLI session of a project: its wire.jsonl where Kimi keeps it, and its hooks run in-process
    with the input Kimi gives them."""

    def __init__(self, sb, project: Path, tmp: Path, **extra: str):
        self.project = project
        self.state = tmp / "state"
        self.home = tmp / "home"
        self.wire = self.home / ".kimi-code" / "sessions" / record.bucket(str(project)) / SID / "agents" / "main" \
            / "wire.jsonl"
        self.wire.parent.mkdir(parents=True)
        self.wire.write_text(json.dumps({"type": "metadata", "protocol_version": "1.5"}) + "\n")
        self.environ = {"KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sb.url if sb else "http://127.0.0.1:9",
                        "KIJITO_PULL_STATE_DIR": str(self.state), "KIJITO_PULL_CONFIG": os.devnull,
                        "HOME": str(self.home), "PATH": os.environ.get("PATH", ""), **extra}

    def payload(self, hook: str, **fields) -> dict:
        base = {"hook_event_name": EVENTS[hook], "session_id": SID, "cwd": str(self.project),
                "client_type": "kimi_code_cli"}
        if hook == "kimi-prompt":
            base.update({"session_title": "t", "prompt": [{"type": "text", "text": "say hi"}], "is_steer": False})
        elif hook in ("kimi-stop", "kimi-settle"):
            base.update({"session_title": "t", "stop_hook_active": False})
        else:
            base["reason"] = "exit"
        return {**base, **fields}

    def __call__(self, hook: str, stdin: str | None = None, **fields) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        text = json.dumps(self.payload(hook, **fields)) if stdin is None else stdin
        code = main(["hook", hook], Environment(stdin=io.StringIO(text), stdout=out, stderr=err,
                                                environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def appends(self, text: str, kind: str = "hook_result") -> None:
        """What Kimi records when it puts `text` in the session's context (the model gets it next)."""
        origin = {"kind": kind, "event": "UserPromptSubmit"} if kind == "hook_result" else \
            {"kind": "system_trigger", "name": "stop_hook"}
        with self.wire.open("a") as handle:
            handle.write(json.dumps({"type": "context.append_message", "agentId": "main",
                                     "message": {"role": "user", "content": [{"type": "text", "text": text}],
                                                 "toolCalls": [], "origin": origin}, "time": 1}) + "\n")

    def logs(self, text: str) -> None:
        """A wire.jsonl line that holds `text` but puts nothing in front of the model (a UI event)."""
        with self.wire.open("a") as handle:
            handle.write(json.dumps({"message": {"message": {"role": "user", "content": [{"type": "text",
                                     "text": text}]}}, "type": "agent.message.appended", "kind": "event"}) + "\n")

    def cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                            environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def pending(self) -> list[dict]:
        _, out, _ = self.cli("status", "--json", "--persona", PERSONA)
        return [p for line in out.splitlines() for p in json.loads(line).get("pending") or [] if p.get("holder")]

    def unseen(self) -> str:
        return self.cli("--once", "--peek", "--persona", PERSONA)[1]

    def inp(self, hook: str) -> HookInput:
        from kijito_pull.harnesses.session import optin

        return HookInput(hook, self.payload(hook), str(self.project), optin.resolve(str(self.project), self.environ),
                         "headless", session_id=SID, harness=HARNESS)


@pytest.fixture
def kimi(sb, project, tmp_path) -> Kimi:
    return Kimi(sb, project, tmp_path)


def message_of(out: str) -> str:
    answer = json.loads(out)
    assert set(answer) == {"message"} and out.count("\n") == 1, out
    return answer["message"]


def reason_of(out: str) -> str:
    answer = json.loads(out)
    assert set(answer) == {"hookSpecificOutput"} and answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    return answer["hookSpecificOutput"]["permissionDecisionReason"]


# -- the gate -----------------------------------------------------------------------------------------------


def test_not_opted_in_answers_nothing_at_all_without_network(sb, tmp_path):
    plain = _folder(tmp_path, "plain", "# No inbox here\n")
    k = Kimi(sb, plain, tmp_path)
    sb.send(PERSONA, "loom", "mail nobody should see")
    for hook in HOOKS:
        assert k(hook) == (0, "", ""), hook
    assert sb.requests == []
    assert not k.state.exists()


def test_not_opted_in_real_console_entry(tmp_path):
    plain = _folder(tmp_path, "plain", "# No inbox here\n")
    for hook in HOOKS:
        done = subprocess.run([KIJITO_PULL, "hook", hook], input=json.dumps({"cwd": str(plain)}),
                              capture_output=True, text=True, cwd=plain, timeout=30)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), hook


def test_bad_input_is_one_stderr_line_and_empty_stdout(kimi):
    for hook in HOOKS:
        code, out, err = kimi(hook, stdin="{not json")
        assert (code, out) == (0, ""), hook  # `{}` would reach Kimi's model as a message
        assert err.startswith(f"kijito-pull: {hook}: the hook input is not valid JSON") and err.count("\n") == 1


# -- the record ---------------------------------------------------------------------------------------------


def test_the_record_is_found_from_the_index_else_from_kimis_folder_name(kimi, tmp_path):
    paths = Paths(kimi.environ)
    assert record.record(kimi.payload("kimi-stop"), paths, SID).path == str(kimi.wire)  # no index yet
    elsewhere = tmp_path / "moved" / SID
    index = kimi.home / ".kimi-code" / "session_index.jsonl"
    index.write_text(json.dumps({"sessionId": "session_other", "sessionDir": "/x", "workDir": "/x"}) + "\n"
                     + json.dumps({"sessionId": SID, "sessionDir": str(elsewhere), "workDir": "/y"}) + "\n"
                     + json.dumps([SID, "a line of another shape, newest"]) + "\n")
    assert record.record(kimi.payload("kimi-stop"), paths, SID).path == str(elsewhere / "agents/main/wire.jsonl")
    kimi.environ["KIMI_CODE_HOME"] = str(tmp_path / "kh")
    found = record.record(kimi.payload("kimi-stop"), Paths(kimi.environ), SID).path
    assert found.startswith(str(tmp_path / "kh" / "sessions" / "wd_my-proj_"))
    assert record.wire_path(kimi.environ, "../../etc", str(kimi.project)) is None


def test_kimis_folder_names(tmp_path):
    # measured on 2.1.0: /tmp/kx/proj -> wd_proj_8b0643dd42e2 (sha256 of the path, 12 hex digits)
    assert record.bucket("/tmp/kx/proj") == "wd_proj_8b0643dd42e2"
    assert record.bucket("/a/My Proj!/").startswith("wd_my-proj_")
    assert record.bucket("/a/---").startswith("wd_workspace_")


# -- the prompt and the turn's end, confirmed from Kimi's record ------------------------------------------------


def test_the_first_prompt_takes_the_waiting_mail_pending_until_the_wire_shows_it(sb, kimi):
    sent = sb.send(PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    code, out, err = kimi("kimi-prompt")
    assert code == 0, err
    text = message_of(out)
    assert "MAIL-WAITING: the deploy key rotated" in text and "kijito-ref:" in text
    [held] = kimi.pending()
    assert held["holder"] == f"kimi:{SID}" and held["ids"] == [sent]
    kimi.appends(f'<hook_result hook_event="UserPromptSubmit">\n{text}\n</hook_result>')
    assert kimi("kimi-stop") == (0, "", "")  # confirmed; nothing new, so no continuation
    assert kimi.pending() == []
    assert "MAIL-WAITING" not in kimi.unseen()
    assert kimi("kimi-prompt") == (0, "", "")  # never twice


def test_only_a_context_record_confirms(sb, kimi):
    sb.send(PERSONA, "loom", "MAIL-LOGGED-ONLY")
    text = message_of(kimi("kimi-prompt")[1])
    kimi.logs(text)  # in the log, but not in the model's context
    again = reason_of(kimi("kimi-stop")[1])  # not confirmed: the session is handed it again
    assert "MAIL-LOGGED-ONLY" in again
    assert [p["holder"] for p in kimi.pending()] == [f"kimi:{SID}"]  # still pending, never acknowledged
    kimi.appends(again, kind="system_trigger")
    assert kimi("kimi-prompt") == (0, "", "")
    assert kimi.pending() == []


def test_stop_continues_the_turn_with_new_mail_and_the_settler_confirms_it(sb, kimi):
    assert kimi("kimi-prompt") == (0, "", "")
    sb.send(PERSONA, "loom", "MAIL-MIDRUN: build is red")
    reason = reason_of(kimi("kimi-stop")[1])
    assert "MAIL-MIDRUN: build is red" in reason
    assert [p["holder"] for p in kimi.pending()] == [f"kimi:{SID}"]
    kimi.appends(reason, kind="system_trigger")
    # Kimi runs no hook after its continuation: the settler (here in-process, its host this test) confirms it.
    assert handover.confirm_soon(kimi.inp("kimi-settle"), Environment(stdin=None, stdout=io.StringIO(),
                                 stderr=io.StringIO(), environ=kimi.environ, cwd=str(kimi.project)),
                                 proc(os.getpid()), seconds=5, every=0.05) == 0
    assert kimi.pending() == []
    assert "MAIL-MIDRUN" not in kimi.unseen()


def test_the_settler_looks_again_when_the_record_grows(sb, kimi):
    sb.send(PERSONA, "loom", "MAIL-LATER")
    reason = reason_of(kimi("kimi-stop")[1])
    assert [p["holder"] for p in kimi.pending()] == [f"kimi:{SID}"]
    env = Environment(stdin=None, stdout=io.StringIO(), stderr=io.StringIO(), environ=kimi.environ,
                      cwd=str(kimi.project))
    settler = threading.Thread(target=handover.confirm_soon, args=(kimi.inp("kimi-settle"), env, proc(os.getpid())),
                               kwargs={"seconds": 3, "every": 0.05})
    settler.start()
    time.sleep(0.5)  # the settler has looked at the record without the continuation
    assert [p["holder"] for p in kimi.pending()] == [f"kimi:{SID}"]
    kimi.appends(reason, kind="system_trigger")
    assert _wait(lambda: kimi.pending() == [], 3), kimi.pending()
    settler.join(5)
    assert "MAIL-LATER" not in kimi.unseen()


def test_the_settler_ends_a_session_whose_host_is_gone_as_session_end_would(sb, kimi):
    sb.send(PERSONA, "loom", "MAIL-NEVER-SHOWN")
    assert "MAIL-NEVER-SHOWN" in reason_of(kimi("kimi-stop")[1])
    dead = subprocess.Popen(["true"])
    dead.wait()
    env = Environment(stdin=None, stdout=io.StringIO(), stderr=io.StringIO(), environ=kimi.environ,
                      cwd=str(kimi.project))
    assert handover.confirm_soon(kimi.inp("kimi-settle"), env, proc(dead.pid) or _gone(dead.pid), seconds=5) == 0
    assert kimi.pending() == []  # released at once: unseen again, for the next session
    assert "MAIL-NEVER-SHOWN" in kimi.unseen()
    # the session's files are gone (but for the log of the settler the Stop hook started, still running)
    assert [p.name for p in kimi.state.glob(f"sessions/{SID}.*")] in ([], [f"{SID}.settle.log"])


def _gone(pid: int):
    from kijito_pull.core.process import Proc

    return Proc(pid, "0")


def test_the_stop_hook_starts_the_settler_which_confirms_and_leaves(sb, kimi):
    sb.send(PERSONA, "loom", "MAIL-SETTLED")
    reason = reason_of(kimi("kimi-stop")[1])
    kimi.appends(reason, kind="system_trigger")
    log = kimi.state / "sessions" / f"{SID}.settle.log"
    assert log.exists()  # spawned detached, its stderr here
    assert _wait(lambda: kimi.pending() == [], 20), (kimi.pending(), log.read_text())
    assert "MAIL-SETTLED" not in kimi.unseen()


def _wait(predicate, seconds: float) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_blocks_in_a_row_are_capped_and_a_prompt_starts_the_count_again(sb, kimi):
    kimi.environ["KIJITO_PULL_MAX_STOP_BLOCKS"] = "1"
    sb.send(PERSONA, "loom", "MAIL-1")
    reason = reason_of(kimi("kimi-stop")[1])
    kimi.appends(reason, kind="system_trigger")
    sb.send(PERSONA, "loom", "MAIL-2")
    assert kimi("kimi-stop")[1] == ""  # a second Stop before any prompt (a later Kimi): not again
    out = kimi("kimi-prompt")[1]  # the next prompt takes it, and the count starts again
    assert "MAIL-2" in message_of(out)
    kimi.appends(message_of(out))
    sb.send(PERSONA, "loom", "MAIL-3")
    assert "MAIL-3" in reason_of(kimi("kimi-stop")[1])


def test_session_end_confirms_what_the_wire_shows_and_releases_the_rest(sb, kimi):
    sb.send(PERSONA, "loom", "MAIL-SHOWN")
    kimi.appends(message_of(kimi("kimi-prompt")[1]))
    sb.send(PERSONA, "loom", "MAIL-DROPPED")
    kimi.environ["KIJITO_PULL_HOOK_BUDGET"] = "5"
    assert "MAIL-DROPPED" in message_of(kimi("kimi-prompt")[1])  # never recorded by Kimi
    assert kimi("kimi-session-end") == (0, "", "")
    assert kimi.pending() == []
    unseen = kimi.unseen()
    assert "MAIL-DROPPED" in unseen and "MAIL-SHOWN" not in unseen
