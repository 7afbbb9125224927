"""The OpenCode hooks the plugin runs (`kijito-pull hook opencode-chat-message | opencode-session-idle`), as
real `kijito-pull` processes against the sandbox over real HTTP, with the input the plugin gives them. OpenCode's
record is a stand-in `opencode` that prints what `opencode export` would (a file the test writes, as OpenCode
saves the part the plugin added) and notes the environment it was given; the real binary does the same in
tests/e2e/test_opencode_e2e.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOKEN = "opencode-token-7d2"
PERSONA = "river"
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"
SID = "ses_dc7ebc182ffeXioc2ClMZQo61k"


class OpenCode:
    """One OpenCode session of a project: its stand-in `opencode export`, and the plugin's hook calls."""

    def __init__(self, sb, root: Path, opted_in: bool = True):
        self.project = root / "proj"
        (self.project / ".git").mkdir(parents=True)
        (self.project / "AGENTS.md").write_text(OPT_IN if opted_in else "# Project\n")
        self.record = root / "record.json"
        self.record.write_text(json.dumps({"info": {"id": SID}, "messages": []}))
        self.seen_env = root / "export-env.txt"
        self.binary = root / "bin" / "opencode"
        self.binary.parent.mkdir()
        self.binary.write_text(f"#!/bin/sh\nenv > {self.seen_env}\n[ \"$1\" = export ] && cat {self.record}\n")
        self.binary.chmod(0o755)
        self.state = root / "state"
        self.environ = {"HOME": str(root / "home"), "PATH": os.environ.get("PATH", ""), "KIJITO_BASE": sb.url,
                        "KIJITOMON_TOKEN": TOKEN, "KIJITO_PULL_STATE_DIR": str(self.state),
                        "KIJITO_PULL_CONFIG": os.devnull}

    def hook(self, name: str, **extra: object) -> subprocess.CompletedProcess:
        data = {"session_id": SID, "cwd": str(self.project), "opencode": str(self.binary),
                "server_url": "http://localhost:4096/", **extra}
        return subprocess.run([KIJITO_PULL, "hook", name], input=json.dumps(data), env=self.environ,
                              cwd=str(self.project), capture_output=True, text=True, timeout=30)

    def saves(self, text: str) -> None:
        """OpenCode saved the user message with the part the plugin added."""
        self.record.write_text(json.dumps({"info": {"id": SID}, "messages": [
            {"parts": [{"type": "text", "text": "say hi"}, {"type": "text", "text": text, "synthetic": True}]}]}))

    def status(self) -> dict:
        out = subprocess.run([KIJITO_PULL, "status", "--json", "--persona", PERSONA], env=self.environ,
                             capture_output=True, text=True, timeout=30).stdout
        return next(json.loads(line) for line in out.splitlines() if line.startswith("{"))


@pytest.fixture
def oc(sb, tmp_path) -> OpenCode:
    return OpenCode(sb, tmp_path)


def _text(done: subprocess.CompletedProcess) -> str:
    answer = json.loads(done.stdout)
    return answer.get("text", "")


def test_chat_message_hands_waiting_mail_over_pending_until_the_export_shows_it(sb, oc) -> None:
    sb.send(PERSONA, "loom", "MAIL-ONE: the deploy key rotated")
    first = oc.hook("opencode-chat-message")
    assert first.returncode == 0, first.stderr
    text = _text(first)
    assert "MAIL-ONE: the deploy key rotated" in text and "kijito-ref:" in text
    assert [p["holder"] for p in oc.status()["pending"]] == [f"opencode:{SID}"]
    # OpenCode has not saved it (the export does not show it): the idle hook confirms nothing
    idle = oc.hook("opencode-session-idle")
    assert idle.returncode == 0 and idle.stdout == "{}\n"
    assert oc.status()["pending"], "confirmed without OpenCode's record showing it"
    oc.saves(text)
    assert oc.hook("opencode-session-idle").returncode == 0
    assert not oc.status()["pending"]
    # delivered once: the next message gets nothing more
    assert oc.hook("opencode-chat-message").stdout == "{}\n"
    log = (oc.state / "sessions" / f"{SID}.idle.log").read_text()
    assert "1 of 1 hand-over(s) confirmed" in log


def test_a_hand_over_the_record_never_shows_is_handed_over_again(sb, oc) -> None:
    sb.send(PERSONA, "loom", "MAIL-DROPPED")
    assert "MAIL-DROPPED" in _text(oc.hook("opencode-chat-message"))
    again = oc.hook("opencode-chat-message")  # OpenCode dropped the part: the record never showed it
    assert "MAIL-DROPPED" in _text(again)


def test_export_gets_no_kijito_setting_and_the_token_is_nowhere_in_argv(sb, oc) -> None:
    sb.send(PERSONA, "loom", "MAIL-TWO")
    oc.hook("opencode-chat-message")
    oc.hook("opencode-session-idle")
    seen = oc.seen_env.read_text()
    assert TOKEN not in seen and "KIJITO" not in seen
    assert "HOME=" in seen  # OpenCode's own environment otherwise


def test_not_opted_in_answers_nothing_and_sends_no_request(sb, tmp_path) -> None:
    plain = OpenCode(sb, tmp_path, opted_in=False)
    sb.send(PERSONA, "loom", "MAIL-NOT-HERE")
    before = len(sb.requests)
    for hook in ("opencode-chat-message", "opencode-session-idle"):
        done = plain.hook(hook)
        assert done.returncode == 0 and done.stdout == "{}\n" and done.stderr == ""
    assert len(sb.requests) == before
    assert not plain.seen_env.exists()
