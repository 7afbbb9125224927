"""Mail reaches a busy Claude Code agent between tool calls: the session inbox socket (issue 12).

The real Claude Code (2.1.332, `claude2`: the socket exists since 2.1.224) runs offline against the
fake model, which keeps the agent busy with Bash `sleep` tool calls (`--allowedTools Bash`). The proof
is the mail text inside a model request that still belongs to the busy turn (its last message carries a
tool result), within the issue's 2 s of the send, and exactly once in the whole conversation. Where
the socket is refused (`crossSessionInbound: refuse`) or absent (2.1.197), the Stop hook and the
doorbell still deliver, once.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from kijito_pull.harnesses.session import lifecycle
from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel, ToolUse, tool_results
from tests.waiting import budget

pytestmark = pytest.mark.e2e

PUSH_BUDGET = 2.0  # seconds from the send to a model request holding the mail (the bound)
SLEEP = 2  # seconds per Bash tool call
CALLS = 9  # tool calls in the busy turn: 9 x 2 s keeps the agent busy for more than 15 s


class BusyModel:
    """A fake model that answers the task prompt with CALLS Bash sleeps, then "done"; the mail is sent
    (from a thread) one second into the second tool call. Anything after the busy turn gets "ok"."""

    def __init__(self, sandbox, task: str, mail: str, calls: int = CALLS, urgent: bool = False):
        self.sandbox = sandbox
        self.task = task
        self.mail = mail
        self.calls = calls
        self.urgent = urgent
        self.asked = 0
        self.sent_at: float | None = None
        self.done_at: float | None = None
        self.lock = threading.Lock()

    def _send_later(self) -> None:
        time.sleep(1.0)
        self.sent_at = time.time()
        self.sandbox.send(ch.PERSONA, "loom", f"{self.mail}: build is red, stop pushing", urgent=self.urgent)

    def __call__(self, request: dict):
        text = FakeModel.text_of(request)
        if ch.TITLE_MARK in text or self.task not in text:
            return "ok"
        with self.lock:
            if self.done_at is not None:
                return "ok"  # a later turn (a Stop block, a queued message)
            self.asked += 1
            if self.asked == 2:
                threading.Thread(target=self._send_later, daemon=True).start()
            if self.asked <= self.calls:
                return ToolUse("Bash", {"command": f"sleep {SLEEP}", "description": "wait"})
            self.done_at = time.time()
            return "done"


def _project(tmp_path: Path, interrupt: str | None = None) -> Path:
    project = ch.make_project(tmp_path)
    if interrupt:
        with (project / "AGENTS.md").open("a") as handle:
            handle.write(f"- inbox interrupt: {interrupt}\n")
    return project


def _settings(tmp_path: Path, inbound: str | None) -> list[str]:
    if inbound is None:
        return []
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"crossSessionInbound": inbound}))
    return ["--settings", str(path)]


def _cursor(state: Path) -> dict:
    [path] = (state / "cursors").glob("*.json")
    return json.loads(path.read_text())


def _mid_turn(request: dict) -> bool:
    """A request of the busy turn: it answers a tool call (a tool result in its last user message; Claude
    Code 2.1.332 puts a pushed message after it as a system-role message)."""
    messages = (request.get("body") or {}).get("messages") or []
    users = [m for m in messages if m.get("role") == "user"]
    return bool(users) and bool(tool_results({"body": {"messages": users[-1:]}}))


def _run_busy(harness: h.Harness, netns: h.NetNS, sandbox, state: Path, home: Path, tmp_path: Path, *,
              interrupt: str | None = None, inbound: str | None = None):
    project = _project(tmp_path, interrupt)
    sandbox.send(ch.PERSONA, "loom", "ESTABLISH: the cursor")  # handed over at session start
    model = BusyModel(sandbox, "work through the steps", "BUSY-MAIL")
    with FakeModel(model, bind=netns.listen, log_path=str(tmp_path / "model-requests.jsonl")) as fm:
        result = h.run_claude_p(harness, "work through the steps", base_url=fm.url, home=home, cwd=project,
                                plugin_dirs=[ch.PLUGIN], env=ch.hook_env(sandbox.url, state), timeout=120,
                                extra_args=["--allowedTools", "Bash", *_settings(tmp_path, inbound)])
        convo = [r for r in fm.model_requests if ch.is_conversation(fm, r)]
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stdout[-1500:]}\n{result.stderr[-3000:]}"
    assert model.sent_at is not None and model.done_at is not None, model.asked
    assert model.done_at - convo[0]["time"] >= 15, "the agent was not kept busy for 15 s"
    return model, convo, fm, result


def _first_with(fm: FakeModel, convo: list[dict], needle: str) -> dict:
    found = next((r for r in convo if needle in fm.text_of(r)), None)
    assert found is not None, f"{needle} never reached the model"
    return found


def test_busy_claude_p_gets_new_mail_between_tool_calls_once(
    netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    harness = h.require_harness("claude2")
    model, convo, fm, _ = _run_busy(harness, netns, sandbox, state, e2e_home, tmp_path)
    request = _first_with(fm, convo, "BUSY-MAIL")
    assert _mid_turn(request) and request["time"] < model.done_at, "the mail waited for the turn's end"
    assert request["time"] - model.sent_at <= budget(PUSH_BUDGET), request["time"] - model.sent_at
    text = fm.text_of(request)
    assert "kijito-ref:" in text and "data written by other agents" in text  # framed as data, with its marker
    # Once: the whole conversation, as its last request carries it (the Stop hook did not hand it again).
    assert ch.handovers(fm, convo[-1], ["BUSY-MAIL", "ESTABLISH"]) == {"BUSY-MAIL": 1, "ESTABLISH": 1}
    # Confirmed from the transcript: acknowledged, nothing left pending, no pusher left running.
    cursor = _cursor(state)
    assert not cursor.get("pending") and cursor["cursor"] >= max(m["id"] for m in sandbox.store.messages()), cursor
    assert ch.wait_until(lambda: ch.waker_pids(state) == [] and not _pushers(state), 5)


def test_turn_end_policy_holds_the_mail_for_the_stop_hook(
    netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    harness = h.require_harness("claude2")
    model, convo, fm, _ = _run_busy(harness, netns, sandbox, state, e2e_home, tmp_path, interrupt="turn-end")
    request = _first_with(fm, convo, "BUSY-MAIL")
    assert request["time"] >= model.done_at and not _mid_turn(request), "turn-end mail interrupted the turn"
    assert "Stop hook" in fm.text_of(request)
    assert ch.handovers(fm, convo[-1], ["BUSY-MAIL"]) == {"BUSY-MAIL": 1}
    assert not _cursor(state).get("pending")


@pytest.mark.parametrize("name,inbound", [("claude2", "refuse"), ("claude", None)],
                         ids=["2.1.332-refuse", "2.1.197-no-socket"])
def test_without_a_usable_socket_the_stop_hook_delivers_once(
    netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path, name: str, inbound: str | None
) -> None:
    harness = h.require_harness(name)
    model, convo, fm, _ = _run_busy(harness, netns, sandbox, state, e2e_home, tmp_path, inbound=inbound)
    request = _first_with(fm, convo, "BUSY-MAIL")
    assert request["time"] >= model.done_at and "Stop hook" in fm.text_of(request)
    assert ch.handovers(fm, convo[-1], ["BUSY-MAIL"]) == {"BUSY-MAIL": 1}
    assert not _cursor(state).get("pending")


def _pushers(state: Path) -> list[int]:
    """Live `kijito-pull hook claude-pusher` processes of this state dir."""
    return ch.hook_pids(state, "claude-pusher")


# -- interactive (the TUI under tmux) -----------------------------------------------------------------------


def _push_mode(state: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (state / "sessions").glob("*.push")]


def _session_started(state: Path) -> bool:
    """The SessionStart hook has finished its pull (it notes the event for its waker sibling)."""
    environ = {"KIJITO_PULL_STATE_DIR": str(state)}
    synced = [lifecycle.read_synced(environ, p.stem) for p in (state / "sessions").glob("*.push")]
    return any(s is not None and s[0].startswith("SessionStart|") for s in synced)


def _start_tui(harness: h.Harness, fm: FakeModel, sandbox, state: Path, home: Path, project: Path,
               extra: list[str]) -> h.Tmux:
    tui = h.start_claude_tui(harness, base_url=fm.url, home=home, cwd=project, plugin_dirs=[ch.PLUGIN],
                             env=ch.hook_env(sandbox.url, state), extra_args=["--allowedTools", "Bash", *extra])
    assert ch.wait_tui_ready(tui), tui.capture()
    assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 15), tui.capture()
    return tui


def test_tui_gets_mail_pushed_when_idle_and_between_tool_calls_when_busy(
    netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    harness = h.require_harness("claude2")
    project = _project(tmp_path)
    model = BusyModel(sandbox, "TUI-TASK run the steps", "TUI-BUSY-MAIL")
    with FakeModel(model, bind=netns.listen, log_path=str(tmp_path / "model-requests.jsonl")) as fm:
        with _start_tui(harness, fm, sandbox, state, e2e_home, project, []) as tui:
            assert ch.wait_until(lambda: _push_mode(state) and _push_mode(state)[0]["pushing"], 10), _push_mode(state)
            # The waker says it pushes before the SessionStart hook beside it has finished its pull: mail
            # sent in between is that hook's (the start context, shown at the first turn), not a push.
            assert ch.wait_until(lambda: _session_started(state), 10), list((state / "sessions").iterdir())
            [waker] = ch.waker_pids(state)

            # Idle: the push itself starts a turn (no doorbell: the same waker process stays).
            start = len(fm.requests)
            sent = time.time()
            sandbox.send(ch.PERSONA, "loom", "TUI-IDLE-MAIL: are you there")
            request = ch.wait_for_conversation(fm, "TUI-IDLE-MAIL", timeout=15, start=start)
            assert request is not None, tui.capture()
            assert request["time"] - sent <= budget(PUSH_BUDGET), request["time"] - sent
            assert ch.waker_pids(state) == [waker]

            # Busy: a turn of 9 tool calls; the mail is sent one second into the second one.
            tui.type("TUI-TASK run the steps")
            assert ch.wait_until(lambda: model.done_at is not None, 60), tui.capture()
            convo = [r for r in fm.model_requests if ch.is_conversation(fm, r)]
            busy = _first_with(fm, convo, "TUI-BUSY-MAIL")
            assert _mid_turn(busy) and busy["time"] < model.done_at, "the mail waited for the turn's end"
            assert busy["time"] - model.sent_at <= budget(PUSH_BUDGET), busy["time"] - model.sent_at
            time.sleep(3)  # let a duplicate (a Stop block, a doorbell turn) show up
            last = [r for r in fm.model_requests if ch.is_conversation(fm, r)][-1]
            assert ch.handovers(fm, last, ["TUI-IDLE-MAIL", "TUI-BUSY-MAIL"]) == {"TUI-IDLE-MAIL": 1,
                                                                                  "TUI-BUSY-MAIL": 1}
            assert ch.waker_pids(state) == [waker]
            assert ch.wait_until(lambda: not _cursor(state).get("pending"), 5), _cursor(state)
            tui.type("/exit")
            assert ch.wait_until(lambda: ch.waker_pids(state) == [], 8), tui.capture()


@pytest.mark.parametrize("name,inbound", [("claude2", "refuse"), ("claude", None)],
                         ids=["2.1.332-refuse", "2.1.197-no-socket"])
def test_tui_without_a_usable_socket_is_woken_by_the_doorbell_once(
    netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path, name: str, inbound: str | None
) -> None:
    harness = h.require_harness(name)
    project = _project(tmp_path)
    with FakeModel("ok", bind=netns.listen, log_path=str(tmp_path / "model-requests.jsonl")) as fm:
        with _start_tui(harness, fm, sandbox, state, e2e_home, project, _settings(tmp_path, inbound)) as tui:
            tui.type("hello from the user")  # Claude Code 2.1.197 wakes an idle TUI only after a first turn
            assert ch.wait_for_conversation(fm, "hello from the user", timeout=20), tui.capture()
            assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)
            time.sleep(1.0)
            start = len(fm.requests)
            sandbox.send(ch.PERSONA, "loom", "DOORBELL-MAIL: are you there")
            # A refused push is noticed after 5 s (nothing in the transcript), then the doorbell rings.
            request = ch.wait_for_conversation(fm, "DOORBELL-MAIL", timeout=20, start=start)
            assert request is not None, tui.capture()
            assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)  # re-armed at the turn's end
            time.sleep(3)
            last = [r for r in fm.model_requests if ch.is_conversation(fm, r)][-1]
            assert ch.handovers(fm, last, ["DOORBELL-MAIL"]) == {"DOORBELL-MAIL": 1}
            assert ch.wait_until(lambda: not _cursor(state).get("pending"), 5), _cursor(state)
