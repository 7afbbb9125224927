"""Qwen Code's session inbox from kijito-pull's side (kijito_pull.harnesses.qwen.session and .inbox): the
registry record a TUI writes (`sessions/<pid>.json`, shaped as Qwen 0.24.4 writes it), the session's mode from
it, the controller token kept and checked against Qwen's `peer-controllers.json`, and the two NDJSON lines
written to a real Unix socket. The real Qwen TUI takes them in tests/e2e/test_qwen_e2e.py (idle wake)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from kijito_pull.harnesses.qwen import inbox, session

SID = "5e2c68c8-f3d7-4aa2-b1a4-2bb69adfed19"


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home" / ".qwen" / "sessions").mkdir(parents=True)
    return {"HOME": str(tmp_path / "home"), "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"),
            "KIJITOMON_TOKEN": "kijito-secret-token", "PATH": os.environ.get("PATH", "")}


def register(environ: dict[str, str], pid: int, sock: str, **fields) -> Path:
    path = Path(environ["HOME"]) / ".qwen" / "sessions" / f"{pid}.json"
    path.write_text(json.dumps({"schemaVersion": 1, "pid": pid, "procStart": "x:1", "sessionId": SID, "cwd": "/p",
                                "name": "p-e4", "qwenVersion": "0.24.4", "kind": "tui", "ipcPath": sock,
                                "ipcToken": "ab" * 32, **fields}, indent=2))
    path.chmod(0o600)
    return path


def test_find_reads_a_tui_record_of_this_session_only(environ, tmp_path):
    register(environ, 4242, str(tmp_path / "4242.sock"))
    found = session.find(environ, SID, 4242)
    assert found is not None and found.path == str(tmp_path / "4242.sock") and found.session_id == SID
    assert session.find(environ, "another-session", 4242) is None
    assert session.find(environ, SID, 4243) is None
    register(environ, 4242, str(tmp_path / "4242.sock"), kind="serve")  # a daemon session: not our route
    assert session.find(environ, SID, 4242) is None
    register(environ, 4242, "relative.sock")
    assert session.find(environ, SID, 4242) is None


def test_qwen_home_and_runtime_dir_move_the_registry(environ, tmp_path):
    assert session.registry_dir(environ) == Path(environ["HOME"]) / ".qwen" / "sessions"
    assert session.registry_dir({**environ, "QWEN_HOME": str(tmp_path / "q")}) == tmp_path / "q" / "sessions"
    assert session.registry_dir({**environ, "QWEN_HOME": str(tmp_path / "q"),
                                 "QWEN_RUNTIME_DIR": str(tmp_path / "r")}) == tmp_path / "r" / "sessions"


def test_mode_is_interactive_only_for_a_registered_tui_session(environ, tmp_path):
    environ["QWEN_CODE_SESSION_ID"] = SID
    assert session.detect_mode(environ) == ("headless", None)  # no record for the process running us
    from kijito_pull.harnesses.session import lifecycle

    host = lifecycle.host_process()
    assert host is not None
    register(environ, host.pid, str(tmp_path / "x.sock"))
    assert session.detect_mode(environ) == ("interactive", None)
    register(environ, host.pid, str(tmp_path / "x.sock"), sessionId="the-session-before-clear")
    assert session.detect_mode(environ) == ("interactive", None)  # /clear: the record names the new one later
    register(environ, host.pid, str(tmp_path / "x.sock"), kind="serve")
    assert session.detect_mode(environ) == ("headless", None)
    register(environ, host.pid, str(tmp_path / "x.sock"))
    assert session.detect_mode({**environ, "KIJITO_PULL_QWEN_MODE": "headless"}) == ("headless", None)
    mode, note = session.detect_mode({**environ, "KIJITO_PULL_QWEN_MODE": "tui"})
    assert mode == "interactive" and "ignoring KIJITO_PULL_QWEN_MODE" in note


def test_send_writes_the_auth_line_then_one_user_frame_to_the_socket(tmp_path):
    path = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    got: list[bytes] = []

    def accept() -> None:
        conn, _ = server.accept()
        with conn:
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
            got.append(b"".join(chunks))

    thread = threading.Thread(target=accept)
    thread.start()
    assert inbox.send(session.Inbox(path, SID, 1), "qpc_" + "0" * 64, "mail <b> kijito-ref:abc") is None
    thread.join(5)
    server.close()
    auth, user = (json.loads(line) for line in got[0].decode().splitlines())
    assert auth == {"msgV": 1, "type": "auth", "token": "qpc_" + "0" * 64}
    assert user["type"] == "user" and user["toSessionId"] == SID and user["fromName"] == "kijito"
    assert user["message"] == {"role": "user", "content": "mail <b> kijito-ref:abc"}
    gone = inbox.send(session.Inbox(str(tmp_path / "none.sock"), SID, 1), "qpc_x", "text")
    assert gone is not None and "refused" in gone


MINT = """import json, os, sys
open(os.environ["MINT_LOG"], "a").write(json.dumps({"argv": sys.argv[1:], "env": sorted(os.environ)}) + "\\n")
print(json.dumps({"id": "c_1", "label": "kijito-pull", "token": "qpc_" + "1" * 64, "createdAt": 1}))
"""


def test_the_controller_token_is_minted_once_kept_private_and_minted_again_when_qwen_forgot_it(environ, tmp_path):
    script = tmp_path / "mint.py"
    script.write_text(MINT)
    environ["MINT_LOG"] = str(tmp_path / "mint.log")
    command = [sys.executable, str(script)]
    token, problem = inbox.controller(environ, command)
    assert token == "qpc_" + "1" * 64 and problem is None
    [call] = [json.loads(line) for line in (tmp_path / "mint.log").read_text().splitlines()]
    name = inbox.label(environ)
    assert name.startswith("kijito-pull-") and len(name) == len("kijito-pull-") + 8
    assert call["argv"] == ["sessions", "controllers", "add", "--label", name, "--json"]
    assert "KIJITOMON_TOKEN" not in call["env"]  # Qwen gets no Kijito setting
    kept = Path(environ["KIJITO_PULL_STATE_DIR"]) / "qwen-controller.json"
    assert kept.stat().st_mode & 0o777 == 0o600
    # Qwen lists its hash (as `qwen sessions controllers add` records it): used again, nothing minted.
    listed = {"schemaVersion": 1, "controllers": [{"id": "c_1", "label": name, "createdAt": 1,
                                                   "tokenHash": hashlib.sha256(token.encode()).hexdigest()}]}
    (Path(environ["HOME"]) / ".qwen" / "peer-controllers.json").write_text(json.dumps(listed))
    assert inbox.controller(environ, ["false"]) == (token, None)
    # The user removed the controller: minted again.
    (Path(environ["HOME"]) / ".qwen" / "peer-controllers.json").write_text(json.dumps({"controllers": []}))
    assert inbox.controller(environ, command) == (token, None)
    assert len((tmp_path / "mint.log").read_text().splitlines()) == 2
    # Our state folder was wiped while Qwen still lists our label: that controller is revoked, then minted again
    # (Qwen refuses a second controller of the same label).
    kept.unlink()
    listed["controllers"][0]["id"] = "c_old"
    (Path(environ["HOME"]) / ".qwen" / "peer-controllers.json").write_text(json.dumps(listed))
    assert inbox.controller(environ, command) == (token, None)
    calls = [json.loads(line)["argv"] for line in (tmp_path / "mint.log").read_text().splitlines()]
    assert calls[-2:] == [["sessions", "controllers", "remove", "c_old"],
                          ["sessions", "controllers", "add", "--label", name, "--json"]]
    (Path(environ["HOME"]) / ".qwen" / "peer-controllers.json").write_text(json.dumps({"controllers": []}))
    token, problem = inbox.controller(environ, ["false"])  # a Qwen that cannot mint: no token, and why
    assert token is None and "gave no token" in problem
