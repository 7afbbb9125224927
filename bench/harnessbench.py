"""What the harness wake benches share: a pinned harness or a clear exit, a fake model reply that keeps a turn
busy while the mail is sent, and the two sampling loops (idle wake, busy push) that time a message from the
sandbox's own send to the first model request that holds it.

A sample's clock starts when the sandbox took the message (in-process, no CLI start-up) and stops at the
fake model's receive time of the request; both are on this machine's clock."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.e2e import claude_helpers as ch  # noqa: E402
from tests.e2e import harness as h  # noqa: E402
from tests.e2e.fakemodel import MODEL_PATHS, FakeModel, ToolUse, text_of  # noqa: E402

MODEL_PATHS_ANY = lambda _request: True  # noqa: E731 - every model request counts


def need_harness(name: str, hint: str = "") -> h.Harness:
    """The harness `name` from .harness/, or exit saying how to install it (and `hint`, what else would do)."""
    harness = h.find_harness(name)
    if harness is None:
        raise SystemExit(f"{name} is not installed: run scripts/install-harnesses{f' ({hint})' if hint else ''}")
    return harness


class HeldTurn:
    """A fake model reply: the first request holding the armed tag (a turn's prompt) sends the armed mail,
    is held `hold` seconds (the model still answering: the session is busy) and then answered with `answer`
    (a tool call keeps the turn going, text ends it); every other request gets "ok". `skip(text)` leaves out
    requests that are not the conversation's (title generators)."""

    def __init__(self, sandbox, hold: float, answer: str | ToolUse = "ok",
                 skip: Callable[[str], bool] = lambda _text: False) -> None:
        self.sandbox, self.hold, self.answer, self.skip = sandbox, hold, answer, skip
        self._lock = threading.Lock()
        self.tag: str | None = None
        self.marker = ""
        self.sent: float | None = None

    def arm(self, tag: str, marker: str) -> None:
        with self._lock:
            self.tag, self.marker, self.sent = tag, marker, None

    def __call__(self, request: dict) -> str | ToolUse:
        text = text_of(request)
        with self._lock:
            fire = self.tag is not None and self.tag in text and self.sent is None and not self.skip(text)
            if fire:
                self.sent = time.time()
                self.sandbox.send(ch.PERSONA, "loom", self.marker)
        if fire:
            time.sleep(self.hold)
            return self.answer
        return "ok"


def _first_with(model: FakeModel, marker: str, start: int, timeout: float,
                counts: Callable[[dict], bool]) -> dict | None:
    return model.wait_for(lambda r: r["path"].endswith(MODEL_PATHS) and marker in text_of(r) and counts(r),
                          timeout, start)


def idle_samples(model: FakeModel, sandbox, count: int, prefix: str, settle: Callable[[], None], *,
                 idle_gap: float = 1.0, counts: Callable[[dict], bool] = MODEL_PATHS_ANY,
                 diagnostics: Callable[[], str] = str) -> list[float]:
    """`count` messages to an idle session, one at a time: send -> the first model request holding it;
    after each, `settle()` (the woken turn over, its hand-over confirmed) and `idle_gap` seconds idle."""
    latencies = []
    time.sleep(idle_gap)
    for i in range(count):
        marker = f"{prefix}-IDLE-{i:03d}"
        start = len(model.requests)
        sent = time.time()
        sandbox.send(ch.PERSONA, "loom", marker)
        request = _first_with(model, marker, start, 30, counts)
        if request is None:
            raise SystemExit(f"{marker} never reached the model\n{diagnostics()}")
        latencies.append(request["time"] - sent)
        settle()
        time.sleep(idle_gap)
    return latencies


def busy_samples(model: FakeModel, held: HeldTurn, count: int, prefix: str, start_turn: Callable[[str], None],
                 settle: Callable[[], None], *, idle_gap: float = 1.0,
                 counts: Callable[[dict], bool] = MODEL_PATHS_ANY, diagnostics: Callable[[], str] = str) \
        -> list[float]:
    """`count` turns, each started with `start_turn(prompt)`; `held` (the model's reply) sends one message
    while it holds the turn's first model request: send -> the first later model request holding it."""
    latencies = []
    for i in range(count):
        tag, marker = f"{prefix.lower()}-turn-{i:03d}", f"{prefix}-BUSY-{i:03d}"
        held.arm(tag, marker)
        start = len(model.requests)
        start_turn(f"{tag}: keep working")
        request = _first_with(model, marker, start, 60, counts)
        if request is None or held.sent is None:
            raise SystemExit(f"{marker} never reached the model (sent: {held.sent})\n{diagnostics()}")
        latencies.append(request["time"] - held.sent)
        settle()
        time.sleep(idle_gap)
    return latencies


def settled(pending: Callable[[], list], timeout: float = 30) -> Callable[[], None]:
    """A `settle` that waits until nothing is pending with a session (the hand-over confirmed)."""
    def settle() -> None:
        ch.wait_until(lambda: pending() == [], timeout, step=0.3)

    return settle
