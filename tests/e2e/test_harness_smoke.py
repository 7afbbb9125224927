"""Prove the e2e infrastructure: each real harness, offline, reaches the fake model, and text
injected by a plugin hook (Claude Code) or an extension (pi, both lines) shows up inside a model
request. Plus fast checks of the fake model itself and of ``require_harness``."""

from __future__ import annotations

import http.client
import json
import shlex
from pathlib import Path

import pytest

from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel

e2e = pytest.mark.e2e


# ---------------------------------------------------------------------------------------------
# The fake model on its own (no harness needed)
# ---------------------------------------------------------------------------------------------
def _call(fm: FakeModel, method: str, path: str, body: object = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", fm.port, timeout=5)
    payload = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, text


def test_fake_model_answers_every_shape(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with FakeModel(log_path=str(log)) as fm:
        assert _call(fm, "HEAD", "/") == (200, "")
        assert _call(fm, "GET", "/anything") == (200, "{}")
        status, text = _call(
            fm,
            "POST",
            "/v1/messages",
            {
                "model": "m",
                "system": [{"type": "text", "text": "SYS-1"}],
                "messages": [{"role": "user", "content": "hello"}],
            },
        )
        assert status == 200 and json.loads(text)["content"] == [{"type": "text", "text": "ok"}]
        status, text = _call(
            fm,
            "POST",
            "/v1/messages",
            {
                "stream": True,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "TR-2"}]}
                        ],
                    }
                ],
            },
        )
        assert status == 200 and "event: message_stop" in text and '"end_turn"' in text
        assert json.loads(_call(fm, "POST", "/v1/messages/count_tokens", {"messages": []})[1])["input_tokens"] >= 1
        status, text = _call(fm, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        assert json.loads(text)["choices"][0]["message"]["content"] == "ok"
        status, text = _call(fm, "POST", "/v1/chat/completions", {"stream": True, "messages": []})
        assert text.rstrip().endswith("data: [DONE]")

        assert fm.wait_for_text("SYS-1", timeout=1) is not None
        assert "TR-2" in fm.text_of(fm.wait_for_text("TR-2", timeout=1) or {})
        assert fm.wait_for_text("never-sent", timeout=0.2) is None
        assert len(fm.model_requests) == 4 and len(fm.requests) == 7
    assert len(log.read_text().splitlines()) == 7


def test_fake_model_speaks_gemini(tmp_path: Path) -> None:
    """Gemini CLI's two routes: the streamed answer (one SSE event) and the plain JSON side request; the
    text of `systemInstruction` and `contents` is what `text_of` reads."""
    answers = iter(["first", "second"])
    with FakeModel(lambda request: next(answers)) as fm:
        body = {"systemInstruction": {"role": "user", "parts": [{"text": "SYS-G"}]},
                "contents": [{"role": "user", "parts": [{"text": "<hook_context>kijito-ref:g1</hook_context>"}]}]}
        status, text = _call(fm, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body)
        assert status == 200 and text.startswith("data: ") and text.endswith("\n\n")
        event = json.loads(text[len("data: "):])
        assert event["candidates"][0]["content"]["parts"] == [{"text": "first"}]
        assert event["candidates"][0]["finishReason"] == "STOP" and event["usageMetadata"]["totalTokenCount"] > 0
        status, text = _call(fm, "POST", "/v1beta/models/gemini-3.5-flash-lite:generateContent", {"contents": []})
        assert json.loads(text)["candidates"][0]["content"]["parts"] == [{"text": "second"}]
        found = fm.wait_for_text("kijito-ref:g1", timeout=1)
        assert found is not None and found["full_path"].endswith("?alt=sse") and "SYS-G" in fm.text_of(found)
        assert len(fm.model_requests) == 2


def test_require_harness_skips_or_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KIJITO_PULL_HARNESS_DIR", str(tmp_path / "nothing-here"))
    monkeypatch.delenv(h.REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception):
        h.require_harness("claude")
    monkeypatch.setenv(h.REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception):
        h.require_harness("pi1")


# ---------------------------------------------------------------------------------------------
# Claude Code
# ---------------------------------------------------------------------------------------------
def make_claude_plugin(root: Path, marker: str) -> Path:
    """A plugin whose SessionStart hook adds ``marker`` as additional context."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "e2e-smoke"}))
    (root / "hooks").mkdir()
    output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": marker}}
    hooks = {
        "hooks": {
            "SessionStart": [{"hooks": [{"type": "command", "command": "echo " + shlex.quote(json.dumps(output))}]}]
        }
    }
    (root / "hooks" / "hooks.json").write_text(json.dumps(hooks))
    return root


@e2e
def test_claude_p_reaches_fake_model_with_session_start_context(
    claude_harness: h.Harness, fake_model: FakeModel, e2e_home: Path, e2e_workdir: Path, tmp_path: Path
) -> None:
    plugin = make_claude_plugin(tmp_path / "plugin", "MARKER-123")
    result = h.run_claude_p(
        claude_harness,
        "say hi",
        base_url=fake_model.url,
        home=e2e_home,
        cwd=e2e_workdir,
        plugin_dirs=[plugin],
        timeout=45,
    )
    diag = f"rc={result.returncode}\nstdout={result.stdout[-2000:]}\nstderr={result.stderr[-2000:]}"
    assert result.returncode == 0, diag
    first = fake_model.wait_for(lambda r: r["path"].endswith("/v1/messages"), timeout=5)
    assert first is not None, "no model request reached the fake model\n" + diag
    assert "MARKER-123" in fake_model.text_of(first), "SessionStart context missing from the first request"
    assert "say hi" in fake_model.text_of(first)
    assert "ok" in result.stdout


@e2e
def test_claude_tui_under_tmux_reaches_fake_model(
    claude_harness: h.Harness, fake_model: FakeModel, e2e_home: Path, e2e_workdir: Path, tmp_path: Path
) -> None:
    plugin = make_claude_plugin(tmp_path / "plugin", "MARKER-TUI")
    with h.start_claude_tui(
        claude_harness, base_url=fake_model.url, home=e2e_home, cwd=e2e_workdir, plugin_dirs=[plugin]
    ) as tui:
        from tests.e2e.claude_helpers import wait_tui_ready

        assert wait_tui_ready(tui), tui.capture()  # the prompt footer differs between versions
        tui.type("say hi from tmux")
        # The TUI also asks the model for a session title; look for the conversation request.
        request = fake_model.wait_for(
            lambda r: "say hi from tmux" in fake_model.text_of(r) and "MARKER-TUI" in fake_model.text_of(r), timeout=20
        )
        assert request is not None, tui.capture()


# ---------------------------------------------------------------------------------------------
# pi (0.73.x and 1.x)
# ---------------------------------------------------------------------------------------------
PI_WAKE_EXTENSION = """\
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.on("session_start", async () => {
    pi.sendUserMessage("MARKER-456", { deliverAs: "followUp" });
  });
}
"""


@e2e
def test_pi_rpc_extension_wakes_idle_agent(
    pi_harness: h.Harness, fake_model: FakeModel, e2e_home: Path, e2e_workdir: Path, tmp_path: Path
) -> None:
    ext = tmp_path / "wake.ts"
    ext.write_text(PI_WAKE_EXTENSION)
    with h.start_pi(pi_harness, base_url=fake_model.url, home=e2e_home, cwd=e2e_workdir, extensions=[ext]) as proc:
        # No prompt is ever sent: only the extension can have caused this request.
        request = fake_model.wait_for_text("MARKER-456", timeout=20)
        assert request is not None, "pi never asked the model about MARKER-456\n" + proc.diagnostics()
        end = proc.wait_for_event(lambda e: e.get("type") == "agent_end", timeout=10)
        assert end is not None, proc.diagnostics()
