"""A stand-in for kijito-pull's Copilot CLI extension in one session, and for the Copilot CLI that records what it
sends: extension.mjs's protocol on its Unix socket (copilot/session.py: `{"hello": true}` -> `{"session": id}`;
`{"prompt", "mode"}` -> `{"ok": message id}` or `{"error": ...}`), and for each accepted prompt the
`user.message` Copilot CLI appends to the session's events.jsonl once the model is given it (measured on
1.0.102), `record_delay` seconds later (0: before the answer). The real extension in the real TUI:
tests/e2e/test_copilot_e2e.py.

    refuse        every prompt fails
    refuse_share  this share of prompts fails (at random)
    hang          set: a prompt gets no answer and is never taken (the session is stuck)
    records       False: a prompt is taken, never recorded (the model not given it yet: a queued turn)
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from pathlib import Path


class FakeExtension:
    def __init__(self, runtime: Path, record: Path, session_id: str, *, record_delay: float = 0.0,
                 refuse_share: float = 0.0, seed: int = 0):
        folder = runtime / "kijito-pull"
        folder.mkdir(mode=0o700, exist_ok=True)
        self.path = folder / f"copilot-{session_id}.sock"
        self.session_id = session_id
        self.record = record
        self.record_delay = record_delay
        self.refuse_share = refuse_share
        self.rng = random.Random(seed)
        self.prompts: list[dict] = []
        self.refuse = False
        self.hang = threading.Event()
        self.records = True
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                try:
                    request = json.loads(conn.makefile().readline())
                    conn.sendall(json.dumps(self._answer(request)).encode() + b"\n")
                except (OSError, ValueError):
                    pass  # the watcher went away mid-request (killed): Copilot sees a closed connection

    def _answer(self, request: dict) -> dict:
        if request.get("hello"):
            return {"session": self.session_id}
        if self.hang.is_set():
            while self.hang.is_set():
                time.sleep(0.05)
            return {"error": "dropped"}  # by then its sender is gone
        with self._lock:
            if self.refuse or (self.refuse_share and self.rng.random() < self.refuse_share):
                return {"error": "session is shutting down"}
            self.prompts.append(request)
            n = len(self.prompts)
        if not self.records:
            pass
        elif self.record_delay:
            timer = threading.Timer(self.rng.uniform(0.0, self.record_delay), self._record, args=(request,))
            self._timers.append(timer)
            timer.start()
        else:
            self._record(request)
        return {"ok": f"msg-{n}"}

    def _record(self, request: dict) -> None:
        with self._lock, self.record.open("a") as handle:
            handle.write(json.dumps({"type": "user.message", "data": {"content": request["prompt"],
                                                                      "delivery": "idle"}}) + "\n")

    def settle(self) -> None:
        """Wait until every accepted prompt is in the record."""
        for timer in list(self._timers):
            timer.join()

    def close(self) -> None:
        self.server.close()
        self.settle()
