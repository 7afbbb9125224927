"""The Copilot CLI hooks with Copilot-shaped input (Claude-format hooks file, captured from Copilot CLI 1.0.102)
against the sandbox over real HTTP, and `kijito-pull install | uninstall copilot` on a private HOME.

Copilot's rules: SessionStart context must be a top-level `additionalContext` (it ignores Claude Code's
`hookSpecificOutput` key), so the answer carries both; the session record is
`~/.copilot/session-state/<id>/events.jsonl` (named in the input only at Stop); the hooks file is
kijito-pull's own, and nobody else's file is touched. The real binary: tests/e2e/test_copilot_e2e.py.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment

TOKEN = "copilot-token-9d2"
PERSONA = "river"
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"
SID = "98ac6515-1c2d-4e3f-8a9b-0c1d2e3f4a5b"


class Copilot:
    def __init__(self, sb, root: Path):
        self.home = root / "home"
        self.project = root / "proj"
        (self.project / ".git").mkdir(parents=True)
        (self.project / "AGENTS.md").write_text(OPT_IN)
        self.record = self.home / ".copilot" / "session-state" / SID / "events.jsonl"
        self.record.parent.mkdir(parents=True)
        self.record.write_text(json.dumps({"type": "session.start", "data": {"sessionId": SID}}) + "\n")
        self.environ = {"KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sb.url, "HOME": str(self.home),
                        "KIJITO_PULL_STATE_DIR": str(root / "state"), "KIJITO_PULL_CONFIG": os.devnull,
                        "PATH": os.environ.get("PATH", ""), "COPILOT_CLI": "1"}

    def run(self, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), Environment(stdin=io.StringIO(stdin), stdout=out, stderr=err,
                                            environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def hook(self, name: str, event: str, **fields) -> tuple[int, str, str]:
        data = {"hook_event_name": event, "session_id": SID, "timestamp": "2026-12-02T16:07:39.119Z",
                "cwd": str(self.project), **fields}
        return self.run("hook", name, stdin=json.dumps(data))

    def pending(self) -> list[dict]:
        _, out, _ = self.run("status", "--json", "--persona", PERSONA)
        return [p for line in out.splitlines() for p in json.loads(line).get("pending") or []]


@pytest.fixture
def c(sb, tmp_path) -> Copilot:
    return Copilot(sb, tmp_path)


def test_session_start_answers_with_a_top_level_context_pending_until_the_record_shows_it(sb, c):
    sent = sb.send(PERSONA, "loom", "MAIL-WAITING")
    code, out, err = c.hook("copilot-session-start", "SessionStart", source="new", initial_prompt="say hi")
    answer = json.loads(out)
    assert answer["additionalContext"] == answer["hookSpecificOutput"]["additionalContext"], answer
    assert "MAIL-WAITING" in answer["additionalContext"]
    [held] = c.pending()
    assert held["holder"] == f"copilot:{SID}" and held["ids"] == [sent]
    with c.record.open("a") as handle:  # how Copilot records a sessionStart hook's output (hook.end)
        handle.write(json.dumps({"type": "hook.end", "data": {"output": answer}}) + "\n")
    code, out, err = c.hook("copilot-stop", "Stop", transcript_path=str(c.record), stop_reason="end_turn",
                            stop_hook_active=False)
    assert (code, out) == (0, ""), err
    assert c.pending() == []


def test_session_end_releases_what_the_record_never_showed(sb, c):
    sb.send(PERSONA, "loom", "MAIL-DROPPED")
    assert "MAIL-DROPPED" in c.hook("copilot-session-start", "SessionStart", source="new")[1]
    assert c.hook("copilot-session-end", "SessionEnd", reason="complete") == (0, "", "")
    assert all(p["holder"] is None for p in c.pending())
    assert "MAIL-DROPPED" in c.run("--once", "--peek", "--persona", PERSONA)[1]


def test_install_writes_its_own_file_and_uninstall_removes_only_it(c):
    hooks = c.home / ".copilot" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "mine.json").write_text('{"version": 1, "hooks": {}}\n')
    code, out, err = c.run("install", "copilot", "--user", "--command", KIJITO_PULL)
    assert code == 0, err
    data = json.loads((hooks / "kijito-pull.json").read_text())
    assert {e: g[0]["hooks"][0]["command"] for e, g in data["hooks"].items()} == {
        "SessionStart": f"{KIJITO_PULL} hook copilot-session-start", "Stop": f"{KIJITO_PULL} hook copilot-stop",
        "SessionEnd": f"{KIJITO_PULL} hook copilot-session-end"}
    assert "already installed" in c.run("install", "copilot", "--user", "--command", KIJITO_PULL)[1]
    assert c.run("uninstall", "copilot", "--user")[0] == 0
    assert sorted(p.name for p in hooks.iterdir()) == ["mine.json"]


def test_a_file_of_that_name_with_someone_elses_hooks_is_never_touched(c):
    hooks = c.home / ".copilot" / "hooks"
    hooks.mkdir(parents=True)
    theirs = '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./theirs.sh"}]}]}}\n'
    (hooks / "kijito-pull.json").write_text(theirs)
    for action in ("install", "uninstall"):
        code, _, err = c.run(action, "copilot", "--user")
        assert code != 0 and "not kijito-pull's" in err, (action, err)
    assert (hooks / "kijito-pull.json").read_text() == theirs


def test_project_round_trip_leaves_the_repository_as_it_was(c):
    before = sorted(str(p.relative_to(c.project)) for p in c.project.rglob("*"))
    code, out, _ = c.run("install", "copilot", "--project", "--command", KIJITO_PULL)
    assert code == 0 and "skips its .github/hooks without a word" in out and "--trust" in out, out
    assert (c.project / ".github" / "hooks" / "kijito-pull.json").exists()
    assert c.run("uninstall", "copilot", "--project")[0] == 0
    assert sorted(str(p.relative_to(c.project)) for p in c.project.rglob("*")) == before


COPILOT_CONFIG = (b'// User settings belong in settings.json.\n// This file is managed automatically.\n{\n'
                  b'  "firstLaunchAt": "2026-03-11T00:00:00.000Z",\n  "trustedFolders": [\n    "/elsewhere"\n  ]\n}\n')


def test_trust_is_recorded_only_when_asked_after_the_comment_lines_and_given_back_byte_for_byte(c):
    config = c.home / ".copilot" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(COPILOT_CONFIG)
    assert c.run("install", "copilot", "--project", "--command", KIJITO_PULL)[0] == 0
    assert config.read_bytes() == COPILOT_CONFIG  # never without --trust
    code, out, _ = c.run("doctor", "--json")
    assert '"copilot.trust", "verdict": "fail"' in out, out
    code, out, err = c.run("install", "copilot", "--project", "--trust", "--command", KIJITO_PULL)
    assert code == 0 and "now trusts" in out, out + err
    text = config.read_bytes()
    assert text.startswith(COPILOT_CONFIG[:COPILOT_CONFIG.index(b"{")])
    assert json.loads(text[text.index(b"{"):])["trustedFolders"] == ["/elsewhere", str(c.project)]
    assert '"copilot.trust", "verdict": "ok"' in c.run("doctor", "--json")[1]
    assert c.run("uninstall", "copilot", "--project")[0] == 0
    assert config.read_bytes() == COPILOT_CONFIG


def test_uninstall_takes_out_only_our_trust_when_copilot_changed_the_file_meanwhile(c):
    config = c.home / ".copilot" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(COPILOT_CONFIG)
    assert c.run("install", "copilot", "--project", "--trust", "--command", KIJITO_PULL)[0] == 0
    changed = config.read_bytes().replace(b'"firstLaunchAt"', b'"appTipShown": true,\n  "firstLaunchAt"')
    config.write_bytes(changed)
    assert c.run("uninstall", "copilot", "--project")[0] == 0
    text = config.read_bytes()
    assert text.startswith(b"// User settings belong in settings.json.\n// This file is managed automatically.\n{")
    data = json.loads(text[text.index(b"{"):])
    assert data["trustedFolders"] == ["/elsewhere"] and data["appTipShown"] is True


def test_user_install_puts_the_extension_in_place_and_says_push_needs_experimental(c):
    code, out, err = c.run("install", "copilot", "--user", "--command", KIJITO_PULL)
    ext = c.home / ".copilot" / "extensions" / "kijito-pull" / "extension.mjs"
    assert code == 0 and ext.read_bytes().startswith(b"// kijito-pull for GitHub Copilot CLI"), out + err
    assert "copilot --experimental" in out and not (c.home / ".copilot" / "settings.json").exists()
    assert '"copilot.push", "verdict": "warn"' in c.run("doctor", "--json")[1]
    (c.home / ".copilot" / "settings.json").write_text('{\n  "experimental": true\n}\n')
    assert '"copilot.push", "verdict": "ok"' in c.run("doctor", "--json")[1]
    assert c.run("uninstall", "copilot", "--user")[0] == 0
    assert not (c.home / ".copilot" / "extensions").exists() and not (c.home / ".copilot" / "hooks").exists()
