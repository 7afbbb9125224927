"""The Claude Code pusher (kijito_pull.harnesses.claude.push.Pusher) without Claude Code: the real engine
against the sandbox over real HTTP, a real session inbox socket served by a fake of the session's end
(tests/harnesses/claude/test_inbox_socket.FakeInbox), and a real transcript file written the way Claude
Code records a pushed message: a `queue-operation` line when it queues it, a `user` line once the model
is given it. The real binary does the same in tests/e2e/test_claude_push_e2e.py.

Each test asserts on what went over the socket, on the cursor and the pending hand-overs
(`kijito-pull status --json`), and on what the other delivery paths (`--once`, the Stop hook) still see.
"""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest

from kijito_pull.core import process, render
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.claude import inbox_socket
from kijito_pull.harnesses.claude.hooks import PUSH_READER
from kijito_pull.harnesses.claude.inbox_socket import InboxSocket
from kijito_pull.harnesses.claude.push import ACCEPT_WAIT, SOCKET_NOTE, Pusher, push_holder_key
from kijito_pull.harnesses.transcript import Transcript
from tests.harnesses.claude.conftest import TOKEN  # noqa: F401 - the sandbox (tests/conftest.py) serves it
from tests.harnesses.claude.test_confirmed_handover import establish_cursor, state
from tests.harnesses.claude.test_hooks import PERSONA, Hooks
from tests.harnesses.claude.test_inbox_socket import FakeInbox
from tests.waiting import until

SID = "push-sess-1"
HOLDER = push_holder_key(SID)
ID_IN_TEXT = re.compile(r"Message \d+ of \d+: id (\d+),")


class Clock:
    """The pusher's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Session:
    """The Claude Code session's transcript, written the way Claude Code writes it (compact JSON lines)."""

    def __init__(self, path: Path):
        self.path = path
        self._write({"type": "summary", "sessionId": SID})

    def _write(self, record: dict) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")

    def queue(self, text: str) -> None:
        """Claude Code queued a message that came in on its inbox socket."""
        self._write({"type": "queue-operation", "operation": "enqueue", "timestamp": "2025-01-01T00:00:00Z",
                     "sessionId": SID, "content": text})

    def give(self, text: str) -> None:
        """The model was given it."""
        self._write({"parentUuid": None, "sessionId": SID, "type": "user",
                     "message": {"role": "user", "content": f"Another Claude session sent a message: {text}"}})


@pytest.fixture
def hooks(sb, project, tmp_path) -> Hooks:
    return Hooks(sb, project, tmp_path / "state", KIJITO_PULL_MAX_STOP_BLOCKS="100")


@pytest.fixture
def session(tmp_path) -> Session:
    return Session(tmp_path / f"{SID}.jsonl")


class Rig:
    """Builds pushers for one session; closes what they opened."""

    def __init__(self, hooks: Hooks, fake: FakeInbox, session: Session):
        self.hooks, self.fake, self.session = hooks, fake, session
        self.clock = Clock()
        self.errors = io.StringIO()
        self.handed = 0
        self._open: list[handover.Setup] = []

    def pusher(self, *, policy: str = "all", **kwargs) -> Pusher:
        ready = handover.setup(PERSONA, self.hooks.environ)
        self._open.append(ready)
        me = process.me()
        transcript = Transcript(Paths(self.hooks.environ), SID, str(self.session.path), reader=PUSH_READER)

        def mark_handed() -> None:
            self.handed += 1

        return Pusher(ready.engine, InboxSocket(self.fake.path, self.fake.token), transcript, persona=PERSONA,
                      session_id=SID, policy=policy, pid=me.pid, pid_start=me.start, errors=self.errors,
                      mark_handed=mark_handed, clock=self.clock, **kwargs)

    def close(self) -> None:
        for ready in self._open:
            ready.close()


@pytest.fixture
def rig(hooks, fake, session):
    r = Rig(hooks, fake, session)
    try:
        yield r
    finally:
        r.close()


def pending(hooks: Hooks) -> dict:
    """holder -> ids, from `kijito-pull status --json` (None: released, unseen again)."""
    return {row["holder"]: row["ids"] for row in state(hooks)["pending"]}


def once_ids(hooks: Hooks) -> list[int]:
    """What a script pulling the same cursor (`kijito-pull --once`) is given now."""
    code, out, err = hooks.cli("--once", "--json", "--persona", PERSONA)
    assert code == 0, err
    return [e["id"] for e in map(json.loads, out.splitlines()) if e["event"] == "new"]


def ids_in(text: str) -> list[int]:
    return [int(i) for i in ID_IN_TEXT.findall(text)]


def wait_messages(fake: FakeInbox, count: int) -> list[str]:
    fake.wait_connections(count)
    return list(fake.messages)


# -- pushing and confirming ----------------------------------------------------------------------------


def test_a_push_is_pending_until_the_transcript_shows_the_model_was_given_it(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    cursor = state(hooks)["cursor"]
    ids = [sb.send(PERSONA, "loom", f"note {i} for river") for i in range(2)]
    pusher = rig.pusher()

    assert pusher.push() == ids
    [text] = wait_messages(fake, 1)
    assert ids_in(text) == ids and "note 0 for river" in text and "note 1 for river" in text
    assert all(render.ref(PERSONA, i) in text for i in ids) and SOCKET_NOTE in text
    assert rig.handed == 1
    assert state(hooks)["cursor"] == cursor and pending(hooks) == {HOLDER: ids}  # handed over, not acked
    assert pusher.waiting and set(pusher.inflight) == set(ids)

    session.queue(text)  # Claude Code queued it: accepted, not yet shown
    pusher.check()
    assert pusher.inflight == {} and pusher.queued == set(ids) and pusher.waiting
    assert state(hooks)["cursor"] == cursor and pending(hooks) == {HOLDER: ids}
    rig.clock.now += ACCEPT_WAIT * 10  # a queued push waits for its turn, however long the tool call runs
    pusher.check()
    assert pusher.refused is None and pending(hooks) == {HOLDER: ids}

    session.give(text)
    pusher.check()
    row = state(hooks)
    assert row["pending"] == [] and row["delivered_above"] == len(ids)  # acknowledged (settle: above the cursor)
    assert pusher.confirmed == ids and not pusher.waiting
    assert pusher.push() == [] and len(wait_messages(fake, 1)) == 1  # nothing new: nothing sent
    assert once_ids(hooks) == []
    assert state(hooks)["cursor"] == ids[-1]  # the next pull moved the cursor past them


def test_mail_held_by_a_live_pusher_goes_by_no_other_path(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    mid = sb.send(PERSONA, "loom", "only once")
    pusher = rig.pusher()
    assert pusher.push() == [mid]
    assert once_ids(hooks) == []  # a script on the same cursor does not get it
    code, out, err = hooks("claude-stop", session_id=SID, transcript_path=str(session.path))
    assert (code, out) == (0, ""), err  # nor does the session's Stop hook: nothing to block with
    assert pending(hooks) == {HOLDER: [mid]}


def test_each_new_push_carries_only_mail_not_yet_pushed(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    first = sb.send(PERSONA, "loom", "first")
    pusher = rig.pusher()
    assert pusher.push() == [first]
    second = sb.send(PERSONA, "loom", "second")
    assert pusher.push() == [second]
    texts = wait_messages(fake, 2)
    assert [ids_in(t) for t in texts] == [[first], [second]]
    assert pending(hooks) == {HOLDER: [first, second]}


# -- what the session does not take ----------------------------------------------------------------------


def test_a_push_the_session_never_takes_is_unseen_again_and_pushing_stops(rig, hooks, sb, fake, session):
    """crossSessionInbound hold or refuse: the socket takes the message, the transcript never shows it."""
    establish_cursor(hooks, sb)
    cursor = state(hooks)["cursor"]
    ids = [sb.send(PERSONA, "loom", f"swallowed {i}") for i in range(2)]
    pusher = rig.pusher(accept_wait=5.0)
    assert pusher.push() == ids
    rig.clock.now += 4.9
    pusher.check()
    assert pusher.refused is None and pending(hooks) == {HOLDER: ids}  # still within the wait
    rig.clock.now += 0.2
    pusher.check()
    assert pusher.refused is not None and "crossSessionInbound" in pusher.refused
    assert not pusher.waiting and pusher.confirmed == []
    assert state(hooks)["cursor"] == cursor and pending(hooks) == {None: ids}  # released: unseen again
    assert f"message(s) {ids[0]}, {ids[1]} are unseen again" in rig.errors.getvalue()

    later = sb.send(PERSONA, "loom", "after the refusal")
    assert pusher.push() == []  # it pushes no more
    time.sleep(0.1)
    assert len(fake.messages) == 1
    assert once_ids(hooks) == [*ids, later]  # the other paths get all of it


def test_a_socket_that_cannot_be_written_gives_the_mail_back_at_once(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    cursor = state(hooks)["cursor"]
    ids = [sb.send(PERSONA, "loom", f"m{i}") for i in range(2)]
    pusher = rig.pusher()
    fake.close()  # the session (and its socket) is gone
    assert pusher.push() == []
    assert pusher.refused is not None and "cannot be written" in pusher.refused
    assert not pusher.waiting
    assert state(hooks)["cursor"] == cursor and pending(hooks) == {None: ids}
    assert once_ids(hooks) == ids


def test_finish_gives_back_what_was_never_queued_and_leaves_queued_mail_with_the_pusher(
        rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    queued = sb.send(PERSONA, "loom", "queued")
    pusher = rig.pusher()
    assert pusher.push() == [queued]
    [text] = wait_messages(fake, 1)
    session.queue(text)
    unqueued = sb.send(PERSONA, "loom", "never queued")
    assert pusher.push() == [unqueued]
    pusher.finish()
    assert pending(hooks) == {HOLDER: [queued], None: [unqueued]}
    assert not pusher.inflight


# -- the interrupt policy -----------------------------------------------------------------------------------


def _rows_say_urgency(sb) -> None:
    """Serve the inbox as an API would whose rows say which message is urgent (the Kijito API documents
    urgency only on send and in notify/pending counts, so the sandbox's rows leave it out): the sandbox's
    own answer, each row with its stored `urgent`."""
    from kijito_pull.sandbox import api

    limit, budget = sb.window()
    envelope = api.inbox(sb.store, {"persona": PERSONA, "mark_read": "false"}, limit, budget)
    stored = {m["id"]: m["urgent"] for m in sb.messages(PERSONA)}
    for row in envelope["result"]:
        row["urgent"] = stored[row["id"]]
    sb.add_fault({"kind": "body", "path": "/api/inbox", "body": json.dumps(envelope)})


def test_under_the_urgent_policy_only_urgent_mail_is_pushed(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    plain = sb.send(PERSONA, "loom", "can wait")
    urgent = sb.send(PERSONA, "loom", "the build is on fire", urgent=True)
    _rows_say_urgency(sb)
    pusher = rig.pusher(policy="urgent")
    assert pusher.push() == [urgent]
    [text] = wait_messages(fake, 1)
    assert ids_in(text) == [urgent] and "can wait" not in text
    assert pending(hooks) == {HOLDER: [urgent]}
    assert once_ids(hooks) == [plain]  # the rest waits for the turn's end, unseen


def test_under_the_urgent_policy_mail_of_unknown_urgency_is_not_pushed(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    mid = sb.send(PERSONA, "loom", "urgent on send; the rows do not say so", urgent=True)
    pusher = rig.pusher(policy="urgent")
    assert pusher.push() == []
    time.sleep(0.1)
    assert fake.connections == [] and pending(hooks) == {} and not pusher.waiting
    assert once_ids(hooks) == [mid]


def test_under_the_urgent_policy_a_rise_of_the_urgent_count_lets_the_push_through_and_says_so(
        rig, hooks, sb, fake, session):
    """Rows carry no flag (the sandbox serves them as the API documents): the waker's notify/pending
    answers do, and a rise of `unread_urgent` marks the mail of the next read that finds it."""
    establish_cursor(hooks, sb)
    pusher = rig.pusher(policy="urgent")
    mid = sb.send(PERSONA, "loom", "urgent on send; the counts say so", urgent=True)
    pusher.urgent.arrived(PERSONA, 1)  # what the waker's loop does on that rise (hooks.py)
    assert pusher.push() == []  # announced, but no read has found it yet: nothing is marked
    with pusher.engine.open(peek=True) as pull:  # the waker's next read (its peek)
        pusher.urgent.found(PERSONA, list(pull.pending))
    assert pusher.push() == [mid]
    [text] = wait_messages(fake, 1)
    assert ids_in(text) == [mid] and "A sender marked this message urgent." in text
    later = sb.send(PERSONA, "loom", "plain, after it")
    session.give(text)
    pusher.check()
    assert pusher.push() == []  # mail after the urgent batch waits for the turn's end
    assert once_ids(hooks) == [later]


def test_under_the_turn_end_policy_nothing_is_pushed(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    mid = sb.send(PERSONA, "loom", "urgent, but turn-end", urgent=True)
    _rows_say_urgency(sb)
    pusher = rig.pusher(policy="turn-end")
    assert pusher.push() == []
    time.sleep(0.1)
    assert fake.connections == [] and pending(hooks) == {} and not pusher.waiting
    assert once_ids(hooks) == [mid]


# -- socket messages have a length limit -------------------------------------------------------------------


def test_the_default_limit_is_the_socket_modules(rig):
    assert rig.pusher().max_text == inbox_socket.MAX_TEXT


def test_a_hand_over_too_long_for_one_socket_message_is_pushed_in_parts(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    ids = [sb.send(PERSONA, "loom", f"body {i} " + "words " * 100) for i in range(3)]
    limit = 1500
    pusher = rig.pusher(max_text=limit)
    whole, shown = render.hand_over(PERSONA, [m for m in _messages(hooks, ids)], extra_notes=[SOCKET_NOTE])
    assert len(shown) == 3 and len(whole) > limit  # the premise: all three at once would not fit

    pushed = []
    for _ in range(5):
        got = pusher.push()
        if not got:
            break
        pushed.append(got)
    texts = wait_messages(fake, len(pushed))
    assert pushed == [[i] for i in ids]  # fewer per push, every one once, in order
    assert [ids_in(t) for t in texts] == pushed
    assert all(len(t) <= limit for t in texts)
    assert "2 more unread messages" in texts[0] and "did not fit in this push" in texts[0]
    assert pusher.refused is None and pusher.set_aside == set()
    assert pending(hooks) == {HOLDER: ids}


def test_a_message_too_long_even_alone_goes_by_the_stop_hook_and_pushing_goes_on(rig, hooks, sb, fake, session):
    establish_cursor(hooks, sb)
    short = sb.send(PERSONA, "loom", "short one")
    long = sb.send(PERSONA, "loom", "a long one " * 200)
    after = sb.send(PERSONA, "loom", "short two")
    limit = 1500
    pusher = rig.pusher(max_text=limit)
    [alone] = _messages(hooks, [long])
    text, shown = render.hand_over(PERSONA, [alone], extra_notes=[SOCKET_NOTE])
    assert shown and len(text) > limit  # the premise: it does not fit even alone

    assert pusher.push() == [short]
    assert pusher.push() == [after]  # the long one is skipped, not a reason to stop
    assert pusher.push() == []
    assert pusher.set_aside == {long} and pusher.refused is None
    assert not pusher.wanted(alone)  # the waker rings the doorbell for it instead (interactive)
    texts = wait_messages(fake, 2)
    assert [ids_in(t) for t in texts] == [[short], [after]] and all(len(t) <= limit for t in texts)
    assert f"message(s) {long} do not fit" in rig.errors.getvalue()
    assert pending(hooks) == {HOLDER: [short, after]}

    # The Stop hook hands over the long one (and only it: the others are held by the live pusher).
    code, out, err = hooks("claude-stop", session_id=SID, transcript_path=str(session.path))
    assert code == 0, err
    reason = json.loads(out)["reason"]
    assert ids_in(reason) == [long] and render.ref(PERSONA, long) in reason

    later = sb.send(PERSONA, "loom", "still pushed")
    assert pusher.push() == [later]  # pushing goes on for later mail
    assert ids_in(wait_messages(fake, 3)[-1]) == [later]


def _messages(hooks: Hooks, ids: list[int]):
    """The messages as the engine sees them (for rendering the premise of a test)."""
    ready = handover.setup(PERSONA, hooks.environ)
    try:
        with ready.engine.open(peek=True) as pull:
            by_id = {m.id: m for m in pull.pending}
    finally:
        ready.close()
    return [by_id[i] for i in ids]


# -- the claude-pusher hook (claude -p), as the process Claude Code starts ------------------------------------




def test_the_pusher_hook_looks_at_the_socket_once_then_pushes_and_confirms(hooks, sb, fake, session, tmp_path):
    from kijito_pull.doctor import Context
    from kijito_pull.harnesses.claude.checks import check_push
    from kijito_pull.harnesses.session import lifecycle

    establish_cursor(hooks, sb)
    fields = {"session_id": SID, "transcript_path": str(session.path), "hook_event_name": "SessionStart",
              "source": "startup"}
    code, _, err = hooks("claude-session-start", **fields)  # its synchronous sibling, as Claude Code runs both
    assert code == 0, err

    def claude_code_takes_it(text: str) -> None:  # an idle session: queued, then given to the model at once
        session.queue(text)
        session.give(text)

    fake.on_message = claude_code_takes_it
    proc = hooks.spawn("claude-pusher", env=fake.environ(), **fields)
    try:
        mode = until(lambda: lifecycle.read_push_mode(hooks.environ, SID))
        assert mode and mode["pushing"] is True, proc.stderr.read() if proc.poll() is not None else mode
        fake.wait_connections(1)
        time.sleep(0.3)
        assert fake.connections == [b""]  # one look at the socket while arming, nothing sent

        mid = sb.send(PERSONA, "loom", "pushed while the run works")
        assert until(lambda: fake.messages), "nothing was pushed"
        assert ids_in(fake.messages[0]) == [mid]
        def confirmed() -> bool:
            row = state(hooks)
            return row["pending"] == [] and (row["delivered_above"] == 1 or row["cursor"] == mid)

        assert until(confirmed), state(hooks)
        assert len(fake.connections) == 2  # the look, then the push

        finding = check_push(Context(environ={**hooks.environ, "CLAUDE_CODE_SESSION_ID": SID}, cwd=str(tmp_path)))
        assert "new mail is pushed into the session as it arrives" in finding.detail
        assert lifecycle.live_lease(hooks.environ, SID) is not None
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and out == "", err
    assert lifecycle.live_lease(hooks.environ, SID) is None  # the lease is given back
    assert once_ids(hooks) == []  # confirmed: no other path gets it again


def test_the_pusher_hook_under_urgent_pushes_the_mail_a_rise_of_the_urgent_count_announced(
        hooks, sb, fake, session, project):
    """The real claude-pusher process, `inbox interrupt: urgent`: plain mail waits for the turn's end, the
    mail that came with a rise of notify/pending's unread_urgent is pushed, saying it is urgent."""
    from kijito_pull.harnesses.session import lifecycle

    (project / "AGENTS.md").write_text((project / "AGENTS.md").read_text() + "- inbox interrupt: urgent\n")
    establish_cursor(hooks, sb)
    fields = {"session_id": SID, "transcript_path": str(session.path), "hook_event_name": "SessionStart",
              "source": "startup"}
    assert hooks("claude-session-start", **fields)[0] == 0
    fake.on_message = lambda text: (session.queue(text), session.give(text))
    proc = hooks.spawn("claude-pusher", env=fake.environ(), **fields)
    try:
        assert until(lambda: lifecycle.read_push_mode(hooks.environ, SID))
        fake.wait_connections(1)
        plain = sb.send(PERSONA, "loom", "can wait for the turn's end")
        assert until(lambda: len([r for r in sb.requests if r["path"] == "/api/inbox"]) >= 1)
        time.sleep(1.5)
        assert fake.messages == []  # plain mail is not pushed under `urgent`
        urgent = sb.send(PERSONA, "loom", "the build is on fire", urgent=True)
        assert until(lambda: fake.messages), "the urgent mail was not pushed"
        assert set(ids_in(fake.messages[0])) == {plain, urgent}  # the older unseen mail rides along
        assert "Urgent mail is among these messages: a sender marked one of the 2 urgent" in fake.messages[0]
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
