"""The Gemini CLI hooks (`kijito-pull hook gemini-session-start | gemini-after-agent | gemini-session-end`)
with Gemini-shaped input (captured from Gemini CLI 0.61.0), against the sandbox over real HTTP.

Gemini's rules: one JSON object on stdout, `{}` for nothing (never empty: Gemini would show a hook's stderr
to the user as a message); SessionStart context in `hookSpecificOutput.additionalContext`; AfterAgent mail
as a refused turn end (`decision` "block", which Gemini takes as "deny"), bounded per session while
`stop_hook_active`; every hand-over pending with the session until Gemini's own record
(`chats/session-*.jsonl`, named in every input as `transcript_path`) shows it. The record here is written
the way Gemini writes it (a user record whose text carries the hand-over); the real binary does the same
in tests/e2e/test_gemini_e2e.py.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.gemini import HARNESS
from kijito_pull.harnesses.hookgate import HookInput

TOKEN = "gemini-token-5c1"
PERSONA = "river"
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"
NOTHING = "{}\n"
SID = "41698adb-2c3e-4f5a-9b7c-0d1e2f3a4b5c"
API_KEY = "AIza-secret-gemini-key-never-logged"
HOOKS = ("gemini-session-start", "gemini-after-agent", "gemini-session-end")
EVENTS = {"gemini-session-start": "SessionStart", "gemini-after-agent": "AfterAgent",
          "gemini-session-end": "SessionEnd"}


def _folder(tmp_path: Path, name: str, agents: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "AGENTS.md").write_text(agents)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _folder(tmp_path, "proj", OPT_IN)


class Gemini:
    """One Gemini CLI session of a project: its record file, and its hooks run in-process with the input
    and environment Gemini gives them (GEMINI_API_KEY included)."""

    def __init__(self, sb, project: Path, tmp: Path, **extra: str):
        self.project = project
        self.state = tmp / "state"
        chats = tmp / "home" / ".gemini" / "tmp" / project.name / "chats"
        self.record = chats / f"session-2026-12-02T16-10-{SID[:8]}.jsonl"
        self.record.parent.mkdir(parents=True)
        self.record.write_text(json.dumps({"sessionId": SID, "startTime": "2026-12-02T16:10:55.379Z",
                                           "kind": "main"}) + "\n")
        self.environ = {"KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sb.url if sb else "http://127.0.0.1:9",
                        "KIJITO_PULL_STATE_DIR": str(self.state), "KIJITO_PULL_CONFIG": os.devnull,
                        "HOME": str(tmp / "home"), "GEMINI_API_KEY": API_KEY, "GEMINI_SESSION_ID": SID,
                        "GEMINI_PROJECT_DIR": str(project), "CLAUDE_PROJECT_DIR": str(project), **extra}

    def payload(self, hook: str, **fields) -> dict:
        base = {"session_id": SID, "transcript_path": str(self.record), "cwd": str(self.project),
                "hook_event_name": EVENTS[hook], "timestamp": "2026-12-02T16:10:55.379Z"}
        if hook == "gemini-session-start":
            base["source"] = "startup"
        elif hook == "gemini-after-agent":
            base.update({"prompt": "say hi", "prompt_response": "Gemini fake #1", "stop_hook_active": False})
        else:
            base["reason"] = "exit"
        return {**base, **fields}

    def __call__(self, hook: str, stdin: str | None = None, **fields) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        text = json.dumps(self.payload(hook, **fields)) if stdin is None else stdin
        code = main(["hook", hook], Environment(stdin=io.StringIO(text), stdout=out, stderr=err,
                                                environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def shows(self, text: str) -> None:
        """What Gemini records once the model is given `text` (a user record holding it)."""
        with self.record.open("a") as handle:
            handle.write(json.dumps({"id": "7fe721a3", "timestamp": "2026-12-02T16:10:56Z", "type": "user",
                                     "content": [{"text": f"<hook_context>{text}</hook_context>\n\nsay hi"}]}) + "\n")

    def cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                            environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def pending(self) -> list[dict]:
        _, out, _ = self.cli("status", "--json", "--persona", PERSONA)
        return [p for line in out.splitlines() for p in json.loads(line).get("pending") or []]

    def unseen(self) -> str:
        return self.cli("--once", "--peek", "--persona", PERSONA)[1]


@pytest.fixture
def gemini(sb, project, tmp_path) -> Gemini:
    return Gemini(sb, project, tmp_path)


def one_json(out: str) -> dict:
    lines = out.splitlines()
    assert len(lines) == 1 and out.endswith("\n"), out
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    return value


def context_of(out: str) -> str:
    answer = one_json(out)
    assert set(answer) == {"hookSpecificOutput"}, answer
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return answer["hookSpecificOutput"]["additionalContext"]


# -- the gate -----------------------------------------------------------------------------------------------


def test_not_opted_in_answers_empty_object_without_network(sb, tmp_path):
    plain = _folder(tmp_path, "plain", "# No inbox here\n")
    g = Gemini(sb, plain, tmp_path)
    sb.send(PERSONA, "loom", "mail nobody should see")
    for hook in HOOKS:
        assert g(hook) == (0, NOTHING, ""), hook
    assert sb.requests == []
    assert not g.state.exists()


def test_not_opted_in_real_console_entry(tmp_path):
    plain = _folder(tmp_path, "plain", "# No inbox here\n")
    for hook in HOOKS:
        proc = subprocess.run([KIJITO_PULL, "hook", hook], input=json.dumps({"cwd": str(plain)}),
                              capture_output=True, text=True, cwd=plain, timeout=30)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, NOTHING, ""), hook


def test_bad_input_is_one_stderr_line_and_the_empty_object(gemini):
    for hook in HOOKS:
        code, out, err = gemini(hook, stdin="{not json")
        assert (code, out) == (0, NOTHING), hook
        assert err.startswith(f"kijito-pull: {hook}: the hook input is not valid JSON") and err.count("\n") == 1


# -- SessionStart and AfterAgent, confirmed from Gemini's record --------------------------------------------


def test_session_start_hands_waiting_mail_over_pending_until_the_record_shows_it(sb, gemini):
    sent = sb.send(PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    code, out, err = gemini("gemini-session-start")
    assert code == 0, err
    text = context_of(out)
    assert "MAIL-WAITING: the deploy key rotated" in text and "kijito-ref:" in text
    [held] = gemini.pending()
    assert held["holder"] == f"gemini:{SID}" and held["ids"] == [sent]  # handed over, not yet confirmed
    gemini.shows(text)
    assert gemini("gemini-after-agent") == (0, NOTHING, "")  # confirmed; nothing new, so no refusal
    assert gemini.pending() == []
    assert "MAIL-WAITING" not in gemini.unseen()


def test_after_agent_refuses_the_turn_end_with_new_mail_once_the_record_shows_it(sb, gemini):
    assert gemini("gemini-session-start")[1] == NOTHING  # headless, no mail: nothing said
    sb.send(PERSONA, "loom", "MAIL-MIDRUN: build is red")
    code, out, err = gemini("gemini-after-agent")
    answer = one_json(out)
    assert answer["decision"] == "block" and "MAIL-MIDRUN: build is red" in answer["reason"], (out, err)
    assert [p["holder"] for p in gemini.pending()] == [f"gemini:{SID}"]
    # Gemini sends the reason to the model as the next prompt and records it; its AfterAgent comes again
    # with stop_hook_active: confirmed from the record, not handed over a second time.
    gemini.shows(answer["reason"])
    assert gemini("gemini-after-agent", stop_hook_active=True) == (0, NOTHING, "")
    assert gemini.pending() == []
    assert "MAIL-MIDRUN" not in gemini.unseen()


def test_a_refusal_the_record_never_shows_is_handed_over_again(sb, gemini):
    sb.send(PERSONA, "loom", "MAIL-LOST-ANSWER")
    first = one_json(gemini("gemini-after-agent")[1])["reason"]  # e.g. Gemini timed the hook out
    again = one_json(gemini("gemini-after-agent", stop_hook_active=True)[1])["reason"]
    assert "MAIL-LOST-ANSWER" in first and "MAIL-LOST-ANSWER" in again  # never lost: handed over again
    gemini.shows(again)
    assert gemini("gemini-after-agent", stop_hook_active=True)[1] == NOTHING
    assert gemini.pending() == []


def test_consecutive_refusals_are_capped_per_session(sb, gemini):
    gemini.environ["KIJITO_PULL_MAX_STOP_BLOCKS"] = "2"
    answers = []
    for n in range(4):
        sb.send(PERSONA, "loom", f"MAIL-{n}")
        out = gemini("gemini-after-agent", stop_hook_active=n > 0)[1]
        if out != NOTHING:
            gemini.shows(one_json(out)["reason"])
        answers.append(out != NOTHING)
    assert answers == [True, True, False, False]
    sb.send(PERSONA, "loom", "MAIL-NEXT-TURN")
    out = gemini("gemini-after-agent", stop_hook_active=False)[1]  # a new turn: the count starts again
    assert "MAIL-NEXT-TURN" in one_json(out)["reason"] and "MAIL-2" in one_json(out)["reason"]


def test_session_end_confirms_what_the_record_shows_and_releases_the_rest(sb, gemini):
    first = sb.send(PERSONA, "loom", "MAIL-SHOWN")
    text = context_of(gemini("gemini-session-start")[1])
    gemini.shows(text)
    second = sb.send(PERSONA, "loom", "MAIL-DROPPED")
    assert "MAIL-DROPPED" in one_json(gemini("gemini-after-agent")[1])["reason"]  # never recorded by Gemini
    assert gemini("gemini-session-end") == (0, NOTHING, "")
    assert gemini.pending() == [] or all(p["holder"] is None for p in gemini.pending())
    unseen = gemini.unseen()
    assert "MAIL-DROPPED" in unseen and "MAIL-SHOWN" not in unseen, (first, second, unseen)


def test_session_end_of_a_session_never_handed_mail_sends_nothing(sb, gemini):
    assert gemini("gemini-session-end") == (0, NOTHING, "")
    assert sb.requests == []


def test_the_record_gemini_names_is_the_one_that_confirms(gemini, project):
    inp = HookInput("gemini-after-agent", gemini.payload("gemini-after-agent"), str(project), None, "headless",
                    session_id=SID, harness=HARNESS)
    holder, record = handover.holder_of(inp, gemini.environ)
    assert holder.key == f"gemini:{SID}" and record.path == str(gemini.record)


def test_the_api_key_gemini_hands_the_hooks_is_never_written_anywhere(sb, gemini):
    sb.send(PERSONA, "loom", "MAIL-ANY")
    outputs = [gemini("gemini-session-start"), gemini("gemini-after-agent"), gemini("gemini-session-end"),
               gemini("gemini-after-agent", stdin="[]")]
    for _code, out, err in outputs:
        assert API_KEY not in out and API_KEY not in err and TOKEN not in out and TOKEN not in err
    for path in gemini.state.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes() and TOKEN.encode() not in path.read_bytes(), path
