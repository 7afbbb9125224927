"""The watcher of an OpenCode session (`kijito-pull hook opencode-watch`) as a real process against the sandbox,
with a stand-in of the session's server (tests/opencodeserver.py: `prompt_async`, the session's messages, as
OpenCode 1.18.33 answers them; the real server in tests/e2e/test_opencode_e2e.py). Pinned down here: a push
OpenCode took and recorded is confirmed at the turn's end (`opencode-session-idle`) even when the watcher is
gone before its own next look, so it is not claimed back and pushed a second time when OpenCode exits (the
crash trials, scripts/crash_entries.py, found that duplicate).
"""

from __future__ import annotations

import json
import subprocess
import threading

from kijito_pull.harnesses.opencode.server import PASSWORD_ENV
from tests.entrypoints import HarnessSession
from tests.harnesses.opencode.test_hooks import KIJITO_PULL, PERSONA, SID, OpenCode
from tests.harnesses.opencode.test_hooks import TOKEN as TOKEN  # the `sb` fixture's token (tests/conftest.py)
from tests.opencodeserver import OpenCodeServer


def test_the_turn_end_confirms_a_push_the_watcher_did_not_live_to_confirm(sb, tmp_path) -> None:
    oc = OpenCode(sb, tmp_path)
    session = HarnessSession(tmp_path / "store", SID, harness="opencode")
    server = OpenCodeServer(session)  # takes each prompt and records it at once
    try:
        nothing = oc.hook("opencode-chat-message", opencode=str(session.binary), server_url="")
        assert nothing.stdout == "{}\n", nothing.stderr  # the session's first message: no mail yet
        sb.send(PERSONA, "loom", "MAIL-PUSHED: the release is frozen")
        watcher: list[subprocess.Popen] = []
        killed = threading.Event()

        def at_push() -> bool:  # the watcher dies the moment OpenCode takes its prompt
            watcher[0].kill()
            killed.set()
            return False

        server.arm("1", at_push)
        data = {"session_id": SID, "cwd": str(oc.project), "opencode": str(session.binary), "server_url": server.url}
        watcher.append(subprocess.Popen([KIJITO_PULL, "hook", "opencode-watch"], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        env={**oc.environ, PASSWORD_ENV: "run-1"}, cwd=str(oc.project)))
        watcher[0].stdin.write(json.dumps(data))
        watcher[0].stdin.close()
        assert killed.wait(30), watcher[0].stderr.read() if watcher[0].poll() is not None else "no push"
        watcher[0].wait(10)
        assert "MAIL-PUSHED" in session.messages_json()  # OpenCode has it: the model was given it
        assert [p["holder"] for p in oc.status()["pending"]] == [f"opencode-push:{SID}"]
        # The turn ends: the plugin's session.idle confirms what the record shows, the watcher's push included.
        idle = oc.hook("opencode-session-idle", opencode=str(session.binary), server_url=server.url)
        assert idle.returncode == 0, idle.stderr
        assert oc.status()["pending"] == [], oc.status()
        # Nothing is left to hand over again: the next message's hook finds no mail.
        assert oc.hook("opencode-chat-message", opencode=str(session.binary), server_url="").stdout == "{}\n"
    finally:
        server.close()
