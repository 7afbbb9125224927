"""Kimi Code CLI as the shared tests, crash trials and benches drive it (the contract: harnesses/claude/testing.py).

Its hook input names no record: the session's wire.jsonl is found from the session id and the working folder
(kimi/record.py), and only its `context.append_message` records confirm a hand-over.
"""

from __future__ import annotations

from pathlib import Path

ENTRY_HOOKS = ("kimi-prompt", "kimi-stop")
SESSION_END = "kimi-session-end"
PUSH_ROUTE = None  # no route into a running session (measured on 2.1.0): a wake bench row without figures
SESSION_ID = "session_{}"  # Kimi's own session ids (kimi/record.py reads no other)


def hook_input(event: str, session_id: str) -> dict:
    data: dict = {"client_type": "kimi_code_cli"}
    if event == "UserPromptSubmit":
        data.update({"session_title": "t", "prompt": [{"type": "text", "text": "say hi"}], "is_steer": False})
    elif event == "Stop":
        data.update({"session_title": "t", "stop_hook_active": False})
    else:
        data["reason"] = "exit"
    return data


def record_path(directory: Path, home: Path, project: Path, session_id: str) -> Path:
    from kijito_pull.harnesses.kimi.record import bucket

    return home / ".kimi-code" / "sessions" / bucket(str(project)) / session_id / "agents" / "main" / "wire.jsonl"


def record_start(session_id: str, interactive: bool) -> list[dict]:
    return [{"type": "metadata", "protocol_version": "1.5"}]


def record_lines(text: str, event: str, n: int) -> list[dict]:
    """The answer put in the session's context: a hook result before the prompt, a Stop continuation."""
    origin = ({"kind": "hook_result", "event": "UserPromptSubmit"} if event == "UserPromptSubmit"
              else {"kind": "system_trigger", "name": "stop_hook"})
    return [{"type": "context.append_message", "agentId": "main", "time": n,
             "message": {"role": "user", "content": [{"type": "text", "text": text}], "toolCalls": [],
                         "origin": origin}}]


def record_fields(record: Path, event: str) -> dict:
    return {}
