"""The Qwen Code hooks (`kijito-pull hook qwen-session-start | qwen-prompt | qwen-stop | qwen-session-end`)
with Qwen-shaped input (captured from Qwen Code 0.24.4), against the sandbox over real HTTP.

Qwen's rules: one JSON object on stdout, `{}` for nothing; SessionStart and UserPromptSubmit context in
`hookSpecificOutput.additionalContext`; Stop mail as `{"decision": "block", "reason": ...}`, bounded per turn
(`prompt_id`), and UserPromptSubmit run again for the block's reason (`qwen-prompt` adds nothing to it). Every
hand-over is pending with the session until Qwen's chat record (named in every input as `transcript_path`)
confirms it by Qwen's rule (kijito_pull.harnesses.qwen.record): its markers in a prompt's record, or a model
reply recorded after the hand-over. The record here is written the way Qwen writes it (compact JSON lines);
the real binary does the same in tests/e2e/test_qwen_e2e.py.
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
from kijito_pull.core import render
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.hookgate import HookInput
from kijito_pull.harnesses.qwen import HARNESS, gate
from kijito_pull.harnesses.qwen.record import QwenRecord

TOKEN = "qwen-token-7d2"
PERSONA = "river"
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"
NOTHING = "{}\n"
SID = "6f7570ee-a86f-4e0d-b028-2c4eaa6340ca"
TURN = f"{SID}########0"
API_KEY = "sk-secret-qwen-key-never-logged"
HOOKS = ("qwen-session-start", "qwen-prompt", "qwen-stop", "qwen-session-end")
EVENTS = {"qwen-session-start": "SessionStart", "qwen-prompt": "UserPromptSubmit", "qwen-stop": "Stop",
          "qwen-session-end": "SessionEnd"}


def _folder(tmp_path: Path, name: str, agents: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "AGENTS.md").write_text(agents)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _folder(tmp_path, "proj", OPT_IN)


def _line(record: dict) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"  # Qwen writes its record compactly


class Qwen:
    """One Qwen Code session of a project: its chat record, and its hooks run in-process with the input and
    environment Qwen gives them (OPENAI_API_KEY included)."""

    def __init__(self, sb, project: Path, tmp: Path, **extra: str):
        self.project = project
        self.state = tmp / "state"
        chats = tmp / "home" / ".qwen" / "projects" / str(project).replace("/", "-") / "chats"
        self.record = chats / f"{SID}.jsonl"  # Qwen writes it at the first prompt, after SessionStart
        chats.mkdir(parents=True)
        self.environ = {"KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sb.url if sb else "http://127.0.0.1:9",
                        "KIJITO_PULL_STATE_DIR": str(self.state), "KIJITO_PULL_CONFIG": os.devnull,
                        "HOME": str(tmp / "home"), "OPENAI_API_KEY": API_KEY, "QWEN_CODE_SESSION_ID": SID,
                        "QWEN_PROJECT_DIR": str(project), "CLAUDE_PROJECT_DIR": str(project), **extra}

    def payload(self, hook: str, **fields) -> dict:
        base = {"session_id": SID, "transcript_path": str(self.record), "cwd": str(self.project),
                "hook_event_name": EVENTS[hook], "timestamp": "2026-12-04T16:56:05.379Z", "permission_mode": "yolo"}
        if hook == "qwen-session-start":
            base.update({"source": "startup", "model": "fake-model"})
        elif hook == "qwen-prompt":
            base.update({"prompt_id": TURN, "prompt": "say hi", "submitted_prompt": "say hi"})
        elif hook == "qwen-stop":
            base.update({"prompt_id": TURN, "stop_hook_active": False, "last_assistant_message": "QWEN fake #1"})
        else:
            base["reason"] = "prompt_input_exit"
        return {**base, **fields}

    def __call__(self, hook: str, stdin: str | None = None, **fields) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        text = json.dumps(self.payload(hook, **fields)) if stdin is None else stdin
        code = main(["hook", hook], Environment(stdin=io.StringIO(text), stdout=out, stderr=err,
                                                environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def prompt_recorded(self, prompt: str, context: str | None = None) -> None:
        """What Qwen records of a prompt: a user record, with its UserPromptSubmit context as a part."""
        parts = [{"text": prompt}]
        if context is not None:
            parts.append({"text": f"<qwen:user-prompt-submit-context>\n{context}\n</qwen:user-prompt-submit-context>"})
        with self.record.open("a") as handle:
            handle.write(_line({"uuid": "u1", "sessionId": SID, "type": "user", "provenance": "real_user",
                                "message": {"role": "user", "parts": parts},
                                "systemPayload": {"displayText": prompt, "hookContext": context}}))

    def reply_recorded(self, text: str = "QWEN fake #1") -> None:
        """What Qwen records of a model reply: an API-response telemetry record, then the assistant record."""
        with self.record.open("a") as handle:
            handle.write(_line({"uuid": "s1", "sessionId": SID, "type": "system", "subtype": "ui_telemetry",
                                "systemPayload": {"uiEvent": {"event.name": "qwen-code.api_response"}}}))
            handle.write(_line({"uuid": "a1", "sessionId": SID, "type": "assistant", "provenance": "assistant_output",
                                "message": {"role": "model", "parts": [{"text": text}]}}))

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


@pytest.fixture
def qwen(sb, project, tmp_path) -> Qwen:
    return Qwen(sb, project, tmp_path)


def one_json(out: str) -> dict:
    lines = out.splitlines()
    assert len(lines) == 1 and out.endswith("\n"), out
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    return value


def context_of(out: str, event: str) -> str:
    answer = one_json(out)
    assert set(answer) == {"hookSpecificOutput"}, answer
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    return answer["hookSpecificOutput"]["additionalContext"]


# -- the gate -----------------------------------------------------------------------------------------------


def test_not_opted_in_answers_empty_object_without_network(sb, tmp_path):
    plain = _folder(tmp_path, "plain", "# No inbox here\n")
    q = Qwen(sb, plain, tmp_path)
    sb.send(PERSONA, "loom", "mail nobody should see")
    for hook in HOOKS:
        assert q(hook) == (0, NOTHING, ""), hook
    assert sb.requests == []
    assert not q.state.exists()


def test_not_opted_in_real_console_entry(tmp_path):
    plain = _folder(tmp_path, "plain", "# No inbox here\n")
    for hook in HOOKS:
        proc = subprocess.run([KIJITO_PULL, "hook", hook], input=json.dumps({"cwd": str(plain)}),
                              capture_output=True, text=True, cwd=plain, timeout=30)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, NOTHING, ""), hook


def test_bad_input_is_one_stderr_line_and_the_empty_object(qwen):
    for hook in HOOKS:
        code, out, err = qwen(hook, stdin="{not json")
        assert (code, out) == (0, NOTHING), hook
        assert err.startswith(f"kijito-pull: {hook}: the hook input is not valid JSON") and err.count("\n") == 1


def test_the_gate_knows_our_marker():
    assert gate.MARKER == render.ref(PERSONA, 1)[:len(gate.MARKER)]
    assert gate.wants_prompt({"prompt": "say hi"}) and gate.wants_prompt({})
    assert not gate.wants_prompt({"prompt": f"mail {render.ref(PERSONA, 4)}"})


# -- SessionStart, UserPromptSubmit and Stop, confirmed from Qwen's record ----------------------------------


def test_session_start_mail_is_pending_until_a_reply_is_recorded_after_it(sb, qwen):
    sent = sb.send(PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    code, out, err = qwen("qwen-session-start")
    assert code == 0, err
    text = context_of(out, "SessionStart")
    assert "MAIL-WAITING: the deploy key rotated" in text and "kijito-ref:" in text
    [held] = qwen.pending()
    assert held["holder"] == f"qwen:{SID}" and held["ids"] == [sent]
    # The prompt: Qwen records it without the SessionStart context (that lives in the system prompt only),
    # and qwen-prompt neither hands the held mail over again nor confirms it.
    assert qwen("qwen-prompt") == (0, NOTHING, "")
    qwen.prompt_recorded("say hi")
    assert len(qwen.pending()) == 1  # no reply recorded after the hand-over yet
    qwen.reply_recorded()
    assert qwen("qwen-stop") == (0, NOTHING, "")  # the reply answered a request that carried it: confirmed
    assert qwen.pending() == []
    assert "MAIL-WAITING" not in qwen.unseen()


def test_a_reply_recorded_before_the_hand_over_confirms_nothing(sb, qwen):
    qwen.prompt_recorded("say hi")
    qwen.reply_recorded("an old reply, before the mail")  # e.g. a resumed session's record
    sb.send(PERSONA, "loom", "MAIL-AFTER-THE-REPLY")
    assert "MAIL-AFTER-THE-REPLY" in one_json(qwen("qwen-stop")[1])["reason"]
    # Stop again with nothing recorded since (the continuation was never made): handed over again, not lost.
    again = one_json(qwen("qwen-stop", stop_hook_active=True)[1])["reason"]
    assert "MAIL-AFTER-THE-REPLY" in again
    qwen.reply_recorded("the continuation's reply")
    assert qwen("qwen-stop", stop_hook_active=True) == (0, NOTHING, "")
    assert qwen.pending() == []


def test_prompt_hands_new_mail_over_as_its_context_confirmed_by_the_prompt_record(sb, qwen):
    assert qwen("qwen-session-start")[1] == NOTHING  # headless, no mail: nothing said
    sent = sb.send(PERSONA, "loom", "MAIL-BETWEEN-TURNS: CI is green")
    text = context_of(qwen("qwen-prompt")[1], "UserPromptSubmit")
    assert "MAIL-BETWEEN-TURNS: CI is green" in text
    assert [p["ids"] for p in qwen.pending()] == [[sent]]
    qwen.prompt_recorded("say hi", text)  # the marker is in the record, before any reply
    assert qwen("qwen-prompt", prompt="next prompt") == (0, NOTHING, "")  # confirmed; nothing new
    assert qwen.pending() == []
    assert "MAIL-BETWEEN-TURNS" not in qwen.unseen()


def test_stop_blocks_with_new_mail_and_the_continuation_prompt_adds_nothing(sb, qwen):
    qwen.prompt_recorded("say hi")
    qwen.reply_recorded()
    sb.send(PERSONA, "loom", "MAIL-MIDRUN: build is red")
    code, out, err = qwen("qwen-stop")
    answer = one_json(out)
    assert answer["decision"] == "block" and "MAIL-MIDRUN: build is red" in answer["reason"], (out, err)
    assert [p["holder"] for p in qwen.pending()] == [f"qwen:{SID}"]
    # Qwen makes the reason the next prompt and runs UserPromptSubmit for it: nothing to add, nothing sent.
    sb.send(PERSONA, "loom", "MAIL-LATER")
    before = len(sb.requests)
    assert qwen("qwen-prompt", prompt=answer["reason"], submitted_prompt=answer["reason"]) == (0, NOTHING, "")
    assert len(sb.requests) == before
    qwen.reply_recorded("QWEN fake #2")  # the continuation's reply (its user message is never recorded)
    code, out, err = qwen("qwen-stop", stop_hook_active=True)
    later = one_json(out)["reason"]
    assert "MAIL-LATER" in later and "MAIL-MIDRUN" not in later  # MIDRUN confirmed, never handed twice
    assert [p["ids"] for p in qwen.pending()] != []


def test_consecutive_blocks_are_capped_per_turn(sb, qwen):
    qwen.environ["KIJITO_PULL_MAX_STOP_BLOCKS"] = "2"
    answers = []
    for n in range(4):
        sb.send(PERSONA, "loom", f"MAIL-{n}")
        out = qwen("qwen-stop", stop_hook_active=n > 0)[1]
        qwen.reply_recorded(f"reply {n}")
        answers.append(out != NOTHING)
    assert answers == [True, True, False, False]
    sb.send(PERSONA, "loom", "MAIL-NEXT-TURN")
    out = qwen("qwen-stop", stop_hook_active=False, prompt_id=f"{SID}########1")[1]  # a new turn
    assert "MAIL-NEXT-TURN" in one_json(out)["reason"] and "MAIL-2" in one_json(out)["reason"]


def test_session_end_confirms_what_the_record_shows_and_releases_the_rest(sb, qwen):
    sb.send(PERSONA, "loom", "MAIL-SHOWN")
    context_of(qwen("qwen-session-start")[1], "SessionStart")
    qwen.prompt_recorded("say hi")
    qwen.reply_recorded()
    sb.send(PERSONA, "loom", "MAIL-DROPPED")
    assert "MAIL-DROPPED" in one_json(qwen("qwen-stop")[1])["reason"]  # then Qwen was quit: no reply after it
    assert qwen("qwen-session-end") == (0, NOTHING, "")
    assert qwen.pending() == []
    unseen = qwen.unseen()
    assert "MAIL-DROPPED" in unseen and "MAIL-SHOWN" not in unseen, unseen


def test_session_end_of_a_session_never_handed_mail_sends_nothing(sb, qwen):
    assert qwen("qwen-session-end") == (0, NOTHING, "")
    assert sb.requests == []


def test_the_record_qwen_names_is_read_by_qwens_rule(qwen, project):
    inp = HookInput("qwen-stop", qwen.payload("qwen-stop"), str(project), None, "headless", session_id=SID,
                    harness=HARNESS)
    holder, record = handover.holder_of(inp, qwen.environ)
    assert holder.key == f"qwen:{SID}" and record.path == str(qwen.record) and isinstance(record, QwenRecord)


def test_a_reply_cut_off_mid_line_is_no_reply_yet(qwen, tmp_path):
    from kijito_pull.core import render
    from kijito_pull.core.paths import Paths
    from kijito_pull.harnesses.qwen import record as qwen_record

    record = QwenRecord(Paths(qwen.environ), SID, str(qwen.record))
    record.handing_over()
    qwen_record.answered(Paths(qwen.environ), SID, [{"context": f"... ({render.ref(PERSONA, 3)}) ..."}])
    with qwen.record.open("a") as handle:
        handle.write('{"uuid":"a1","type":"assistant","message":{"role":"mod')
    assert record.shown(PERSONA, [3]) == set()
    with qwen.record.open("a") as handle:
        handle.write('el","parts":[]}}\n')
    assert record.shown(PERSONA, [3]) == {3}


def test_a_reply_confirms_only_what_a_finished_hook_answered_never_a_killed_hooks_mail(qwen):
    """The crash trials: a hook killed before its answer was out (Qwen drops it) is followed by a reply all the
    same; that reply must not confirm the killed hook's mail (it would be lost), only what a hook that
    finished its answer handed over."""
    from kijito_pull.core import render
    from kijito_pull.core.paths import Paths
    from kijito_pull.harnesses.qwen import record as qwen_record

    paths = Paths(qwen.environ)
    record = QwenRecord(paths, SID, str(qwen.record))
    record.handing_over()  # the killed hook's hand-over of 3: no note
    record.handing_over()  # a later hook hands 4 over and finishes
    qwen_record.answered(paths, SID, [{"reason": f"Message 1 of 1: id 4 ({render.ref(PERSONA, 4)})."}])
    with qwen.record.open("a") as handle:
        handle.write(_line({"uuid": "a2", "type": "assistant", "message": {"role": "model", "parts": []}}))
    assert record.shown(PERSONA, [3, 4]) == {4}
    assert qwen_record.answered_note(paths, SID).stat().st_mode & 0o777 == 0o600


def test_the_api_key_qwen_hands_the_hooks_is_never_written_anywhere(sb, qwen):
    sb.send(PERSONA, "loom", "MAIL-ANY")
    outputs = [qwen("qwen-session-start"), qwen("qwen-prompt"), qwen("qwen-stop"), qwen("qwen-session-end"),
               qwen("qwen-stop", stdin="[]")]
    for _code, out, err in outputs:
        assert API_KEY not in out and API_KEY not in err and TOKEN not in out and TOKEN not in err
    for path in qwen.state.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes() and TOKEN.encode() not in path.read_bytes(), path
