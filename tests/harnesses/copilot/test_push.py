"""Copilot CLI's push (`kijito-pull hook copilot-watch`) as a real process against the sandbox, with a stand-in
for kijito-pull's extension (tests/copilotext.py: a Unix socket at the extension's place that answers as
extension.mjs does and, for each prompt, appends the `user.message` Copilot CLI writes to the session's
events.jsonl once the model is given it, measured on 1.0.102). The real extension in the real TUI:
tests/e2e/test_copilot_e2e.py. Pinned down here:

- the mode follows the project's `inbox interrupt:` policy (`all`: immediate; `turn-end`: enqueue);
- the batch is pending with the watcher's own holder until events.jsonl shows it, then confirmed;
- an extension that refuses releases the batch at once (unseen again, for the hooks);
- a socket that is not in a private folder of this user is never used.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.copilotext import FakeExtension
from tests.harnesses.copilot.test_copilot import KIJITO_PULL, PERSONA, SID, TOKEN, Copilot


@pytest.fixture
def runtime():
    folder = Path(tempfile.mkdtemp(prefix="kp"))  # short: a socket path has at most 107 bytes
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _watch(c: Copilot, runtime: Path) -> subprocess.Popen:
    env = {**c.environ, "XDG_RUNTIME_DIR": str(runtime)}
    child = subprocess.Popen([KIJITO_PULL, "hook", "copilot-watch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, cwd=c.project, text=True)
    child.stdin.write(json.dumps({"session_id": SID, "cwd": str(c.project), "hook_event_name": "SessionStart"}))
    child.stdin.close()
    return child


def _wait(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def c(sb, tmp_path) -> Copilot:
    return Copilot(sb, tmp_path)


@contextlib.contextmanager
def _watching(sb, c: Copilot, runtime: Path, policy: str, first: str):
    """A watcher of the session under `policy`, with `first` sent and pushed: (extension, watcher)."""
    (c.project / "AGENTS.md").write_text((c.project / "AGENTS.md").read_text() + f"- inbox interrupt: {policy}\n")
    ext = FakeExtension(runtime, c.record, SID)
    watcher = _watch(c, runtime)
    try:
        sb.send(PERSONA, "loom", first)
        if not _wait(lambda: ext.prompts):
            watcher.kill()
            raise AssertionError(watcher.stderr.read())
        yield ext, watcher
    finally:
        watcher.kill()
        watcher.wait(timeout=10)
        ext.close()


@pytest.mark.parametrize("policy, mode", [("all", "immediate"), ("turn-end", "enqueue")])
def test_new_mail_goes_in_by_the_interrupt_policy_and_is_confirmed_from_the_record(sb, c, runtime, policy, mode):
    with _watching(sb, c, runtime, policy, "MAIL-PUSHED: build is red") as (ext, _watcher):
        [prompt] = ext.prompts
        assert prompt["mode"] == mode and "MAIL-PUSHED: build is red" in prompt["prompt"]
        assert "kijito-ref:" in prompt["prompt"] and TOKEN not in prompt["prompt"]
        assert _wait(lambda: c.pending() == []), c.pending()  # events.jsonl shows it: confirmed
        assert "MAIL-PUSHED" not in c.run("--once", "--peek", "--persona", PERSONA)[1]
        assert len(ext.prompts) == 1


def test_under_the_urgent_policy_only_mail_announced_urgent_goes_in_mid_turn(sb, c, runtime):
    """Kijito's rows carry no urgent flag: the rise of the persona's urgent count, which the watcher's wake
    sees, marks the mail the next look finds; that batch goes `immediate` and says it is urgent."""
    with _watching(sb, c, runtime, "urgent", "MAIL-ORDINARY: lunch at noon") as (ext, watcher):
        assert ext.prompts[0]["mode"] == "enqueue" and "urgent" not in ext.prompts[0]["prompt"].lower()
        assert _wait(lambda: c.pending() == []), c.pending()
        sb.send(PERSONA, "loom", "MAIL-URGENT: prod is down", urgent=True)
        assert _wait(lambda: len(ext.prompts) == 2), watcher.stderr.read() if watcher.poll() is not None else ""
        second = ext.prompts[1]
        assert second["mode"] == "immediate" and "MAIL-URGENT: prod is down" in second["prompt"], second
        assert "A sender marked this message urgent." in second["prompt"], second["prompt"]
        assert _wait(lambda: c.pending() == []), c.pending()


def test_a_refused_push_is_released_at_once(sb, c, runtime):
    ext = FakeExtension(runtime, c.record, SID)
    ext.refuse = True
    watcher = _watch(c, runtime)
    try:
        sb.send(PERSONA, "loom", "MAIL-REFUSED")
        time.sleep(1.5)  # the watcher pulls, pushes, is refused and releases the batch
        released = _wait(lambda: "MAIL-REFUSED" in c.run("--once", "--peek", "--persona", PERSONA)[1]
                         and all(p["holder"] is None for p in c.pending()), timeout=15)
    finally:
        watcher.kill()
        watcher.wait(timeout=10)
        err = watcher.stderr.read()
        ext.close()
    assert released, err
    assert "refused the message: session is shutting down" in err, err
    assert "copilot-watch: session" in err and "codex-watch" not in err, err  # its log names its own harness
    assert ext.prompts == []


def test_a_socket_outside_a_private_folder_is_never_used(c, runtime):
    from kijito_pull.harnesses.copilot.session import Extension

    ext = FakeExtension(runtime, c.record, SID)
    try:
        environ = {**c.environ, "XDG_RUNTIME_DIR": str(runtime)}
        assert Extension.of(environ, SID).listening()
        ext.path.parent.chmod(0o755)
        assert not Extension.of(environ, SID).listening()
        assert "not a private folder" in Extension.of(environ, SID).send("hello", "enqueue")
    finally:
        ext.close()


def test_a_watcher_killed_before_its_push_leaves_nothing_stuck(sb, c, runtime):
    """A watcher killed -9 after recording its batch as pending and before Copilot took it: the session's next
    watcher pushes it again at once, instead of waiting on it until the holder's deadline (two hours)."""
    ext = FakeExtension(runtime, c.record, SID)
    ext.hang.set()
    first = _watch(c, runtime)
    try:
        sb.send(PERSONA, "loom", "MAIL-CUT-OFF")
        assert _wait(lambda: any(p["holder"] == f"copilot-push:{SID}" for p in c.pending())), c.pending()
        time.sleep(0.3)  # its push is on its way, and hangs
    finally:
        first.kill()
        first.wait(timeout=10)
        ext.hang.clear()
    second = _watch(c, runtime)
    try:
        assert _wait(lambda: ext.prompts, timeout=10), second.stderr
        assert "MAIL-CUT-OFF" in ext.prompts[0]["prompt"]
        assert _wait(lambda: c.pending() == []), c.pending()  # recorded, so confirmed
    finally:
        second.kill()
        second.wait(timeout=10)
        ext.close()


def test_session_end_settles_what_only_the_watcher_handed_over(sb, c, runtime):
    """No hook of the session handed mail over, the watcher did, and Copilot never recorded it (a queued turn
    the session ended before): SessionEnd makes it unseen again at once, for the next session."""
    ext = FakeExtension(runtime, c.record, SID)
    ext.records = False
    watcher = _watch(c, runtime)
    try:
        sb.send(PERSONA, "loom", "MAIL-QUEUED")
        assert _wait(lambda: ext.prompts), watcher.stderr
        assert [p["holder"] for p in c.pending()] == [f"copilot-push:{SID}"]
        code, out, err = c.hook("copilot-session-end", "SessionEnd", reason="complete")
        assert (code, out) == (0, ""), err
        assert watcher.wait(timeout=10) == 0  # SessionEnd ends the watcher too
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait(timeout=10)
        ext.close()
    assert all(p["holder"] is None for p in c.pending()), c.pending()
    assert "MAIL-QUEUED" in c.run("--once", "--peek", "--persona", PERSONA)[1]
