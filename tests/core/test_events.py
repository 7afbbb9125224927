"""Events must stay interchangeable with kijito-inbox-monitor's stream and exec contract."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from kijito_pull.core import events
from kijito_pull.core.events import (
    KINDS,
    LIVENESS_KINDS,
    EventFactory,
    emitted_clocks,
    exec_environment,
    nonce,
    to_ndjson,
    wake_class,
)
from kijito_pull.core.models import Message

REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "KIJITO_PULL_REQUIRE_E2E"  # set by .ci/run: a missing reference fails instead of skipping
REFERENCE_VERSION = "0.6.1"


def msg(mid=41, sender="alice", content="hello", created="2026-01-02T03:04:05Z", urgent=None):
    return Message(id=mid, sender=sender, content=content, created=created, read=False, urgent=urgent)


def reference_module_file() -> Path | None:
    """kijito_inbox_monitor.py inside the venv `scripts/install-reference` made (.harness/kim/), if any.

    Only a venv whose stamp names the pinned version counts, so a half-finished or stale install is
    treated as missing rather than compared with."""
    prefix = Path(os.environ.get("KIJITO_PULL_HARNESS_DIR") or REPO_ROOT / ".harness") / "kim"
    try:
        stamp = (prefix / ".installed").read_text().strip()
    except OSError:
        return None
    if stamp != f"kijito-inbox-monitor=={REFERENCE_VERSION}":
        return None
    found = sorted(prefix.glob("lib/python3*/site-packages/kijito_inbox_monitor.py"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def reference():
    """The 0.6.1 watcher's module (standard library only; importing it defines, it runs nothing).

    Installed by `bash scripts/install-reference` (it is not a dependency). Without it these tests
    skip, unless KIJITO_PULL_REQUIRE_E2E=1 (CI), where a missing reference is a failure."""
    path = reference_module_file()
    if path is None:
        msg = (f"reference kijito-inbox-monitor {REFERENCE_VERSION} not installed "
               "(run: bash scripts/install-reference)")
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{msg}; {REQUIRE_ENV}=1 requires it", pytrace=False)
        pytest.skip(msg)
    spec = importlib.util.spec_from_file_location("kijito_inbox_monitor_ref", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.__version__ == REFERENCE_VERSION
    return module


# --- nonce ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("event_id, expected", [
    ("testbot:new:41", "JQ8cEkr75LW"),
    ("testbot:new:42", "UA1yWKpUt5A"),
    ("argus:new:12", "vwwTOywuFUr"),
    ("testbot:new:0", "q2YRDss5qF3"),
])
def test_nonce_vectors(event_id, expected):
    assert nonce(event_id) == expected


def test_nonce_of_unencodable_id_does_not_raise_and_matches_its_safe_form():
    assert nonce("bad\ud800:new:1") == nonce("bad?:new:1")


def test_nonce_matches_reference(reference):
    for event_id in ["testbot:new:41", "x:alert:0123456789abcdef-7", "pérsona:new:9", ""]:
        assert nonce(event_id) == reference._wake_nonce(event_id)


# --- wake class ----------------------------------------------------------------------------------

def test_wake_class_table():
    assert wake_class("new") == "mail"
    assert LIVENESS_KINDS == {"heartbeat", "armed"}
    for kind in KINDS - {"new"} - LIVENESS_KINDS:
        assert wake_class(kind) == "diagnostic", kind
    for kind in LIVENESS_KINDS:
        assert wake_class(kind) == "liveness"


def test_unknown_kind_wakes():
    assert wake_class("a_kind_nobody_classified") == "diagnostic"


def test_wake_class_matches_reference(reference):
    for kind in KINDS | {"still_unread", "made_up"}:
        assert wake_class(kind) == reference._wake_class(kind), kind


# --- event ids -----------------------------------------------------------------------------------

def test_new_event_id_is_stable_across_factories():
    first = EventFactory().new("testbot", msg(41))
    second = EventFactory().new("testbot", msg(41))
    assert first["event_id"] == second["event_id"] == "testbot:new:41"
    assert first["nonce"] == second["nonce"] == "JQ8cEkr75LW"


def test_signal_event_ids_are_unique_per_emission():
    factory = EventFactory()
    ids = [factory.signal("alert", "testbot", reason="down")["event_id"] for _ in range(500)]
    assert len(set(ids)) == 500
    pattern = re.compile(r"\Atestbot:alert:([0-9a-f]{16})-(\d+)\Z")
    runs = {pattern.match(i).group(1) for i in ids}
    assert runs == {factory.run_id}
    assert [int(pattern.match(i).group(2)) for i in ids] == list(range(1, 501))


def test_signal_ids_differ_between_processes():
    a = EventFactory().signal("heartbeat", "p")["event_id"]
    b = EventFactory().signal("heartbeat", "p")["event_id"]
    assert a != b
    assert a.endswith("-1") and b.endswith("-1")


def test_signal_nonce_is_derived_from_its_event_id():
    ev = EventFactory().signal("recovered", "p", cursor=9)
    assert ev["nonce"] == nonce(ev["event_id"])


def test_run_id_is_validated():
    assert EventFactory(run_id="0123456789abcdef").run_id == "0123456789abcdef"
    with pytest.raises(ValueError):
        EventFactory(run_id="xyz")


def test_signal_refuses_mail_kind_and_reserved_fields():
    factory = EventFactory()
    with pytest.raises(ValueError):
        factory.signal("new", "p")
    with pytest.raises(ValueError):
        factory.signal("alert", "p", event_id="forged")
    with pytest.raises(ValueError):
        factory.new("p", msg(), wake_class="liveness")


# --- event contents ------------------------------------------------------------------------------

def test_new_event_fields():
    ev = EventFactory().new("testbot", msg(41, "alice", "hi there", "2026-01-02T03:04:05Z"))
    assert ev["event"] == "new"
    assert ev["source"] == "kijito-inbox"
    assert (ev["id"], ev["from"], ev["content"], ev["created"]) == (41, "alice", "hi there",
                                                                     "2026-01-02T03:04:05Z")
    assert ev["persona"] == "testbot"
    assert ev["wake_class"] == "mail"
    assert "urgent" not in ev
    ts = datetime.fromisoformat(ev["ts"])
    assert ts.utcoffset() == timedelta(0)
    assert abs((datetime.now(ts.tzinfo) - ts).total_seconds()) < 60
    assert set(ev) == {"event", "source", "ts", "id", "from", "created", "persona", "content",
                       "event_id", "nonce", "emitted", "wake_class"}


@pytest.mark.parametrize("urgent", [True, False])
def test_urgent_is_carried_when_known(urgent):
    assert EventFactory().new("p", msg(urgent=urgent))["urgent"] is urgent


def test_content_clipping_and_omission():
    factory = EventFactory()
    assert factory.new("p", msg(content="abcdef"), content_chars=3)["content"] == "abc"
    assert factory.new("p", msg(content="abcdef"), content_chars=0)["content"] == ""
    assert "content" not in factory.new("p", msg(content="abcdef"), no_content=True)
    with pytest.raises(ValueError):
        factory.new("p", msg(), content_chars=-1)


def test_extra_fields_are_kept():
    ev = EventFactory().new("p", msg(), cursor=40)
    assert ev["cursor"] == 40
    sig = EventFactory().signal("alert", "p", reason="down", consecutive_failures=3)
    assert (sig["reason"], sig["consecutive_failures"], sig["wake_class"]) == ("down", 3, "diagnostic")
    assert EventFactory().signal("heartbeat", "p")["wake_class"] == "liveness"


# --- clocks --------------------------------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux clock names")
def test_clocks_on_linux_are_real_and_named():
    before = time.clock_gettime(time.CLOCK_MONOTONIC)
    stamps = emitted_clocks()
    after = time.clock_gettime(time.CLOCK_MONOTONIC)
    assert stamps["src"] == {"monotonic": "CLOCK_MONOTONIC", "boottime": "CLOCK_BOOTTIME"}
    assert before - 1e-6 <= stamps["monotonic"] <= after + 1e-6
    assert stamps["boottime"] >= stamps["monotonic"]
    assert datetime.fromisoformat(stamps["wall"]).utcoffset() == timedelta(0)
    assert "clock_defect" not in stamps


def test_missing_boottime_is_omitted_not_faked(monkeypatch):
    # Linux without CLOCK_BOOTTIME: CLOCK_MONOTONIC_RAW exists but excludes suspend, so it must not
    # stand in for boottime (readings chosen so an impostor would not be caught as inverted).
    monkeypatch.setattr(time, "CLOCK_MONOTONIC", 1001, raising=False)
    monkeypatch.setattr(time, "CLOCK_MONOTONIC_RAW", 1004, raising=False)
    monkeypatch.delattr(time, "CLOCK_BOOTTIME", raising=False)
    monkeypatch.delattr(time, "CLOCK_UPTIME_RAW", raising=False)
    monkeypatch.setattr(time, "clock_gettime", {1001: 10.0, 1004: 50.0}.__getitem__, raising=False)
    stamps = emitted_clocks()
    assert "boottime" not in stamps
    assert stamps["src"] == {"monotonic": "CLOCK_MONOTONIC"}
    assert stamps["monotonic"] == 10.0


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="needs CLOCK_BOOTTIME to remove")
def test_missing_boottime_constant_on_this_host(monkeypatch):
    monkeypatch.delattr(time, "CLOCK_BOOTTIME")
    monkeypatch.delattr(time, "CLOCK_UPTIME_RAW", raising=False)
    stamps = emitted_clocks()
    assert "boottime" not in stamps and "clock_defect" not in stamps
    assert "boottime" not in stamps["src"]
    assert "monotonic" in stamps


def test_no_clock_gettime_leaves_only_wall(monkeypatch):
    monkeypatch.delattr(time, "clock_gettime", raising=False)
    stamps = emitted_clocks()
    assert set(stamps) == {"wall"}


@pytest.mark.parametrize("broken, working", [("monotonic", "boottime"), ("boottime", "monotonic")])
def test_unreadable_clock_is_omitted(monkeypatch, broken, working):
    constants = {"monotonic": ("CLOCK_MONOTONIC", 1001), "boottime": ("CLOCK_BOOTTIME", 1007)}
    for name, const in constants.values():
        monkeypatch.setattr(time, name, const, raising=False)
    monkeypatch.delattr(time, "CLOCK_UPTIME_RAW", raising=False)

    def fake(clock):
        if clock == constants[broken][1]:
            raise OSError(22, "Invalid argument")
        return 5.0

    monkeypatch.setattr(time, "clock_gettime", fake, raising=False)
    stamps = emitted_clocks()
    assert stamps[working] == 5.0
    assert broken not in stamps
    assert stamps["src"] == {working: constants[working][0]}
    assert "clock_defect" not in stamps


def test_inverted_pair_drops_boottime_and_reports_defect(monkeypatch):
    monkeypatch.setattr(time, "CLOCK_MONOTONIC", 1001, raising=False)
    monkeypatch.setattr(time, "CLOCK_BOOTTIME", 1007, raising=False)
    monkeypatch.delattr(time, "CLOCK_UPTIME_RAW", raising=False)
    monkeypatch.setattr(time, "clock_gettime", {1001: 100.0, 1007: 91.5}.__getitem__, raising=False)
    stamps = emitted_clocks()
    assert "boottime" not in stamps
    assert stamps["src"] == {"monotonic": "CLOCK_MONOTONIC"}
    assert stamps["clock_defect"] == {"kind": "boottime_below_monotonic", "boottime": 91.5,
                                      "boottime_src": "CLOCK_BOOTTIME", "monotonic": 100.0}


def test_macos_mapping_uses_raw_clocks(monkeypatch):
    monkeypatch.setattr(time, "CLOCK_UPTIME_RAW", 2008, raising=False)
    monkeypatch.setattr(time, "CLOCK_MONOTONIC_RAW", 2004, raising=False)
    monkeypatch.setattr(time, "CLOCK_MONOTONIC", 2006, raising=False)
    monkeypatch.delattr(time, "CLOCK_BOOTTIME", raising=False)
    readings = {2008: 10.0, 2004: 50.0, 2006: 49.0}
    monkeypatch.setattr(time, "clock_gettime", readings.__getitem__, raising=False)
    stamps = emitted_clocks()
    assert stamps["src"] == {"monotonic": "CLOCK_UPTIME_RAW", "boottime": "CLOCK_MONOTONIC_RAW"}
    assert (stamps["monotonic"], stamps["boottime"]) == (10.0, 50.0)


def test_every_event_carries_emitted_clocks():
    ev = EventFactory().signal("armed", "p")
    assert "wall" in ev["emitted"]


def test_clock_mapping_matches_reference(reference):
    ours = {key: name for key, (name, _) in events._clock_sources().items()}
    theirs = {key: name for key, (name, _) in reference._clock_map().items()}
    assert ours == theirs


# --- NDJSON --------------------------------------------------------------------------------------

def test_ndjson_is_standard_json_dumps_line():
    ev = EventFactory().new("testbot", msg(content="héllo ✓ 日本"))
    line = to_ndjson(ev)
    assert line == json.dumps(ev, ensure_ascii=False) + "\n"
    assert line.startswith('{"event": "new", "source": "kijito-inbox", "ts": ')
    assert "héllo ✓ 日本" in line
    assert json.loads(line) == ev


def test_ndjson_multiline_content_is_one_line():
    line = to_ndjson(EventFactory().new("p", msg(content="a\nb\r\nc\u2028d")))
    assert line.endswith("\n") and line.count("\n") == 1
    assert json.loads(line)["content"] == "a\nb\r\nc\u2028d"


def test_ndjson_nul_and_lone_surrogate_are_writable():
    ev = EventFactory().new("p", msg(sender="x\ud800y", content="a\x00b\udfffc"))
    line = to_ndjson(ev)
    assert "\x00" not in line
    line.encode("utf-8")  # would raise on a lone surrogate
    parsed = json.loads(line)
    assert parsed["from"] == "x?y"
    assert parsed["content"] == "a\x00b?c"  # json.dumps escapes NUL as \u0000, as the reference does


def test_event_id_and_nonce_agree_on_the_line_for_odd_personas():
    ev = EventFactory().new("per\ud800sona", msg(7))
    assert ev["event_id"] == "per?sona:new:7"  # the id in memory is the id on the line
    parsed = json.loads(to_ndjson(ev))
    assert parsed["event_id"] == "per?sona:new:7"
    assert parsed["nonce"] == nonce(parsed["event_id"])


@pytest.mark.parametrize("content", [
    "plain", "héllo ✓", "nul\x00here", "lone\ud800surrogate", "multi\nline\ttab", "\u202eRTL", "",
    '"quotes" and \\ backslash',
])
def test_ndjson_byte_compatible_with_reference(reference, content):
    factory = EventFactory()
    for ev in (factory.new("testbot", msg(content=content, urgent=True)),
               factory.signal("alert", "testbot", reason=content, ids=[1, 2])):
        expected = reference._safe_text(json.dumps(ev, ensure_ascii=False)) + "\n"
        assert to_ndjson(ev).encode("utf-8") == expected.encode("utf-8")


def _reference_line(reference, capsys, emit):
    emitter = reference.Emitter("stdout-jsonl", None, None, False)
    assert emit(emitter) is True
    return json.loads(capsys.readouterr().out)


def test_new_event_matches_reference_emitter(reference, capsys):
    theirs = _reference_line(reference, capsys, lambda e: e.new(
        {"id": 41, "from": "alice", "created": "2026-01-02T03:04:05Z", "content": "hello",
         "_persona": "testbot"}))
    ours = json.loads(to_ndjson(EventFactory().new("testbot", msg(41, "alice", "hello"))))
    assert list(ours) == list(theirs)  # same keys, same order
    assert list(ours["emitted"]) == list(theirs["emitted"])
    for volatile in ("ts", "emitted"):
        ours.pop(volatile), theirs.pop(volatile)
    assert ours == theirs


def test_signal_event_matches_reference_emitter(reference, capsys):
    theirs = _reference_line(reference, capsys, lambda e: e.lifecycle(
        "alert", cursor=40, reason="down", persona="testbot"))
    ours = json.loads(to_ndjson(EventFactory().signal("alert", "testbot", cursor=40, reason="down")))
    assert list(ours) == list(theirs)
    id_form = re.compile(r"\Atestbot:alert:[0-9a-f]{16}-1\Z")
    assert id_form.match(ours["event_id"]) and id_form.match(theirs["event_id"])
    for volatile in ("ts", "emitted", "event_id", "nonce"):
        ours.pop(volatile), theirs.pop(volatile)
    assert ours == theirs


# --- exec environment ----------------------------------------------------------------------------

BASE_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/x",
    "KIJITOMON_TOKEN": "s3cret-token",
    "GITHUB_TOKEN": "gh-token",
    "some_lower_token": "lower-token",
    "KIJITOMON_REASON": "stale reason from an outer process",
    "KIJITOMON_CONTENT": "stale content",
}


def test_exec_env_new_event_fields_and_no_token():
    ev = EventFactory().new("testbot", msg(41, "alice", "body", "2026-01-02T03:04:05Z", urgent=True))
    env = exec_environment(ev, BASE_ENV)
    assert env["PATH"] == "/usr/bin:/bin" and env["HOME"] == "/home/x"
    assert not [name for name in env if name.upper().endswith("_TOKEN")]
    assert not [v for v in env.values() if "token" in v]
    assert "KIJITOMON_REASON" not in env  # a stale value must not pose as this event's
    expected = {
        "KIJITOMON_EVENT": "new", "KIJITOMON_SOURCE": "kijito-inbox", "KIJITOMON_TS": ev["ts"],
        "KIJITOMON_EVENT_ID": "testbot:new:41", "KIJITOMON_NONCE": "JQ8cEkr75LW",
        "KIJITOMON_PERSONA": "testbot", "KIJITOMON_ID": "41", "KIJITOMON_FROM": "alice",
        "KIJITOMON_CONTENT": "body", "KIJITOMON_CREATED": "2026-01-02T03:04:05Z",
        "KIJITOMON_URGENT": "true",
    }
    assert {k: env[k] for k in expected} == expected
    assert "KIJITOMON_CURSOR" not in env
    assert "KIJITOMON_TOKEN" in BASE_ENV  # the caller's mapping is left alone


def test_exec_env_signal_fields():
    ev = EventFactory().signal(
        "alert", "testbot", cursor=40, api_base="https://api.kijito.ai", reason="down",
        consecutive_failures=3, seconds=120, floor_seconds=60, seeded=10, current_max=5,
        capped_to=50, dropped=7, stranded_inboxes=["a", "b"], dormant_inboxes=["c"], ids=[1, 2, 3],
        oldest_age_seconds=3600,
    )
    env = exec_environment(ev, {})
    expected = {
        "KIJITOMON_EVENT": "alert", "KIJITOMON_CURSOR": "40",
        "KIJITOMON_API_BASE": "https://api.kijito.ai", "KIJITOMON_REASON": "down",
        "KIJITOMON_FAILURES": "3", "KIJITOMON_SECONDS": "120", "KIJITOMON_FLOOR_SECONDS": "60",
        "KIJITOMON_SEEDED": "10", "KIJITOMON_CURRENT_MAX": "5", "KIJITOMON_CAPPED_TO": "50",
        "KIJITOMON_DROPPED": "7", "KIJITOMON_STRANDED": "a,b", "KIJITOMON_DORMANT": "c",
        "KIJITOMON_IDS": "1,2,3", "KIJITOMON_OLDEST_AGE": "3600", "KIJITOMON_PERSONA": "testbot",
        "KIJITOMON_EVENT_ID": ev["event_id"], "KIJITOMON_NONCE": ev["nonce"],
    }
    assert {k: env[k] for k in expected} == expected
    assert "KIJITOMON_ID" not in env and "KIJITOMON_URGENT" not in env


def test_exec_env_urgent_false_and_no_content():
    ev = EventFactory().new("p", msg(urgent=False), no_content=True)
    env = exec_environment(ev, {"KIJITOMON_CONTENT": "stale"})
    assert env["KIJITOMON_URGENT"] == "false"
    assert "KIJITOMON_CONTENT" not in env


def test_exec_env_is_usable_by_a_child_for_any_content():
    ev = EventFactory().new("p", msg(sender="s\x00x", content="a\x00b\ud800c"))
    env = exec_environment(ev, {"PATH": "/usr/bin:/bin", "KIJITOMON_TOKEN": "t0k"})
    assert env["KIJITOMON_CONTENT"] == "ab?c"
    assert env["KIJITOMON_FROM"] == "sx"
    out = subprocess.run(
        [sys.executable, "-c",
         "import os; print(os.environ['KIJITOMON_CONTENT'], 'KIJITOMON_TOKEN' in os.environ)"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert out.stdout.split() == ["ab?c", "False"]
