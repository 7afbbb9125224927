"""A stand-in for kijito-pull's Copilot CLI extension in one session, and for the Copilot CLI that records what it
sends: extension.mjs's protocol on its Unix socket (copilot/session.py: `{"hello": true}` -> `{"session": id}`;
`{"prompt", "mode"}` -> `{"ok": message id}` or `{"error": ...}`), and for each accepted prompt the
`user.message` Copilot CLI appends to the session's events.jsonl once the model is given it (measured on
1.0.102), `record_delay` seconds later (0: before the answer). The real extension in the real TUI:
tests/e2e/test_copilot_e2e.py. What a push may become (taken, refused, recorded late or never) is the shared
stand-in's (tests/wayin.py); each push's `tag` is the pid of the process that sent it.

    refuse        every prompt fails
    refuse_share  this share of prompts fails (at random)
    hang          set: a prompt gets no answer and is never taken (the session is stuck)
    records       False: a prompt is taken, never recorded (the model not given it yet: a queued turn)
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from tests.wayin import WayIn, serve_unix


class FakeExtension(WayIn):
    tag_is_pid = True

    def __init__(self, runtime: Path, record: Path, session_id: str, *, record_delay: float = 0.0,
                 refuse_share: float = 0.0, seed: int = 0):
        super().__init__(record_delay=record_delay, refuse_share=refuse_share, seed=seed)
        folder = runtime / "kijito-pull"
        folder.mkdir(mode=0o700, exist_ok=True)
        self.path = folder / f"copilot-{session_id}.sock"
        self.session_id = session_id
        self.runtime = runtime
        self.events = record
        self.hang = threading.Event()
        self._write = threading.Lock()
        self.server = serve_unix(self.path, self._answer)

    def _answer(self, request: dict, pid: int) -> dict:
        if request.get("hello"):
            return {"session": self.session_id}
        if self.hang.is_set():
            while self.hang.is_set():
                time.sleep(0.05)
            return {"error": "dropped"}  # by then its sender is gone
        if not self.offer(request["prompt"], str(pid), request):
            return {"error": "session is shutting down"}
        return {"ok": f"msg-{len(self.prompts)}"}

    def record(self, text: str) -> None:
        with self._write, self.events.open("a") as handle:
            handle.write(json.dumps({"type": "user.message", "data": {"content": text, "delivery": "idle"}}) + "\n")

    def watcher_env(self, tag: str) -> dict[str, str]:
        return {"XDG_RUNTIME_DIR": str(self.runtime)}

    def close(self) -> None:
        self.server.close()
        super().close()


def for_session(runtime: Path, session, seed: int) -> FakeExtension:
    """The crash trials' way in for a session (kijito_pull/harnesses/copilot/testing.py names it)."""
    return FakeExtension(runtime, session.transcript, session.id, record_delay=0.3, seed=seed)
