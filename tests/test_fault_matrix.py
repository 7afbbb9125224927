"""The fault matrix (issue 6, item 3): every fault the sandbox can inject against every entry point.

Entry points: `--once`, `watch`, `hook claude-session-start`, `hook claude-stop`, the pi child
(`watch --ack-stdin`, acknowledged by a thread), `hook codex-session-start` and `hook codex-stop`.
Each cell gets its own sandbox, state dir and opted-in project, and runs the same script:

  1. an established cursor over 22 old messages (read, so the window is full and truncated);
  2. the fault is switched on and 25 messages (M1) are sent: more than the window of 20, so the
     older ones can only be found by walking backward, which a client that believed a lie would skip;
  3. the entry point meets the fault (a short-lived one runs once; watch and the pi child keep running);
  4. the fault is cleared and 2 more messages (M2) are sent;
  5. the entry point recovers (runs again; the long-running ones deliver by themselves).

What each cell requires:

- nothing lost, nothing twice: the union of what was handed over in steps 3 and 5, through the one
  consumer group `agent`, is M1 + M2, each exactly once (no process is killed here, so no fault may
  cause a repeat);
- `--once`: exit 1 with exactly one stderr line saying why, under the fault; exit 0 once it clears;
- watch and the pi child: keep running; an `alert` once `--alert-after` (2) consecutive failures are
  reached (or for a pinned cursor), then `recovered`; SIGTERM (watch) or end of stdin (pi child) ends
  them with exit 0;
- hooks: exit 0, stdout empty or one JSON object the harness reads (Codex: never empty, `{}` for
  nothing), stderr only `kijito-pull: ...` lines (at least one under a known fault); from its first
  request to its exit within the hook budget (8 s, `claude.DEFAULT_BUDGET`), and the whole call, start-up
  included, within the harness's timeout (hooks/hooks.json: 15 s); a hang is also run with a 1.5 s
  budget, which must be held to.

A lie the client can detect (a page that contradicts itself) pins the cursor: what was visible is handed
over at once, the rest after the fault clears, and `--once` exits 1 saying the cursor stays pinned. A lie it
cannot detect (an honest-looking empty inbox) only delays mail: nothing is acknowledged, nothing is lost.

All cells run concurrently in a thread pool (they share nothing but the machine), once per session, for
the cells the session selected; each parametrized test then checks its own cell.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kijito_pull.harnesses.claude import hooks as claude
from kijito_pull.sandbox import Sandbox
from tests.clirunner import Cli
from tests.entrypoints import (
    ENTRIES,
    HOOK_EVENTS,
    HOOK_NAMES,
    HOOKS,
    ONCE,
    PI_CHILD,
    REPO,
    WATCH,
    FileEvents,
    PiChild,
    Ran,
    System,
    hook_ids,
    hook_text,
    nothing_of,
    stderr_problems,
)

TOKEN = "matrix-token-7f3a"
PERSONA = "matrixbot"
TIMEOUT = 0.5  # --timeout of --once, watch and the pi child
HANG = 1.0  # past TIMEOUT
HOOK_HANG = claude.HOOK_TIMEOUT + 0.5  # past the hooks' own per-request timeout
SHORT_BUDGET = 1.5  # KIJITO_PULL_HOOK_BUDGET for the second hang run of a hook
# A hook's budget counts from just before its first request; from that request to the process's exit
# may take the budget plus this (the exit itself, on a loaded machine). Interpreter start-up comes
# before and is not the hook's to control, so the whole call is held to the harness's own timeout.
EXIT_SLACK = 1.0
CLAUDE_HOOKS = REPO / "plugins" / "claude" / "hooks" / "hooks.json"
HARNESS_TIMEOUT = min(h["timeout"] for group in json.loads(CLAUDE_HOOKS.read_text())[
    "hooks"].values() for matcher in group for h in matcher["hooks"]
    if h["command"].endswith(("claude-session-start", "claude-stop")))
ALERT_AFTER = 2
WATCH_ARGS = ("--alert-after", str(ALERT_AFTER), "--timeout", str(TIMEOUT), "--wait", "1", "--poll-seconds", "1")
WINDOW = 20
OLD = 22  # messages already handed over before the cell starts (over the window)
M1 = 25  # sent under the fault: more than the window
M2 = 2  # sent after it cleared
WORKERS = 8

# Kinds of behaviour
ERROR = "error"  # the request fails: nothing handed over until the fault clears
PIN = "pin"  # a self-contradicting page: the visible mail is handed over, the cursor pinned
SILENT = "silent"  # an undetectable lie that hides mail: nothing handed over, nothing acknowledged
DISTRUST = "distrust"  # an untrustworthy answer (issue 23): nothing from it handed over, the cursor pinned

FAULTS: dict[str, tuple[str, dict]] = {
    "status_500": (ERROR, {"kind": "status", "status": 500}),
    "status_503_retry_after": (ERROR, {"kind": "status", "status": 503, "headers": {"Retry-After": "1"}}),
    "status_429_retry_after": (ERROR, {"kind": "status", "status": 429, "headers": {"Retry-After": "1"}}),
    "status_401": (ERROR, {"kind": "status", "status": 401}),
    "status_404": (ERROR, {"kind": "status", "status": 404}),
    "redirect_302": (ERROR, {"kind": "status", "status": 302,
                             "headers": {"Location": "http://127.0.0.1:9/api/inbox"}}),
    "hang": (ERROR, {"kind": "hang"}),  # seconds per entry point: past its timeout
    "reset": (ERROR, {"kind": "reset"}),
    "close": (ERROR, {"kind": "close"}),
    "body_truncated_json": (ERROR, {"kind": "body", "body": '{"result": [{"id": 1, "from": "x", "con'}),
    "body_not_an_object": (ERROR, {"kind": "body", "body": "[]"}),
    "huge": (ERROR, {"kind": "huge"}),  # endless: cut off at the client's 32 MiB limit
    "rows_id_string": (ERROR, {"kind": "mutate", "rows": "id_string"}),
    "rows_id_bool": (ERROR, {"kind": "mutate", "rows": "id_bool"}),
    "rows_dup_first": (ERROR, {"kind": "mutate", "rows": "dup_first"}),
    "rows_row_not_object": (ERROR, {"kind": "mutate", "rows": "row_not_object"}),
    "rows_result_not_list": (ERROR, {"kind": "mutate", "rows": "result_not_list"}),
    "lie_no_continuation": (PIN, {"kind": "mutate", "delete": ["next_before_id"]}),
    "lie_withheld_without_continuation": (PIN, {"kind": "mutate", "set": {"truncated": True,
                                                                          "next_before_id": None}}),
    "lie_wrong_continuation": (PIN, {"kind": "mutate", "set": {"next_before_id": 1}}),
    "lie_drop_oldest": (PIN, {"kind": "mutate", "rows": "drop_oldest"}),
    "distrust_id_overflow": (DISTRUST, {"kind": "mutate", "rows": "id_overflow"}),
    "distrust_other_persona": (DISTRUST, {"kind": "mutate", "set": {"persona": "mallory"},
                                          "row_set": {"persona": "mallory"}}),
    "lie_empty_inbox": (SILENT, {"kind": "mutate", "set": {
        "result": [], "truncated": False, "next_before_id": None, "size_dropped": 0, "size_truncated": False,
        "unread_not_shown": 0}}),
}


@dataclass
class Cell:
    entry: str
    fault: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    hook_seconds: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.problems.append(what)
        return ok


def _rule(entry: str, fault: str) -> dict:
    rule = dict(FAULTS[fault][1])
    if rule["kind"] == "hang":
        rule["seconds"] = HOOK_HANG if entry in HOOK_NAMES else HANG
    return rule


# -- one cell ----------------------------------------------------------------------------------------


def run_cell(entry: str, fault: str, root: Path) -> Cell:
    cell = Cell(entry, fault)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"{entry}-{fault}-", dir=root))
    try:
        with Sandbox(token=TOKEN, window_limit=WINDOW).start() as sb:
            sb.add_persona(PERSONA, memory_count=1)
            system = System(sb.url, TOKEN, work, PERSONA)
            _establish(sb, system)
            if entry in HOOKS:
                _hook_cell(cell, sb, system)
            elif entry == ONCE:
                _once_cell(cell, sb, system)
            else:
                _watch_cell(cell, sb, system)
    except Exception:  # noqa: BLE001 - reported as the cell's problem, with the traceback
        cell.problems.append(traceback.format_exc())
    cell.seconds = time.monotonic() - started
    if cell.problems:
        cell.notes.append(f"outputs kept in {work}")
    return cell


def _establish(sb: Sandbox, system: System) -> None:
    """An established cursor over OLD messages, all read on the server (so no alarm about unread mail
    outside the window): every cell runs in the normal mode, with a full, truncated newest window."""
    for i in range(OLD):
        sb.send(to=PERSONA, sender="river", content=f"old {i}")
    cli = Cli(sb.url, TOKEN, system.state_dir)
    cli.environ["KIJITO_PULL_CONFIG"] = system.env["KIJITO_PULL_CONFIG"]
    first = cli("--once", "--json", "--persona", PERSONA, "--max-replay", "0")
    assert first.code == 0, first.stderr
    sb.mark_read(PERSONA)


def _send(sb: Sandbox, tag: str, n: int) -> list[int]:
    return [sb.send(to=PERSONA, sender="loom", content=f"{tag} {i}") for i in range(n)]


def _check_union(cell: Cell, deliveries: list[int], expected: list[int]) -> None:
    dups = sorted({i for i in deliveries if deliveries.count(i) > 1})
    cell.check(not dups, f"delivered more than once: {dups} (all deliveries {deliveries})")
    missing = sorted(set(expected) - set(deliveries))
    cell.check(not missing, f"lost: {missing} (delivered {deliveries}, sent {expected})")
    extra = sorted(set(deliveries) - set(expected))
    cell.check(not extra, f"delivered ids never sent in this cell: {extra}")


def _once_cell(cell: Cell, sb: Sandbox, system: System) -> None:
    behaviour = FAULTS[cell.fault][0]
    argv = system.once_argv("--timeout", str(TIMEOUT))
    sb.add_fault(_rule(cell.entry, cell.fault))
    m1 = _send(sb, "m1", M1)
    bad = system.run(argv)
    sb.clear_faults()
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    kinds = [e["event"] for e in bad.ndjson()]
    if behaviour == SILENT:
        cell.check(bad.code == 0 and not lines and not bad.new_ids(),
                   f"under an undetectable lie: exit {bad.code}, stderr {bad.stderr!r}, ids {bad.new_ids()}")
    else:
        cell.check(bad.code == 1, f"under the fault: exit {bad.code}, expected 1; stderr {bad.stderr!r}")
        cell.check(len(lines) == 1, f"under the fault: expected one stderr line, got {bad.stderr!r}")
        if behaviour in (PIN, DISTRUST):
            cell.check("pinned" in bad.stderr, f"a pinned cursor is not named: {bad.stderr!r}")
            cell.check("alert" in kinds, f"no alert event for the pin: {kinds}")
            if behaviour == DISTRUST:
                cell.check(not bad.new_ids(), f"mail from an untrustworthy answer handed over: {bad.new_ids()}")
        else:
            cell.check(not bad.new_ids(), f"mail handed over although the inbox could not be read: {bad.new_ids()}")
            cell.check("nothing was acknowledged" in bad.stderr, f"unclear reason: {bad.stderr!r}")
    cell.problems += stderr_problems(bad.stderr)
    m2 = _send(sb, "m2", M2)
    good = system.run(argv)
    cell.check(good.code == 0, f"after the fault cleared: exit {good.code}; stderr {good.stderr!r}")
    cell.check(not good.stderr.strip(), f"after the fault cleared, stderr: {good.stderr!r}")
    if behaviour in (PIN, DISTRUST):
        cell.check("recovered" in [e["event"] for e in good.ndjson()], "no recovered event once the pin was released")
    if behaviour != PIN:
        for run in (bad, good):
            ids = run.new_ids()
            cell.check(ids == sorted(ids), f"out of order: {ids}")
    _check_union(cell, bad.new_ids() + good.new_ids(), m1 + m2)


def _hook_cell(cell: Cell, sb: Sandbox, system: System) -> None:
    behaviour = FAULTS[cell.fault][0]
    name = HOOK_NAMES[cell.entry]
    sb.add_fault(_rule(cell.entry, cell.fault))
    m1 = _send(sb, "m1", M1)
    bad_runs = [(system.run_hook(cell.entry), claude.DEFAULT_BUDGET)]
    if cell.fault == "hang":  # and once more with a budget shorter than the hooks' own timeouts
        bad_runs.append((system.run_hook(cell.entry, env={claude.BUDGET_ENV: str(SHORT_BUDGET)}), SHORT_BUDGET))
    sb.clear_faults()
    delivered: list[int] = []
    for bad, budget in bad_runs:
        cell.hook_seconds.append(bad.seconds)
        cell.check(bad.code == 0, f"{name} under the fault: exit {bad.code}; stderr {bad.stderr!r}")
        _check_hook_time(cell, sb, bad, budget, "under the fault")
        cell.problems += stderr_problems(bad.stderr)
        cell.check(all(line.startswith(f"kijito-pull: {name}: ") for line in bad.stderr.splitlines()),
                   f"stderr lines not naming the hook: {bad.stderr!r}")
        if nothing_of(cell.entry):  # its harness rejects empty output (Codex: `{}` for nothing)
            cell.check(bad.stdout.endswith("\n") and bad.stdout.strip() != "",
                       f"{name} left stdout empty (its harness needs at least {nothing_of(cell.entry)!r}): "
                       f"{bad.stdout!r}")
        try:
            text = hook_text(bad.stdout)
            ids = hook_ids(bad.stdout)
        except (AssertionError, ValueError) as exc:
            cell.problems.append(f"{name} stdout is not what Claude Code reads: {exc}")
            continue
        delivered += ids
        if behaviour == SILENT:
            cell.check(text is None and not bad.stderr, f"under an undetectable lie: stdout {bad.stdout!r}, "
                                                        f"stderr {bad.stderr!r}")
            continue
        cell.check(bad.stderr.strip() != "", f"{name} under the fault said nothing on stderr")
        if behaviour == PIN:
            cell.check(ids and set(ids) <= set(m1), f"a pinned pull handed over {ids}, expected visible mail of {m1}")
            cell.check("pinned" in bad.stderr, f"the pin is not named: {bad.stderr!r}")
            continue
        if behaviour == DISTRUST:
            cell.check(not ids, f"mail from an untrustworthy answer handed over: {ids}")
            cell.check("pinned" in bad.stderr, f"the pin is not named: {bad.stderr!r}")
            continue
        cell.check(not ids, f"mail handed over although the inbox could not be read: {ids}")
        if budget == SHORT_BUDGET:
            cell.check(f"gave up after {SHORT_BUDGET:g} s" in bad.stderr, f"budget not named: {bad.stderr!r}")
        elif "gave up after" not in bad.stderr:
            cell.check("nothing was acknowledged" in bad.stderr, f"unclear reason: {bad.stderr!r}")
        if HOOK_EVENTS[cell.entry] == "Stop":
            cell.check(text is None, f"{name} blocked although the inbox could not be read: {bad.stdout!r}")
    m2 = _send(sb, "m2", M2)
    good = system.run_hook(cell.entry)
    cell.hook_seconds.append(good.seconds)
    cell.check(good.code == 0, f"{name} after the fault cleared: exit {good.code}; stderr {good.stderr!r}")
    _check_hook_time(cell, sb, good, claude.DEFAULT_BUDGET, "after the fault cleared")
    cell.check(not good.stderr.strip(), f"{name} after the fault cleared, stderr: {good.stderr!r}")
    if nothing_of(cell.entry):
        cell.check(good.stdout.strip() != "", f"{name} left stdout empty after the fault cleared")
    try:
        delivered += hook_ids(good.stdout)
    except (AssertionError, ValueError) as exc:
        cell.problems.append(f"{name} stdout after the fault cleared: {exc}")
    _check_union(cell, delivered, m1 + m2)


def _check_hook_time(cell: Cell, sb: Sandbox, ran: Ran, budget: float, when: str) -> None:
    """Within the budget from its first request to its exit, and within the harness's timeout overall."""
    name = HOOK_NAMES[cell.entry]
    cell.check(ran.seconds < HARNESS_TIMEOUT,
               f"{name} took {ran.seconds:.2f} s {when}: over the harness's {HARNESS_TIMEOUT} s timeout")
    first = min((r["ts"] for r in sb.requests if ran.started_at <= r["ts"] <= ran.ended_at), default=None)
    if first is not None:
        held = ran.ended_at - first
        cell.check(held <= budget + EXIT_SLACK,
                   f"{name} ran {held:.2f} s after its first request {when}; its budget is {budget:g} s")


def _watch_cell(cell: Cell, sb: Sandbox, system: System) -> None:
    behaviour = FAULTS[cell.fault][0]
    if cell.entry == PI_CHILD:
        child = PiChild.start(system, *WATCH_ARGS)
        proc, err_path = child.proc, child.err
        wait_for, ids_of = child.wait_for, child.acked_ids
    else:
        out, err_path = system.next_paths("watch")
        proc = system.spawn(system.watch_argv(*WATCH_ARGS), out, err_path)
        stream = FileEvents(out)
        wait_for, ids_of = stream.wait_for, stream.new_ids
    try:
        if not cell.check(wait_for(lambda e: e["event"] == "armed", 20) is not None, "never armed"):
            return
        sb.add_fault(_rule(cell.entry, cell.fault))
        m1 = _send(sb, "m1", M1)
        if behaviour == ERROR:
            alert = wait_for(lambda e: e["event"] == "alert" and "failing" in e.get("reason", ""), 30)
            if cell.check(alert is not None, f"no alert under the fault (alert-after {ALERT_AFTER})"):
                cell.check(alert.get("consecutive_failures") == ALERT_AFTER,
                           f"alert after {alert.get('consecutive_failures')} failures, not {ALERT_AFTER}")
        elif behaviour in (PIN, DISTRUST):
            cell.check(wait_for(lambda e: e["event"] == "alert" and "pinned" in e.get("reason", ""), 30)
                       is not None, "no alert for the pinned cursor")
            if behaviour == DISTRUST:
                cell.check(not set(ids_of()) & set(m1), f"mail from an untrustworthy answer: {ids_of()}")
        else:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(
                    r["path"] == "/api/inbox" and r.get("fault") == "mutate" for r in sb.requests):
                time.sleep(0.05)
            time.sleep(0.3)
        cell.check(proc.poll() is None, f"exited under the fault ({proc.returncode})")
        sb.clear_faults()
        m2 = _send(sb, "m2", M2)
        expected = set(m1 + m2)
        got_all = wait_for(lambda e: expected <= set(ids_of()), 30) is not None
        cell.check(got_all, f"after the fault cleared, not everything came: {sorted(expected - set(ids_of()))}")
        if behaviour != SILENT:
            cell.check(wait_for(lambda e: e["event"] == "recovered", 15) is not None, "no recovered event")
        time.sleep(0.3)  # a late duplicate would show up here
        ids = ids_of()
        if behaviour != PIN:
            cell.check(ids == sorted(ids), f"out of order: {ids}")
        _check_union(cell, ids, m1 + m2)
    finally:
        if cell.entry == PI_CHILD:
            code = child.close()
        else:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        cell.check(code == 0, f"{cell.entry} exited {code} at the end (expected 0)")
        cell.problems += stderr_problems(err_path.read_text(errors="replace"))


# -- running the matrix ------------------------------------------------------------------------------------

CELLS = [(entry, fault) for fault in FAULTS for entry in ENTRIES]


def _cost(cell: tuple[str, str]) -> float:
    entry, fault = cell
    return (10 if entry in (WATCH, PI_CHILD) else 3) + (8 if fault == "hang" else 0)


@pytest.fixture(scope="module")
def matrix(request, tmp_path_factory):
    """Run every selected cell once, concurrently; a parametrized test then asserts on its own cell."""
    wanted = sorted({(item.callspec.params["entry"], item.callspec.params["fault"])
                     for item in request.session.items
                     if item.module is request.module and hasattr(item, "callspec")
                     and {"entry", "fault"} <= set(item.callspec.params)}, key=_cost, reverse=True)
    root = tmp_path_factory.mktemp("matrix")
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {cell: pool.submit(run_cell, *cell, root) for cell in wanted}
        results = {cell: future.result(timeout=600) for cell, future in futures.items()}
    elapsed = time.monotonic() - started
    hooks = [s for c in results.values() for s in c.hook_seconds]
    print(f"\nfault matrix: {len(results)} cells in {elapsed:.1f} s; slowest cell "
          f"{max((c.seconds for c in results.values()), default=0):.1f} s; slowest hook call "
          f"{max(hooks, default=0):.2f} s (pid {os.getpid()})")
    return results


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("entry", ENTRIES)
def test_fault(matrix, entry, fault):
    cell = matrix[(entry, fault)]
    assert not cell.problems, "\n".join([f"{entry} x {fault}:", *cell.problems, *cell.notes])


def test_the_matrix_covers_every_fault_kind_the_sandbox_has():
    from kijito_pull.sandbox.faults import KINDS, ROW_TRANSFORMS

    kinds = {rule["kind"] for _, rule in FAULTS.values()}
    assert kinds == set(KINDS)
    rows = {rule.get("rows") for _, rule in FAULTS.values() if rule["kind"] == "mutate"}
    assert set(ROW_TRANSFORMS) <= rows
    statuses = {rule.get("status") for _, rule in FAULTS.values() if rule["kind"] == "status"}
    assert {401, 404, 429, 500, 503} <= statuses and any(300 <= s < 400 for s in statuses)
    assert any("Retry-After" in rule.get("headers", {}) for _, rule in FAULTS.values())


# -- a fault on the local side: the acknowledgement cannot be saved ----------------------------------------


@contextlib.contextmanager
def _read_only(directory: Path):
    """No file can be created or renamed in `directory` (root ignores modes: `chattr +i` then)."""
    if os.geteuid() == 0:
        if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(directory)],
                                                       capture_output=True).returncode != 0:
            pytest.skip("needs chattr +i as root (a file system with the immutable flag)")
        undo = ["chattr", "-i", str(directory)]
    else:
        directory.chmod(0o500)
        undo = None
    try:
        yield
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            directory.chmod(0o700)


@pytest.mark.parametrize("entry", HOOKS)
def test_a_hook_whose_ack_cannot_be_saved_still_writes_one_json_object(tmp_path, entry):
    """The mail is written to stdout, then saving the cursor fails: stdout must stay the one JSON object
    the harness reads (not a second, "could not be read" object after it), the hook exits 0 saying why,
    and the mail, not acknowledged, is handed over again once the state dir is writable."""
    with Sandbox(token=TOKEN, window_limit=WINDOW).start() as sb:
        system = System(sb.url, TOKEN, tmp_path, PERSONA)
        assert system.run(system.once_argv()).code == 0
        mail = _send(sb, "m", 3)
        with _read_only(system.state_dir / "cursors"):
            bad = system.run_hook(entry)
        assert bad.code == 0, bad.stderr
        assert hook_ids(bad.stdout) == mail, bad.stdout  # one JSON object (hook_ids checks), with the mail
        assert "cannot save state" in bad.stderr and not stderr_problems(bad.stderr), bad.stderr
        # Its stderr tells what happened: the mail went out, the cursor did not move (not "not checked").
        assert "the mail was handed over, but the cursor could not be saved" in bad.stderr, bad.stderr
        assert "not checked" not in bad.stderr and "could not be read" not in bad.stderr, bad.stderr
        again = system.run_hook(entry)
        assert again.code == 0 and hook_ids(again.stdout) == mail and not again.stderr, again
