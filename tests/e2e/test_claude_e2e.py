"""The kijito-pull Claude Code plugin inside the real Claude Code, offline.

Claude Code (the version `scripts/install-harnesses` pins) runs against the fake model on loopback
with this repository loaded as a plugin (`--plugin-dir`, and once through the local marketplace);
the Kijito sandbox serves the mail. The proof is always the mail text inside the model requests the
fake model logged. Every process is killed by the e2e conftest, and the waker tests check that no
waker outlives its session by itself before that sweep runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel
from tests.waiting import budget

pytestmark = pytest.mark.e2e

WAKE_BUDGET = 2.0  # seconds from the mail being sent to a model request holding it


def _diag(result) -> str:
    return f"rc={result.returncode}\nstdout={result.stdout[-1500:]}\nstderr={result.stderr[-3000:]}"


# -- claude -p (headless) ------------------------------------------------------------------------------


def test_claude_p_gets_waiting_mail_first_and_new_mail_at_stop_once(
    claude_harness: h.Harness, netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    project = ch.make_project(tmp_path)
    sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
    late: list[int] = []

    def reply(request: dict) -> str:
        if not late and "summarize the task" in FakeModel.text_of(request):
            late.append(sandbox.send(ch.PERSONA, "loom", "MAIL-LATE: arrived while the agent worked"))
        return "ok"

    with FakeModel(reply, bind=netns.listen) as fm:
        result = h.run_claude_p(claude_harness, "summarize the task", base_url=fm.url, home=e2e_home, cwd=project,
                                plugin_dirs=[ch.PLUGIN], env=ch.hook_env(sandbox.url, state), timeout=90)
        assert result.returncode == 0, _diag(result)
        convo = ch.conversation_requests(fm, "summarize the task")
    assert convo, _diag(result)
    first = ch.counts(fm, convo[0], ["MAIL-WAITING", "MAIL-LATE"])
    assert first == {"MAIL-WAITING": 1, "MAIL-LATE": 0}, first
    later = [ch.counts(fm, r, ["MAIL-WAITING", "MAIL-LATE"]) for r in convo[1:]]
    assert any(c["MAIL-LATE"] == 1 for c in later), (later, _diag(result))
    # The Stop hook's feedback (2.1.197), or pushed through the session inbox socket (2.1.332: the run's
    # pusher is faster than the turn's end), not a prompt; and the run ended after it (no loop).
    late_request = next(r for r in convo if "MAIL-LATE" in fm.text_of(r))
    via = "Stop hook" if claude_harness.name == "claude" else "Another Claude session sent a message"
    assert via in fm.text_of(late_request) or "Stop hook" in fm.text_of(late_request)
    assert len(convo) <= 3, len(convo)
    # Nothing handed over twice: the whole conversation, as the last request carries it.
    assert ch.handovers(fm, convo[-1], ["MAIL-WAITING", "MAIL-LATE"]) == {"MAIL-WAITING": 1, "MAIL-LATE": 1}
    assert ch.waker_pids(state) == []


HANDED = re.compile(r"Message \d+ of \d+: id (\d+), from loom, sent [^(]*\(kijito-ref:\w+\)\.\n> (BACKLOG-\d+)")


def _shown_ids(fm: FakeModel) -> dict[int, str]:
    """Every message the model was given in any request (its id, and the opening words it saw)."""
    shown: dict[int, str] = {}
    for request in fm.model_requests:
        for ident, opening in HANDED.findall(fm.text_of(request)):
            shown[int(ident)] = opening
    return shown


def _cursor(state: Path) -> dict:
    [path] = (state / "cursors").glob("*.json")
    return json.loads(path.read_text())


@pytest.mark.parametrize("first_contact", [False, True], ids=["120-waiting-behind-a-cursor",
                                                              "40-unread-at-first-contact"])
def test_claude_p_acknowledges_only_what_the_model_was_shown(
    claude_harness: h.Harness, netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path,
    first_contact: bool,
) -> None:
    """A backlog larger than one hand-over: every message the cursor moves past is in some model request
    (its id and opening words); what did not fit is still unseen after the run and reaches the next one.
    At first contact, unread mail behind the sandbox's 20-row window is reached by walking back."""
    project = ch.make_project(tmp_path)
    env = ch.hook_env(sandbox.url, state, KIJITO_PULL_MAX_STOP_BLOCKS="1")
    if not first_contact:
        before = sandbox.send(ch.PERSONA, "loom", "BEFORE: establishes the cursor")
        with FakeModel(lambda r: "ok", bind=netns.listen) as fm:
            result = h.run_claude_p(claude_harness, "first run", base_url=fm.url, home=e2e_home, cwd=project,
                                    plugin_dirs=[ch.PLUGIN], env=env, timeout=90)
            assert result.returncode == 0, _diag(result)
        assert _cursor(state)["cursor"] >= before and not _cursor(state).get("pending")
    total = 40 if first_contact else 120
    sent = [sandbox.send(ch.PERSONA, "loom", f"BACKLOG-{i:03d} " + "detail " * 30) for i in range(total)]

    runs: list[dict[int, str]] = []
    for run in range(4):
        with FakeModel(lambda r: "ok", bind=netns.listen) as fm:
            result = h.run_claude_p(claude_harness, f"work run {run}", base_url=fm.url, home=e2e_home,
                                    cwd=project, plugin_dirs=[ch.PLUGIN], env=env, timeout=120)
            assert result.returncode == 0, _diag(result)
            runs.append(_shown_ids(fm))
        cursor = _cursor(state)["cursor"]
        shown_so_far = set().union(*runs)
        # The cursor moved past nothing the model was not shown.
        assert {i for i in sent if i <= cursor} <= shown_so_far, (cursor, sorted(set(sent) - shown_so_far)[:5])
        if shown_so_far >= set(sent):
            break
    assert set().union(*runs) == set(sent)
    if not first_contact and claude_harness.name == "claude":
        # One run (a start and one Stop block) did not fit 120: the rest waited. (2.1.332's pusher hands
        # the rest over during the same run through the inbox socket.)
        assert len(runs) >= 2
    for shown in runs:
        for ident, opening in shown.items():
            assert opening == f"BACKLOG-{sent.index(ident):03d}"
    first_run = runs[0]
    assert min(first_run) == sent[0] and sorted(first_run) == sent[:len(first_run)]  # the oldest first
    final = _cursor(state)
    # Acknowledged: at or below the cursor, or confirmed above it (a pusher's confirmation is settled
    # outside a pull, so the cursor itself moves past it at the next pull).
    acked = {i for i in sent if i <= final["cursor"]} | set(final.get("delivered_above", []))
    assert acked >= set(sent), final
    assert not [e for e in final.get("pending", {}).values() if e.get("holder")], final
    repeats = sum(len(set(a) & set(b)) for i, a in enumerate(runs) for b in runs[i + 1:])
    assert repeats == 0, "a message confirmed in one run was handed over again in the next"


def test_not_opted_in_nothing_reaches_the_model_and_the_sandbox_sees_no_request(
    claude_harness: h.Harness, fake_model: FakeModel, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    project = ch.make_project(tmp_path, opted_in=False)
    sandbox.send(ch.PERSONA, "loom", "MAIL-NOT-FOR-YOU")
    sandbox.clear_requests()
    result = h.run_claude_p(claude_harness, "hello there", base_url=fake_model.url, home=e2e_home, cwd=project,
                            plugin_dirs=[ch.PLUGIN], env=ch.hook_env(sandbox.url, state), timeout=60)
    assert result.returncode == 0, _diag(result)
    convo = ch.conversation_requests(fake_model, "hello there")
    assert convo
    for request in fake_model.model_requests:
        text = fake_model.text_of(request)
        assert "MAIL-NOT-FOR-YOU" not in text and "Kijito" not in text and "kijito-pull" not in text
    assert sandbox.requests == []
    assert not state.exists()


def test_server_down_mid_session_hooks_give_up_within_budget_and_the_run_completes(
    claude_harness: h.Harness, netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    project = ch.make_project(tmp_path)
    sandbox.send(ch.PERSONA, "loom", "MAIL-BEFORE-OUTAGE")
    down: list[float] = []

    def reply(request: dict) -> str:
        if not down and "do the work" in FakeModel.text_of(request):
            down.append(time.monotonic())
            sandbox.stop()  # the Kijito server goes away while the agent works
        return "ok"

    with FakeModel(reply, bind=netns.listen) as fm:
        started = time.monotonic()
        result = h.run_claude_p(claude_harness, "do the work", base_url=fm.url, home=e2e_home, cwd=project,
                                plugin_dirs=[ch.PLUGIN], env=ch.hook_env(sandbox.url, state), timeout=90)
        took = time.monotonic() - started
        convo = ch.conversation_requests(fm, "do the work")
    assert result.returncode == 0, _diag(result)
    assert down, "the fake model was never asked"
    assert "MAIL-BEFORE-OUTAGE" in fm.text_of(convo[0])
    assert len(convo) == 1  # the Stop hook let the agent stop: no block, no retry loop
    assert took < 30, took


def test_hanging_server_costs_each_hook_at_most_its_budget(
    claude_harness: h.Harness, fake_model: FakeModel, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    project = ch.make_project(tmp_path)
    sandbox.send(ch.PERSONA, "loom", "MAIL-BEHIND-A-HANG")
    sandbox.add_fault({"kind": "hang", "seconds": 60})
    started = time.monotonic()
    result = h.run_claude_p(claude_harness, "work on it", base_url=fake_model.url, home=e2e_home, cwd=project,
                            plugin_dirs=[ch.PLUGIN], env=ch.hook_env(sandbox.url, state, KIJITO_PULL_HOOK_BUDGET="2"),
                            timeout=90)
    took = time.monotonic() - started
    assert result.returncode == 0, _diag(result)
    assert ch.conversation_requests(fake_model, "work on it")
    assert not any("MAIL-BEHIND-A-HANG" in fake_model.text_of(r) for r in fake_model.model_requests)
    # Two synchronous hooks (SessionStart, Stop) at 2 s each, plus Claude Code itself.
    assert took < 20, took


# -- interactive: the waker ----------------------------------------------------------------------------------


def _send_and_wait(fm: FakeModel, sandbox, marker: str) -> float:
    """Send one message; seconds until a model request holds it (or a failure)."""
    start_index = len(fm.requests)
    started = time.monotonic()
    sandbox.send(ch.PERSONA, "loom", f"{marker}: please look")
    request = ch.wait_for_conversation(fm, marker, timeout=15, start=start_index)
    assert request is not None, f"{marker} never reached the model"
    return time.monotonic() - started


def test_idle_stream_json_session_is_woken_once_per_mail_with_one_waker_across_clear(
    claude_harness: h.Harness, netns: h.NetNS, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    """stream-json reports CLAUDE_CODE_ENTRYPOINT=sdk-cli like `claude -p`, so the interactive mode is
    forced with KIJITO_PULL_MODE=interactive; the TUI test below covers the real detection."""
    project = ch.make_project(tmp_path)
    env = ch.hook_env(sandbox.url, state, KIJITO_PULL_MODE="interactive")
    slow = threading.Event()

    def reply(request: dict) -> str:
        text = FakeModel.text_of(request)
        if slow.is_set() and "BUSY-PROMPT" in text and "BUSY-MAIL" not in text:
            time.sleep(4)  # the agent is busy with its turn
        return "ok"

    fake_model = FakeModel(reply, bind=netns.listen, log_path=str(tmp_path / "model-requests.jsonl")).start()
    try:
        proc = h.start_claude_stream_json(claude_harness, base_url=fake_model.url, home=e2e_home, cwd=project,
                                          plugin_dirs=[ch.PLUGIN], env=env)
        with proc:
            # No prompt is ever needed: SessionStart arms the one waker of the idle session.
            assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 15), proc.diagnostics()
            # Mail that arrives while SessionStart is still collecting its context goes into that context
            # (the model reads it with the first turn); the wake is for mail that comes after.
            # SessionStart's first pull leaves the cursor file behind (first contact: baselined).
            assert ch.wait_until(lambda: any((state / "cursors").glob("*.json")), 15), proc.diagnostics()
            assert fake_model.model_requests == []

            latency = _send_and_wait(fake_model, sandbox, "IDLE-MAIL-1")
            assert latency < budget(WAKE_BUDGET), latency
            # Re-armed at the end of the woken turn, and still only one.
            assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)
            time.sleep(1.5)
            assert len(ch.waker_pids(state)) == 1

            # Two messages at once: each handed over exactly once.
            start_index = len(fake_model.requests)
            sandbox.send(ch.PERSONA, "loom", "BURST-A")
            sandbox.send(ch.PERSONA, "loom", "BURST-B")
            assert fake_model.wait_for(lambda r: "BURST-B" in fake_model.text_of(r) and "BURST-A" in
                                       fake_model.text_of(r), timeout=15, start=start_index), proc.diagnostics()
            time.sleep(3)  # let any duplicate show up
            last = fake_model.model_requests[-1]
            assert ch.handovers(fake_model, last, ["IDLE-MAIL-1", "BURST-A", "BURST-B"]) == {
                "IDLE-MAIL-1": 1, "BURST-A": 1, "BURST-B": 1}
            assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)

            # Mail that arrives while the agent is busy: handed over once (by the Stop hook), even though
            # the doorbell rang mid-turn and starts one more (empty) turn after it.
            slow.set()
            start_index = len(fake_model.requests)
            proc.send(h.claude_user_message("BUSY-PROMPT: a long task"))
            assert fake_model.wait_for(lambda r: "BUSY-PROMPT" in fake_model.text_of(r), 15, start=start_index)
            sandbox.send(ch.PERSONA, "loom", "BUSY-MAIL")
            assert ch.wait_for_conversation(fake_model, "BUSY-MAIL", timeout=20, start=start_index)
            slow.clear()
            time.sleep(4)
            assert ch.handovers(fake_model, fake_model.model_requests[-1], ["BUSY-MAIL"]) == {"BUSY-MAIL": 1}
            assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)

            # Compaction starts the session again (SessionStart, source compact): still one waker.
            proc.send(h.claude_user_message("/compact"))
            assert proc.wait_for_event(lambda e: e.get("subtype") == "compact_boundary", timeout=30), proc.diagnostics()
            time.sleep(1.5)
            assert len(ch.waker_pids(state)) == 1

            # /clear: the session id changes; the old waker goes, exactly one new one is armed.
            before = ch.waker_pids(state)
            proc.send(h.claude_user_message("/clear"))
            assert ch.wait_until(lambda: (p := ch.waker_pids(state)) and p != before, 15), proc.diagnostics()
            time.sleep(1.5)
            assert len(ch.waker_pids(state)) == 1
            leases = [json.loads(p.read_text()) for p in (state / "sessions").glob("*.json")]
            assert len(leases) == 1 and leases[0]["pid"] == ch.waker_pids(state)[0]
            assert _send_and_wait(fake_model, sandbox, "AFTER-CLEAR") < budget(WAKE_BUDGET)

            # No orphan: Claude Code dies without a word (no SessionEnd); its waker ends by itself.
            assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)
            os.kill(proc.proc.pid, signal.SIGKILL)
            assert ch.wait_until(lambda: ch.waker_pids(state) == [], 5), "a waker outlived its Claude Code"
    finally:
        fake_model.stop()


def test_tui_session_is_woken_when_idle_and_leaves_no_waker_after_exit(
    claude_harness: h.Harness, fake_model: FakeModel, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    """The real interactive mode (CLAUDE_CODE_ENTRYPOINT=cli), no override."""
    project = ch.make_project(tmp_path)
    sandbox.send(ch.PERSONA, "loom", "TUI-WAITING")
    tui = h.start_claude_tui(claude_harness, base_url=fake_model.url, home=e2e_home, cwd=project,
                             plugin_dirs=[ch.PLUGIN], env=ch.hook_env(sandbox.url, state))
    with tui:
        assert ch.wait_tui_ready(tui), tui.capture()
        assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 15), tui.capture()
        tui.type("hello from the user")
        first = ch.wait_for_conversation(fake_model, "hello from the user", timeout=20)
        assert first is not None and "TUI-WAITING" in fake_model.text_of(first)  # SessionStart context
        assert "this session by itself" in fake_model.text_of(first)  # woken (2.1.197) or pushed to (2.1.332)
        assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)

        time.sleep(1.0)  # idle
        latency = _send_and_wait(fake_model, sandbox, "TUI-IDLE-MAIL")
        assert latency < budget(WAKE_BUDGET), latency
        assert ch.wait_until(lambda: len(ch.waker_pids(state)) == 1, 10)

        tui.type("/exit")
        # SessionEnd ends the waker even though Claude Code itself leaves async hooks running.
        assert ch.wait_until(lambda: ch.waker_pids(state) == [], 8), tui.capture()


# -- installed through the local marketplace -------------------------------------------------------------------


def test_installed_from_the_local_marketplace(
    claude_harness: h.Harness, fake_model: FakeModel, sandbox, state: Path, e2e_home: Path, tmp_path: Path
) -> None:
    checkout = ch.repo_checkout(tmp_path / "kijito-pull")
    added = ch.claude_cli(claude_harness, e2e_home, tmp_path, "plugin", "marketplace", "add", str(checkout))
    assert added.returncode == 0, (added.stdout, added.stderr)
    installed = ch.claude_cli(claude_harness, e2e_home, tmp_path, "plugin", "install", "kijito-pull@kijito-pull")
    assert installed.returncode == 0, (installed.stdout, installed.stderr)
    assert "kijito-pull@kijito-pull" in ch.claude_cli(claude_harness, e2e_home, tmp_path, "plugin", "list").stdout

    project = ch.make_project(tmp_path)
    sandbox.send(ch.PERSONA, "loom", "MAIL-VIA-MARKETPLACE")
    result = h.run_claude_p(claude_harness, "check in", base_url=fake_model.url, home=e2e_home, cwd=project,
                            env=ch.hook_env(sandbox.url, state), timeout=60)  # no --plugin-dir
    assert result.returncode == 0, _diag(result)
    first = ch.conversation_requests(fake_model, "check in")[0]
    assert "MAIL-VIA-MARKETPLACE" in fake_model.text_of(first)
