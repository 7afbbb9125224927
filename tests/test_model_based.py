"""Model-based test of the pull engine: random histories against a model of the inbox (issue 6, item 1).

Hypothesis drives the real `Engine`, the real `StateStore` (in a private temp dir) and the real
`pull_through` loop with a recording sink, against `WindowedInbox`, an in-test server object that
implements the real window semantics (kijito-api.md §2.1.1: count limit, content budget,
`truncated`/`size_dropped`/`size_truncated`/`next_before_id`/`unread_not_shown`, `before_id`
paging) and can, per request, tell every lie of §2.1.2 or fail in every way the client can fail.
Pages go through the real `parse_inbox`, so malformed envelopes fail exactly as they would on the
wire.

A history mixes: mail to the persona (from others and from itself), mail to other personas (id
gaps), reads by others, window and content-budget changes, backward-page budget changes, restarts
(a new Engine and store object on the same file), state damage, a consumer that refuses a message,
peek pulls, and pulls whose requests lie or fail.

The model is the set of ids sent to the persona. Checked after every pull:

* nothing is delivered that was not sent to the persona, nor anything the persona wrote itself;
* within one pull, ids are handed over strictly increasing (a consumer never sees N+1 before N);
* across pulls, a first delivery below an already delivered id happens only where the design allows
  it: while a pin is held or released (the walk delivers what is visible above the pin and fills the
  gap later), or when corrupt state re-delivers what is visible;
* a message is delivered again only after state damage was observed since its last delivery (no
  fault, lie, refusal, restart or peek may cause a duplicate);
* mail the design lets a pull leave behind (first contact: read mail, mail beyond the window, mail
  beyond --max-replay; corrupt state: mail beyond the newest window) is announced by a signal;
* corrupt state is announced as `state_corrupt` and never treated as a first run;
* a pin raises exactly one `alert`, and its release exactly one `recovered`;
* a newest page that fails changes nothing; a peek changes nothing;
* an untrustworthy answer (an id outside 0..2**63-1, another persona stated) delivers nothing: on the
  newest page it pins a cursor (or, with none to pin, fails the pull and changes nothing);
* after any honest, complete pull (no fault, accepting consumer, enough page budget) nothing sent
  is pending, and a second honest pull delivers nothing.

Sizing: the default run takes well under a minute. For a longer local run:
    KIJITO_PULL_HYPOTHESIS_EXAMPLES=2000 KIJITO_PULL_HYPOTHESIS_STEPS=80 \\
        .venv/bin/python -m pytest tests/test_model_based.py -q
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import requests
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kijito_pull.core.delivery import pull_through
from kijito_pull.core.engine import Engine
from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import ApiError, InboxPage, Message, Untrustworthy, parse_inbox
from kijito_pull.core.pull import CORRUPT, FIRST_CONTACT, NORMAL, Pull
from kijito_pull.core.sink import BatchSink, Sink
from kijito_pull.core.state import SCHEMA, StateStore
from kijito_pull.sandbox import Sandbox
from kijito_pull.sandbox.window import compute_window

PERSONA = "mbt"
OTHERS = ("river", "loom")
IDENTITY = {"api_base": "https://api.kijito.test", "persona": PERSONA, "consumer": "agent"}
HONEST_PAGE_BUDGET = 1_000_000

EXAMPLES = int(os.environ.get("KIJITO_PULL_HYPOTHESIS_EXAMPLES", "400"))
STEPS = int(os.environ.get("KIJITO_PULL_HYPOTHESIS_STEPS", "45"))

# -- what a request can do instead of answering honestly ---------------------------------------------

# Lies (kijito-api.md §2.1.2): the envelope parses, but what it declares about withheld rows is
# contradictory or unusable. A client can always detect these; it must never advance over them.
# (A server that *consistently* affirms an end while withholding rows is undetectable by any client
# and is not a lie kind of §2.1.2, so it is not modelled.)
LIES = (
    "continuation_absent", "continuation_negative", "continuation_string", "continuation_bool",
    "continuation_float", "continuation_off_by_one", "withheld_but_null", "truncated_nonbool_null",
    "nothing_withheld_but_continuation", "size_dropped_junk_null", "size_dropped_negative",
    "unread_not_shown_junk", "ignore_before_id", "include_before_id_row", "drop_oldest_when_withheld",
    "read_flag_absent",
)
# Failures: the request raises ApiError, either from the transport or from strict parsing.
FAILURES = (
    "transient_503", "timeout", "http_400", "http_404", "auth_401", "redirect", "not_json",
    "body_not_object", "result_not_list", "id_string", "id_bool", "dup_id",
    "row_not_object", "from_not_string", "content_not_string", "read_not_bool",
)
# Untrustworthy answers (shared/design.md): they parse, but cannot be believed; nothing from them is delivered.
DISTRUSTS = ("id_negative", "id_overflow", "id_huge", "persona_other")
FAULTS = LIES + FAILURES + DISTRUSTS

CORRUPTIONS = ("truncate", "garbage", "wrong_identity", "wrong_types", "not_object", "schema_bool",
               "above_below_cursor", "pin_malformed", "empty")


class WindowedInbox:
    """A Kijito inbox server, in process. Pages are built like the sandbox builds them, then parsed.

    `arm(plan, sticky)` sets the faults for the next pull: `plan` maps a request index within the
    pull (0 = the newest page) to a fault; `sticky` applies to every backward page. `fired` records
    the faults that were actually applied.
    """

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}  # id -> {"to", "from", "content", "created", "read"}
        self.next_id = 0  # Kijito's ids start at 0: a new account's first message is id 0
        self.limit = 5
        self.budget = 100_000
        self.plan: dict[int, str] = {}
        self.sticky: str | None = None
        self.requests = 0
        self.fired: list[tuple[int, str]] = []
        self.newest: InboxPage | None = None  # the last newest page handed out (honest or not)
        self.rng = random.Random(0)

    # -- the world ---------------------------------------------------------------------------------

    def send(self, to: str, sender: str, content: str) -> int:
        mid = self.next_id
        self.next_id += 1
        # `created` is deliberately not ordered with the id (kijito-api.md §2.1).
        created = f"2026-08-01T10:{self.rng.randrange(60):02d}:00Z"
        self.rows[mid] = {"to": to, "from": sender, "content": content, "created": created, "read": False}
        return mid

    def mark_read(self, ids) -> None:
        for i in ids:
            self.rows[i]["read"] = True

    def arm(self, plan: dict[int, str] | None = None, sticky: str | None = None, seed: int = 0) -> None:
        self.plan = dict(plan or {})
        self.sticky = sticky
        self.requests = 0
        self.fired = []
        self.newest = None
        self.rng = random.Random(seed)

    # -- the endpoint ------------------------------------------------------------------------------

    def envelope(self, persona: str, before_id: int | None) -> dict[str, Any]:
        """The honest answer, exactly as the sandbox computes it."""
        mine = sorted((i for i, r in self.rows.items() if r["to"] == persona
                       and (before_id is None or i < before_id)), reverse=True)
        candidates = [{"id": i, "from": self.rows[i]["from"], "content": self.rows[i]["content"],
                       "created": self.rows[i]["created"], "read": self.rows[i]["read"]}
                      for i in mine[: self.limit + 1]]
        win = compute_window(candidates, len(mine), self.limit, self.budget)
        unread_not_shown = 0
        if win.withheld:
            unread = sum(1 for r in self.rows.values() if r["to"] == persona and not r["read"]
                         and r["from"] != persona)
            shown = sum(1 for r in win.rows if not r["read"] and r["from"] != persona)
            unread_not_shown = max(0, unread - shown)
        return {"result": sorted(win.rows, key=lambda r: r["id"]), "truncated": win.truncated,
                "size_dropped": win.size_dropped, "size_truncated": win.size_truncated,
                "next_before_id": win.next_before_id, "unread_not_shown": unread_not_shown}

    def inbox(self, persona: str, before_id: int | None = None, limit: int | None = None) -> InboxPage:
        assert persona == PERSONA and limit is None
        index = self.requests
        self.requests += 1
        fault = self.plan.get(index)
        if fault is None and before_id is not None:
            fault = self.sticky
        if fault is not None:
            self.fired.append((index, fault))
        env = self.envelope(persona, before_id)
        data: Any = env
        if fault in FAILURES:
            data = self._fail(fault, env)
        elif fault in LIES:
            data = self._lie(fault, env, persona, before_id)
        elif fault in DISTRUSTS:
            data = self._distrust(fault, env)
        # Row order is unspecified (kijito-api.md §2.1): the client must sort by id itself.
        if isinstance(data, dict) and isinstance(data.get("result"), list):
            self.rng.shuffle(data["result"])
        try:
            page = parse_inbox(data, before_id, persona)
        except Untrustworthy:
            if before_id is None:
                self.newest = InboxPage.unbelieved()
            raise
        if before_id is None:
            self.newest = page
        return page

    def _fail(self, fault: str, env: dict[str, Any]) -> Any:
        rows = env["result"]
        if fault == "transient_503":
            raise ApiError("/api/inbox: server error 503", status=503, transient=True)
        if fault == "timeout":
            raise ApiError("/api/inbox: timed out after 5 s", transient=True)
        if fault in ("http_400", "http_404", "auth_401"):
            status = int(fault[-3:])
            raise ApiError(f"/api/inbox: HTTP {status}", status=status)
        if fault == "redirect":
            raise ApiError("/api/inbox: the server redirected (302); redirects are never followed", status=302)
        if fault == "not_json":
            raise ApiError("/api/inbox: the response is not valid JSON")
        if fault == "body_not_object":
            return [env]
        if fault == "result_not_list":
            return {**env, "result": {str(r["id"]): r for r in rows}}
        # Row-level shape failures need a row; an empty page gets a bad row of its own.
        bad = dict(rows[0]) if rows else {"id": 10**9, "from": "x", "content": "", "created": "", "read": False}
        out = [bad] + [dict(r) for r in rows[1:]]
        if fault == "id_string":
            bad["id"] = str(bad["id"])
        elif fault == "id_bool":
            bad["id"] = True
        elif fault == "dup_id":
            out.append(dict(bad))
        elif fault == "row_not_object":
            out[0] = list(bad.values())
        elif fault == "from_not_string":
            bad["from"] = None
        elif fault == "content_not_string":
            bad["content"] = 7
        elif fault == "read_not_bool":
            bad["read"] = "no"
        return {**env, "result": out}

    def _distrust(self, fault: str, env: dict[str, Any]) -> dict[str, Any]:
        rows = [dict(r) for r in env["result"]]
        if fault == "persona_other":
            return {**env, "persona": "mallory", "result": [{**r, "persona": "mallory"} for r in rows]}
        bad = rows[0] if rows else {"id": -1, "from": "x", "content": "", "created": "", "read": False}
        bad["id"] = {"id_negative": -1, "id_overflow": 2**63, "id_huge": 10**20}[fault]
        return {**env, "result": [bad, *rows[1:]]}

    def _lie(self, fault: str, env: dict[str, Any], persona: str, before_id: int | None) -> dict[str, Any]:
        env = {**env, "result": [dict(r) for r in env["result"]]}
        nbi = env["next_before_id"]
        oldest = env["result"][0]["id"] if env["result"] else None
        if fault == "continuation_absent":
            del env["next_before_id"]
        elif fault == "continuation_negative":
            env["next_before_id"] = -1
        elif fault == "continuation_string":
            env["next_before_id"] = str(nbi if nbi is not None else 0)
        elif fault == "continuation_bool":
            env["next_before_id"] = True
        elif fault == "continuation_float":
            env["next_before_id"] = float(nbi if nbi is not None else 0) + 0.5
        elif fault == "continuation_off_by_one":
            env["next_before_id"] = (nbi - 1) if nbi else (oldest if oldest is not None else 0)
        elif fault == "withheld_but_null":
            env["next_before_id"] = None
        elif fault == "truncated_nonbool_null":
            env["truncated"], env["next_before_id"] = "yes", None
        elif fault == "nothing_withheld_but_continuation":
            env["truncated"], env["size_dropped"] = False, 0
            if env["next_before_id"] is None and oldest is not None:
                env["next_before_id"] = oldest
        elif fault == "size_dropped_junk_null":
            env.update(truncated=False, size_dropped="2", size_truncated=True, next_before_id=None)
        elif fault == "size_dropped_negative":
            env["size_dropped"] = -1
        elif fault == "unread_not_shown_junk":
            env["unread_not_shown"] = self.rng.choice([-1, "3", 2.5, True, None])
        elif fault == "ignore_before_id":
            if before_id is not None:
                return self.envelope(persona, None)
        elif fault == "include_before_id_row":
            if before_id is not None and before_id in self.rows and self.rows[before_id]["to"] == persona:
                r = self.rows[before_id]
                env["result"].append({"id": before_id, "from": r["from"], "content": r["content"],
                                      "created": r["created"], "read": r["read"]})
        elif fault == "drop_oldest_when_withheld":
            if nbi is not None and env["result"]:
                del env["result"][0]
        elif fault == "read_flag_absent":
            for r in env["result"]:
                r.pop("read", None)
        return env


class Recording:
    """What a test consumer saw: the signals, what it was offered and took, the message it refused."""

    def __init__(self, refuse_at: int | None = None):
        self.refuse_at = refuse_at
        self.signals: list[dict] = []
        self.taken: list[int] = []
        self.offered: list[int] = []
        self.refused: int | None = None

    def signal(self, event: dict) -> None:
        self.signals.append(event)

    def kinds(self) -> list[str]:
        return [s["event"] for s in self.signals]


class RecordingSink(Recording, Sink):
    """A consumer that takes mail in order and may refuse the message at position `refuse_at`."""

    def deliver(self, event: dict, message: Message) -> bool:
        assert event["event"] == "new" and event["id"] == message.id
        assert event["event_id"] == f"{PERSONA}:new:{message.id}"
        assert event["content"] == message.content
        self.offered.append(message.id)
        if self.refuse_at is not None and len(self.offered) - 1 == self.refuse_at:
            self.refused = message.id
            return False
        self.taken.append(message.id)
        return True


class RecordingBatchSink(Recording, BatchSink):
    """An agent hand-over (core/sink.BatchSink) that fits only the first `refuse_at` messages (maybe none)."""

    def __init__(self, refuse_at: int | None = None):
        BatchSink.__init__(self)
        Recording.__init__(self, refuse_at)

    def compose(self, persona: str, messages):
        self.offered.extend(m.id for m in messages)
        k = len(messages) if self.refuse_at is None else min(self.refuse_at, len(messages))
        if k < len(messages):
            self.refused = messages[k].id
        return f"{k} of {len(messages)}", list(messages[:k])

    def write(self, text: str, shown) -> bool:
        if not shown:
            return False
        self.taken.extend(m.id for m in shown)
        return True


class SpyEngine(Engine):
    """The real engine; remembers the last Pull so the test can see its mode and coverage."""

    last: Pull | None = None

    @contextlib.contextmanager
    def open(self, peek: bool = False) -> Iterator[Pull]:
        self.last = None
        with super().open(peek=peek) as pull:
            self.last = pull
            yield pull


def _state_dir_root() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class EngineModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kijito-mbt-", dir=_state_dir_root()))
        self.server = WindowedInbox()
        self.factory = EventFactory("0123456789abcdef")
        self.page_budget = 1000
        self.max_replay = 50
        self.store = self._new_store()
        # The model.
        self.sent: dict[int, str] = {}  # id sent to the persona -> sender
        self.deliveries: dict[int, int] = {}  # id -> how many times a consumer took it
        self.last_delivered_at: dict[int, int] = {}  # id -> pull sequence number of its last delivery
        self.exempt: set[int] = set()  # ids the design let a pull leave behind, each announced
        self.last_corrupt_pull = -1  # sequence number of the last pull that observed corrupt state
        self.since_corrupt: set[int] = set()  # ids delivered since then: id order restarts at corruption
        self.pull_seq = 0
        self.pulls_done = 0

    def teardown(self) -> None:
        try:
            if self.pulls_done or self.sent:
                self.honest_pull(seed=0)  # every history ends with proof that nothing is pending
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------------

    def _new_store(self) -> StateStore:
        d = self.tmp / "cursors"
        return StateStore(d / "c.json", d / "c.lock", IDENTITY)

    def _engine(self, page_budget: int | None = None) -> SpyEngine:
        return SpyEngine(self.server, self.store, self.factory, persona=PERSONA, consumer="agent",
                         max_replay=self.max_replay, page_budget=self.page_budget if page_budget is None
                         else page_budget, lock_timeout=1.0)

    def _file_bytes(self) -> bytes | None:
        try:
            return self.store.path.read_bytes()
        except FileNotFoundError:
            return None

    @property
    def obligations(self) -> set[int]:
        """Ids that must eventually be delivered: mail to the persona from anyone but itself."""
        return {i for i, sender in self.sent.items() if sender != PERSONA}

    def _pull(self, *, plan: dict[int, str] | None = None, sticky: str | None = None,
              refuse_at: int | None = None, batch: bool = False, peek: bool = False,
              page_budget: int | None = None, seed: int = 0) -> tuple[RecordingSink, Pull | None]:
        self.pull_seq += 1
        seq = self.pull_seq
        loaded = self.store.load()
        before_bytes = self._file_bytes()
        prior_pin = loaded.state.pin if loaded.state is not None else None
        delivered_before = {i for i, n in self.deliveries.items() if n}
        self.server.arm(plan, sticky, seed)
        sink = RecordingBatchSink(refuse_at) if batch else RecordingSink(refuse_at)
        engine = self._engine(page_budget)
        try:
            report = pull_through(engine, self.factory, sink, peek=peek)
        except ApiError:
            event("pull failed at the newest page")
            # Only a failed newest page may abort a pull, and then nothing at all has changed; an untrustworthy
            # one only where there is no cursor to pin.
            no_cursor = loaded.state is None or loaded.state.cursor is None
            assert self.server.fired and self.server.fired[0][0] == 0 and (
                self.server.fired[0][1] in FAILURES or (self.server.fired[0][1] in DISTRUSTS and no_cursor)), \
                (self.server.fired, loaded)
            assert sink.offered == [] and sink.signals == []
            assert self._file_bytes() == before_bytes
            assert self.store.lock_holder() is None
            return sink, None
        pull = engine.last
        assert pull is not None
        self.pulls_done += 1
        event(f"pull mode {pull.mode}{' pinned' if pull.pinned else ''}{' peek' if peek else ''}")
        for _, fault in self.server.fired:
            event("fault " + ("lie" if fault in LIES else "failure"))
        if sink.refused is not None:
            event("consumer refused a message")
        newest = self.server.newest
        assert newest is not None
        if self.server.fired and self.server.fired[0][0] == 0 and self.server.fired[0][1] in DISTRUSTS:
            assert pull.mode == NORMAL and pull.pinned and sink.offered == [], (
                f"an untrustworthy newest page delivered {sink.offered}")
        taken = sink.taken
        kinds = sink.kinds()

        # What this pull is, decided by what the store held before it.
        if loaded.corrupt_reason is not None:
            expected_mode = CORRUPT
        elif loaded.state is None or loaded.state.cursor is None:
            expected_mode = FIRST_CONTACT
        else:
            expected_mode = NORMAL
        assert pull.mode == expected_mode, (pull.mode, loaded)
        # Damage is announced: fail-closed (corrupt), or restored from the last good copy (then nothing at all
        # may be left behind: the normal invariants below hold).
        assert (kinds.count("state_corrupt") == 1) == (expected_mode == CORRUPT or loaded.restored is not None), kinds
        assert report.pinned == pull.pinned

        # Order within the pull; nothing phantom; nothing self-authored.
        assert taken == sorted(set(taken)), f"out of order within one pull: {taken}"
        assert sink.offered == sorted(set(sink.offered)), sink.offered
        for i in sink.offered:
            assert i in self.sent, f"delivered {i}, which was never sent to {PERSONA}"
            assert self.sent[i] != PERSONA, f"delivered {i}, which {PERSONA} wrote itself"
        if refuse_at is None:
            assert report.refused is None and sink.offered == taken

        # Alarms: one alert when a pin starts, one recovered when it is released.
        if pull.mode == NORMAL:
            assert kinds.count("alert") == (1 if pull.pinned and prior_pin is None else 0), (kinds, prior_pin)
            assert kinds.count("recovered") == (1 if not pull.pinned and prior_pin is not None else 0), kinds
        else:
            assert "alert" not in kinds and "recovered" not in kinds

        if peek:
            assert self._file_bytes() == before_bytes, "a peek changed the state file"
            return sink, pull

        # Duplicates: only state damage observed since the last delivery may cause one.
        if pull.mode == CORRUPT or loaded.restored is not None:
            self.last_corrupt_pull = seq
            self.since_corrupt = set()
        since_corrupt_before = set(self.since_corrupt)
        self.since_corrupt |= set(taken)
        for i in taken:
            if self.deliveries.get(i):
                assert self.last_corrupt_pull > self.last_delivered_at[i], (
                    f"message {i} delivered again without state damage since its delivery in pull "
                    f"{self.last_delivered_at[i]} (this is pull {seq}, mode {pull.mode})")
            self.deliveries[i] = self.deliveries.get(i, 0) + 1
            self.last_delivered_at[i] = seq
            self.exempt.discard(i)  # corrupt state may re-deliver visible mail a first contact had left

        # Order across pulls: a first delivery below something already delivered needs a reason the
        # design gives: a pin held or released (what was visible above the pin went first and is still
        # listed in delivered_above), or corrupt state re-delivering what is visible (order restarts there).
        first_time = [i for i in taken if i not in delivered_before]
        if pull.mode == NORMAL and prior_pin is None and not pull.pinned and first_time:
            above_pin = set(loaded.state.delivered_above)
            floor = max((i for i in since_corrupt_before if i not in above_pin), default=-1)  # ids start at 0
            assert min(first_time) > floor, (
                f"first delivery of {min(first_time)} after {floor} with no pin and no damage")

        # First contact walks back past the newest window: on an honest server, with a walk that finished
        # and a consumer that took everything, every unread message up to --max-replay was handed over.
        if pull.mode == FIRST_CONTACT and not self.server.fired and refuse_at is None and pull.coverage.complete:
            unread = sorted(i for i, sender in self.sent.items()
                            if sender != PERSONA and not self.server.rows[i]["read"])
            expected = unread[-self.max_replay:] if self.max_replay else []
            assert set(expected) <= set(taken), (
                f"first contact left unread {sorted(set(expected) - set(taken))} behind (max_replay {self.max_replay})")

        # What the design lets this pull leave behind must be allowed and announced.
        after = self.store.load()
        if pull.mode == NORMAL:
            assert after.corrupt_reason is None and after.state is not None
        if after.state is not None and after.state.cursor is not None and pull.mode in (FIRST_CONTACT, CORRUPT):
            # First contact accounts for what it leaves behind below the cursor and, when its consumer
            # stopped early, above it (remembered in delivered_above so it is never handed over later).
            accounted = {i for i in self.obligations
                         if i <= after.state.cursor or i in after.state.delivered_above}
            left = accounted - set(self.deliveries) - self.exempt
            visible = {m.id: m for m in newest.messages}
            capped = {i for s in sink.signals if s["event"] == "replay_capped" for i in s["ids"]}
            for i in left:
                if pull.mode == FIRST_CONTACT:
                    allowed = i not in visible or visible[i].read or i in capped
                    assert allowed, f"first contact baselined visible unread message {i} without delivering it"
                    if not self.server.rows[i]["read"]:
                        assert {"baseline_skipped", "replay_capped"} & set(kinds), (
                            f"first contact left unread message {i} behind without a word: {kinds}")
                else:
                    assert i not in visible, f"corrupt state: visible message {i} was not re-delivered"
                    assert "baseline_skipped" in kinds, (
                        f"corrupt state: message {i} beyond the newest window was skipped, and nothing but "
                        f"state_corrupt {[s for s in sink.signals if s['event'] == 'state_corrupt']} said so")
            if left:
                event(f"{pull.mode} left mail behind, announced")
            self.exempt |= left

        # The cursor is a watermark: everything at or below it was delivered (or left behind, announced),
        # and every id remembered above a pin was really delivered.
        if after.state is not None and after.state.cursor is not None:
            skipped = {i for i in self.obligations if i <= after.state.cursor} - set(self.deliveries) - self.exempt
            assert not skipped, f"cursor {after.state.cursor} passed {sorted(skipped)}, never delivered ({pull.mode})"
            own = {i for i, sender in self.sent.items() if sender == PERSONA}  # self-echo: accounted, never delivered
            assert set(after.state.delivered_above) <= set(self.deliveries) | self.exempt | own, after.state
        return sink, pull

    # -- rules: the world ----------------------------------------------------------------------------

    @initialize(max_replay=st.sampled_from([50, 2, 0]))
    def setup(self, max_replay: int) -> None:
        self.max_replay = max_replay

    @rule(sender=st.sampled_from(OTHERS + OTHERS + (PERSONA,)), count=st.integers(1, 12),
          size=st.sampled_from([0, 3, 30, 90, 400]))
    def send_to_persona(self, sender: str, count: int, size: int) -> None:
        for _ in range(count):
            mid = self.server.send(PERSONA, sender, "")
            self.server.rows[mid]["content"] = f"#{mid} " + "x" * size
            self.sent[mid] = sender

    @rule(count=st.integers(1, 6))
    def send_to_others(self, count: int) -> None:
        for _ in range(count):
            self.server.send("someone-else", "river", "not yours")

    @rule(which=st.sampled_from(["all", "newest", "oldest", "every_other"]), n=st.integers(1, 6))
    def read_by_others(self, which: str, n: int) -> None:
        mine = sorted(self.sent)
        pick = {"all": mine, "newest": mine[-n:], "oldest": mine[:n], "every_other": mine[::2]}[which]
        self.server.mark_read(pick)

    @rule(limit=st.integers(1, 8), budget=st.sampled_from([40, 150, 600, 100_000]))
    def change_window(self, limit: int, budget: int) -> None:
        self.server.limit, self.server.budget = limit, budget

    @rule(pages=st.sampled_from([0, 1, 2, 5, 1000]))
    def change_page_budget(self, pages: int) -> None:
        self.page_budget = pages

    @rule()
    def restart(self) -> None:
        self.store = self._new_store()  # a new process: new store object, same file; engines are per pull

    @rule(kind=st.sampled_from(CORRUPTIONS), cut=st.floats(0, 1), junk=st.binary(min_size=1, max_size=40))
    def damage_state(self, kind: str, cut: float, junk: bytes) -> None:
        path = self.store.path
        path.parent.mkdir(parents=True, exist_ok=True)
        loaded = self.store.load()
        good = self._file_bytes() if loaded.state is not None and loaded.restored is None else None
        doc = json.loads(good) if good else {"schema": SCHEMA, "identity": IDENTITY, "cursor": 0,
                                              "delivered_above": [], "pin": None}
        if kind == "truncate":
            whole = good or json.dumps(doc, indent=1).encode()
            data = whole[: min(int(len(whole) * cut), len(whole.rstrip()) - 1)]  # at least the last brace goes
        elif kind == "garbage":
            data = junk
        elif kind == "empty":
            data = b""
        elif kind == "wrong_identity":
            data = json.dumps({**doc, "identity": {**IDENTITY, "persona": "someone-else"}}).encode()
        elif kind == "wrong_types":
            data = json.dumps({**doc, "cursor": str(doc.get("cursor"))}).encode()
        elif kind == "not_object":
            data = json.dumps([doc]).encode()
        elif kind == "schema_bool":
            data = json.dumps({**doc, "schema": True}).encode()
        elif kind == "above_below_cursor":
            cursor = doc.get("cursor") or 0
            data = json.dumps({**doc, "cursor": cursor, "delivered_above": [cursor]}).encode()
        else:  # pin_malformed
            data = json.dumps({**doc, "pin": "yes"}).encode()
        path.write_bytes(data)
        damaged = self.store.load()
        assert damaged.corrupt_reason is not None or damaged.restored is not None, data

    # -- rules: pulls --------------------------------------------------------------------------------

    @rule(newest=st.none() | st.none() | st.none() | st.sampled_from(FAULTS),
          plan=st.dictionaries(st.integers(1, 6), st.sampled_from(FAULTS), max_size=2),
          sticky=st.none() | st.sampled_from(FAULTS),
          refuse_at=st.none() | st.none() | st.integers(0, 3), batch=st.booleans(),
          peek=st.sampled_from([False, False, False, True]), seed=st.integers(0, 2**16))
    def pull(self, newest, plan, sticky, refuse_at, batch, peek, seed) -> None:
        """Any mix: a fault on the newest page, on given backward pages, on all backward pages."""
        if newest is not None:
            plan = {**plan, 0: newest}
        self._pull(plan=plan, sticky=sticky, refuse_at=refuse_at, batch=batch, peek=peek, seed=seed)

    @rule(kind=st.sampled_from(FAULTS), seed=st.integers(0, 2**16))
    def pull_with_a_broken_walk(self, kind: str, seed: int) -> None:
        """Every backward page lies or fails: the newest window is delivered, the gap must stay pinned."""
        self._pull(sticky=kind, seed=seed)

    @rule(seed=st.integers(0, 2**16))
    def honest_pull(self, seed: int) -> None:
        """No fault, an accepting consumer, budget enough: afterwards nothing sent is pending."""
        sink, pull = self._pull(page_budget=HONEST_PAGE_BUDGET, seed=seed)
        assert pull is not None and not pull.pinned and pull.coverage.complete, pull and pull.problem
        missing = self.obligations - set(self.deliveries) - self.exempt
        assert not missing, f"after an honest, complete pull these were never delivered: {sorted(missing)}"
        again, pull2 = self._pull(page_budget=HONEST_PAGE_BUDGET, seed=seed + 1)
        assert pull2 is not None and pull2.mode == NORMAL
        assert again.offered == [], f"a second honest pull handed over {again.offered}"
        assert again.kinds() == [], again.kinds()

    # -- invariants ---------------------------------------------------------------------------------

    @invariant()
    def no_lock_left_behind(self) -> None:
        assert self.store.lock_holder() is None

    @invariant()
    def delivered_only_what_was_sent(self) -> None:
        assert set(self.deliveries) <= self.obligations
        assert self.exempt <= self.obligations


EngineModel.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestEngineModel = EngineModel.TestCase


def test_the_fake_inbox_is_faithful_to_the_sandbox_window() -> None:
    """The model's server must page like the real one, or the model proves nothing about the engine."""
    server = WindowedInbox()
    server.limit, server.budget = 3, 40
    with Sandbox(token="t", window_limit=3, content_budget=40) as sb:
        for to, size in ([(PERSONA, 5), ("x", 1), (PERSONA, 50), (PERSONA, 12), (PERSONA, 0),
                          (PERSONA, 20), ("x", 3), (PERSONA, 9), (PERSONA, 30)]):
            content = "y" * size
            assert server.send(to, "river", content) == sb.send(to=to, sender="river", content=content)
        server.mark_read([3])
        sb.mark_read(PERSONA, [3])
        for before in (None, 9, 8, 6, 5, 4, 3, 1):
            params = {"persona": PERSONA, "mark_read": "false"}
            if before is not None:
                params["before_id"] = str(before)
            got = requests.get(sb.url + "/api/inbox", params=params, timeout=5,
                               headers={"Authorization": "Bearer t", "User-Agent": "t/1"}).json()
            mine = server.envelope(PERSONA, before)
            for row in got["result"]:
                row.pop("created")
            for row in mine["result"]:
                row.pop("created")
            assert mine == got, before
