"""`kijito-pull watch` against the sandbox over real HTTP, as a real subprocess."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.clirunner import Cli
from tests.waiting import until
from tests.watchrunner import WatchProc

TOKEN = "watch-token-0b9d"


@pytest.fixture
def watches():
    started: list[WatchProc] = []
    yield started
    for w in started:
        w.kill()


def start(watches, cli, *argv, **kw) -> WatchProc:
    w = WatchProc(cli, *argv, **kw)
    watches.append(w)
    return w


def notify_requests(sb):
    return [r for r in sb.requests if r["path"] == "/api/notify/pending"]


def test_armed_comes_before_the_backlog_it_announces(sb, cli, watches):
    waiting = [sb.send(to="P", sender="Q", content=f"backlog {i}") for i in range(2)]
    w = start(watches, cli, "--persona", "P")
    w.new("backlog 1")
    assert [(e["event"], e.get("id")) for e in w.events[:3]] == [("armed", None), ("new", waiting[0]),
                                                                 ("new", waiting[1])]
    assert w.events[0]["cursor"] is None  # first contact: it starts from no cursor
    w.stop()
    again = start(watches, cli, "--persona", "P")
    assert again.wait_for(lambda e: e["event"] == "armed")["cursor"] == waiting[1]


def test_a_message_sent_during_a_held_long_poll_produces_its_event(sb, cli, watches):
    early = sb.send(to="P", sender="Q", content="waiting before start")
    w = start(watches, cli, "--persona", "P")
    assert w.new("waiting before start")["id"] == early
    w.wait_for(lambda e: e["event"] == "armed")
    time.sleep(0.5)  # the long-poll is now held
    assert any(r["query"].get("wait") == "50" for r in notify_requests(sb))
    sent_at = time.monotonic()
    mid = sb.send(to="P", sender="Q", content="during the hold")
    event = w.new("during the hold", timeout=5)
    assert event["id"] == mid and time.monotonic() - sent_at < 2
    assert event["event_id"] == f"P:new:{mid}"
    assert w.stop() == 0


def test_idle_watch_sends_only_long_polls(sb, cli, watches):
    w = start(watches, cli, "--persona", "A", "--persona", "B", "--persona", "C")
    w.wait_for(lambda e: e["event"] == "armed" and e["persona"] == "C")
    assert until(lambda: any(r["query"].get("wait") for r in notify_requests(sb)))  # armed, pulled, long-polling
    sb.clear_requests()
    mid = sb.send(to="B", sender="Q", content="only B has mail")
    w.new("only B has mail")
    time.sleep(0.3)
    inbox = [r["query"]["persona"] for r in sb.requests if r["path"] == "/api/inbox"]
    assert inbox == ["B"]  # one notify tick, fanned out only to the persona whose count rose
    assert all(r["query"].get("mark_read") == "false" for r in sb.requests if r["path"] == "/api/inbox")
    assert w.new_ids().count(mid) == 1


def test_server_drops_long_poll_mid_run_and_delivery_continues_by_interval(sb, cli, watches):
    w = start(watches, cli, "--persona", "P", "--poll-seconds", "1")
    w.wait_for(lambda e: e["event"] == "armed")
    sb.add_fault({"kind": "mutate", "path": "/api/notify/pending", "delete": ["cursor"]})
    sb.send(to="P", sender="Q", content="ends the hold")
    w.new("ends the hold")
    sb.send(to="P", sender="Q", content="found by interval polling")
    w.new("found by interval polling", timeout=5)
    sb.clear_faults()
    sb.send(to="P", sender="Q", content="after long-poll returns")
    w.new("after long-poll returns", timeout=5)
    assert sorted(w.new_ids()) == w.new_ids() and len(set(w.new_ids())) == len(w.new_ids())


def test_a_cursor_the_server_rejects_is_dropped(sb, cli, watches):
    w = start(watches, cli, "--persona", "P")
    w.wait_for(lambda e: e["event"] == "armed")
    time.sleep(0.3)
    sb.add_fault({"kind": "status", "status": 400, "path": "/api/notify/pending", "times": 1})
    sb.clear_requests()
    sb.send(to="P", sender="Q", content="x")  # ends the held poll; the next one is rejected
    w.new("x")
    time.sleep(2.5)
    after = notify_requests(sb)
    rejected = [i for i, r in enumerate(after) if r["status"] == 400]
    assert rejected, after
    following = after[rejected[0] + 1:]
    assert following and "cursor" not in following[0]["query"]


def test_retry_after_is_honoured(sb, cli, watches):
    w = start(watches, cli, "--persona", "P")
    w.wait_for(lambda e: e["event"] == "armed")
    sb.add_fault({"kind": "status", "status": 503, "path": "/api/notify/pending",
                  "headers": {"Retry-After": "2"}, "times": 1})
    sb.send(to="P", sender="Q", content="x")
    w.new("x")
    time.sleep(3.5)
    stamps = [r["ts"] for r in notify_requests(sb)]
    statuses = [r["status"] for r in notify_requests(sb)]
    i = statuses.index(503)
    assert stamps[i + 1] - stamps[i] >= 1.9


def test_inbox_only_outage_raises_down_and_recovered(sb, cli, watches):
    w = start(watches, cli, "--persona", "P", "--alert-after", "2", "--timeout", "1")
    w.wait_for(lambda e: e["event"] == "armed")
    sb.add_fault({"kind": "status", "status": 500, "path": "/api/inbox"})
    sb.send(to="P", sender="Q", content="during the outage")
    alert = w.wait_for(lambda e: e["event"] == "alert", timeout=20)
    assert alert["persona"] == "P" and alert["consecutive_failures"] == 2 and "inbox" in alert["reason"]
    sb.clear_faults()
    w.new("during the outage", timeout=20)  # retried within seconds, not at a resync floor
    recovered = w.wait_for(lambda e: e["event"] == "recovered", timeout=5)
    assert recovered["persona"] == "P"
    assert w.kinds().count("alert") == 1


def test_an_inbox_outage_at_the_start_is_one_line_an_error_however_many_personas(sb, cli, watches):
    names = [f"crew{n:02d}" for n in range(12)]
    for name in names:
        sb.add_persona(name)
    sb.add_fault({"kind": "status", "status": 500, "path": "/api/inbox"})
    w = start(watches, cli, "--timeout", "1")  # every persona of the account: twelve first pulls fail
    w.wait_for(lambda e: e["event"] == "armed" and e["persona"] == names[-1], timeout=30)
    # the first pulls and a round of retries while the outage lasts
    assert until(lambda: sum("500" in line for line in w.stderr_lines) >= 2, timeout=40), w.stderr_lines
    sent = sb.send(to=names[5], sender="Q", content="after the outage")
    sb.clear_faults()
    w.new("after the outage", timeout=30)
    assert w.stop() == 0
    failing = [line for line in w.stderr_lines if "500" in line]
    assert failing and all("more personas" in line for line in failing), w.stderr_lines
    assert len(failing) <= 4, failing  # one a round of retries, not one per persona
    assert sent in w.new_ids()


def test_a_persona_created_mid_run_gets_its_first_message(sb, cli, watches):
    sb.add_persona("old", memory_count=2)
    w = start(watches, cli)  # no persona named: all personas
    w.wait_for(lambda e: e["event"] == "armed" and e["persona"] == "old")
    mid = sb.send(to="newbie", sender="old", content="welcome aboard")
    added = w.wait_for(lambda e: e["event"] == "persona_added", timeout=5)
    assert added["persona"] == "newbie"
    event = w.new("welcome aboard")
    assert (event["persona"], event["id"]) == ("newbie", mid)


def test_personas_flags_dedupe_case_insensitively_keeping_the_wire_case(sb, cli, watches):
    sb.send(to="Loom", sender="Q", content="for Loom")
    w = start(watches, cli, "--persona", "Loom", "--personas", "loom,river", "--persona", "LOOM")
    w.new("for Loom")
    w.drain(0.5)
    armed = sorted(e["persona"] for e in w.events if e["event"] == "armed")
    assert armed == ["Loom", "river"]


def test_exec_consumer_failing_gets_the_same_message_again(sb, cli, watches, tmp_path):
    log = tmp_path / "exec.log"
    script = tmp_path / "consumer.sh"
    script.write_text(
        '#!/bin/sh\n'
        '[ "$KIJITOMON_EVENT" = new ] || exit 0\n'
        f'echo "$KIJITOMON_EVENT_ID $KIJITOMON_NONCE token=${{KIJITOMON_TOKEN:-none}}" >> {log}\n'
        f'[ "$(grep -c "$KIJITOMON_EVENT_ID" {log})" -ge 2 ]\n')
    script.chmod(0o755)
    mid = sb.send(to="P", sender="Q", content="$(touch /tmp/kijito-pwned) `id`")
    start(watches, cli, "--persona", "P", "--emit", "exec-per-event", "--exec", str(script))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 2):
        time.sleep(0.1)
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]  # same KIJITOMON_EVENT_ID and nonce, token not passed
    assert lines[0].startswith(f"P:new:{mid} ") and lines[0].endswith("token=none")
    assert not os.path.exists("/tmp/kijito-pwned")
    time.sleep(1.5)
    assert len(log.read_text().splitlines()) == 2  # acknowledged by exit 0: not delivered a third time


def test_poison_mail_is_parked_after_max_attempts_and_the_mail_behind_it_flows(sb, cli, watches, tmp_path):
    log = tmp_path / "exec.log"
    cured = tmp_path / "cured"
    script = tmp_path / "consumer.sh"
    script.write_text(
        '#!/bin/sh\n'
        f'echo "$KIJITOMON_EVENT $KIJITOMON_ID $KIJITOMON_CONTENT$KIJITOMON_REASON" >> {log}\n'
        f'case "$KIJITOMON_CONTENT" in poison*) [ -e {cured} ] ;; *) exit 0 ;; esac\n')
    script.chmod(0o755)
    poison = sb.send(to="P", sender="Q", content="poison: this consumer cannot take me")
    behind = sb.send(to="P", sender="Q", content="fine: the mail behind it")
    start(watches, cli, "--persona", "P", "--emit", "exec-per-event", "--exec", str(script), "--max-attempts", "3")

    def lines() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and f"new {behind} fine: the mail behind it" not in lines():
        time.sleep(0.1)
    assert lines().count(f"new {poison} poison: this consumer cannot take me") == 3  # refused 3 times, then parked
    assert f"new {behind} fine: the mail behind it" in lines()
    assert any(line.startswith("alert ") and "parked" in line for line in lines())
    [row] = [json.loads(line) for line in cli("parked", "--json").stdout.splitlines()]
    assert (row["persona"], row["id"], row["attempts"], row["retry"]) == ("P", poison, 3, False)
    assert f"message {poison} parked" in cli("parked").stdout
    cured.touch()
    assert cli("parked", "--retry", str(poison), "--persona", "P", "--consumer", "agent").code == 0
    sb.send(to="P", sender="Q", content="fine: a wake-up for the watch")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and lines().count(f"new {poison} poison: this consumer cannot take me") < 4:
        time.sleep(0.1)
    assert lines().count(f"new {poison} poison: this consumer cannot take me") == 4  # handed over again, taken
    time.sleep(0.5)
    assert cli("parked", "--json").stdout == ""


def test_max_attempts_0_holds_the_cursor_on_poison_mail_as_before(sb, cli, watches, tmp_path):
    log = tmp_path / "exec.log"
    script = tmp_path / "consumer.sh"
    script.write_text(f'#!/bin/sh\necho "$KIJITOMON_EVENT $KIJITOMON_ID" >> {log}\n'
                      '[ "$KIJITOMON_EVENT" != new ] || [ "$KIJITOMON_CONTENT" != poison ]\n')
    script.chmod(0o755)
    poison = sb.send(to="P", sender="Q", content="poison")
    behind = sb.send(to="P", sender="Q", content="fine")
    start(watches, cli, "--persona", "P", "--emit", "exec-per-event", "--exec", str(script), "--max-attempts", "0")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not log.exists() or log.read_text().count(f"new {poison}") < 3):
        time.sleep(0.1)
    text = log.read_text()
    assert text.count(f"new {poison}") >= 3 and f"new {behind}" not in text  # held, retried, never passed
    assert cli("parked", "--json").stdout == ""


def test_parked_retry_of_a_message_that_is_not_parked_says_so(sb, cli):
    result = cli("parked", "--retry", "99", "--persona", "P")
    assert result.code == 1 and "not parked" in result.stderr
    assert cli("parked", "--retry", "99").code == 2  # which cursor? a persona is needed


def test_events_file_rotation_under_tail_loses_no_line(sb, cli, watches, tmp_path):
    """Every line is in the events file or one of its rotated copies, once (the guarantee); and `tail -F`,
    as the docs suggest, follows the file across its rotations. tail reopens the new file without reading
    the old one to its end, so a tail that is behind at a rotation skips what it had not read yet
    (measured under load; docs/configuration.md says so): what tail shows is checked for order, no
    repeats and reaching past the rotations, not for completeness."""
    events = tmp_path / "events.ndjson"
    w = start(watches, cli, "--persona", "P", "--events-file", str(events), "--max-bytes", "3000", "--keep-logs", "50")
    deadline = time.monotonic() + 10
    while not events.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    tail = subprocess.Popen(["tail", "-F", "-n", "+1", str(events)], stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL)
    lines = _LineReader(tail.stdout)
    try:
        sent: list[int] = []
        got: list[int] = []
        for burst in range(6):
            sent += [sb.send(to="P", sender="Q", content=f"line {burst}-{i} " + "z" * 150) for i in range(10)]
            deadline = time.monotonic() + 20
            while sent[-1] not in got and time.monotonic() < deadline:  # tail reached the burst's end
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                if line is None:
                    break
                event = json.loads(line)
                if event["event"] == "new":
                    got.append(event["id"])
        written = [json.loads(line)["id"] for f in sorted(tmp_path.glob("events.ndjson*"))
                   for line in f.read_text().splitlines() if '"event": "new"' in line]
        assert sorted(written) == sent  # in the files: every one, once
        assert got == sorted(set(got)) and set(got) <= set(sent)  # through tail -F: in order, never twice
        assert sent[-1] in got  # ... and it followed the file past every rotation
        assert len(list(tmp_path.glob("events.ndjson.*"))) >= 2  # it really rotated
        assert oct(os.stat(events).st_mode & 0o777) == "0o600"
    finally:
        tail.kill()
    assert w.stop() == 0


class _LineReader:
    """Lines of a pipe, read on a thread, so a test waits for one with a timeout instead of forever."""

    def __init__(self, stream):
        self.queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.queue.put(line)

    def get(self, timeout: float) -> str | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None


def test_per_persona_events_files(sb, cli, watches, tmp_path):
    template = str(tmp_path / "ev" / "{persona}.ndjson")
    sb.send(to="a", sender="Q", content="to a")
    sb.send(to="b", sender="Q", content="to b")
    start(watches, cli, "--persona", "a", "--persona", "b", "--events-file-template", template)
    deadline = time.monotonic() + 10
    files = {}
    while time.monotonic() < deadline:
        files = {p.name: p.read_text() for p in (tmp_path / "ev").glob("*.ndjson")}
        if sum(t.count('"event": "new"') for t in files.values()) >= 2:
            break
        time.sleep(0.1)
    contents = {json.loads(line)["persona"]: json.loads(line).get("content")
                for text in files.values() for line in text.splitlines() if '"new"' in line}
    assert contents == {"a": "to a", "b": "to b"}
    assert len(files) == 2


def test_format_line_is_for_people(sb, cli, watches):
    sb.send(to="P", sender="river", content="\x1b[2Jhello\nworld")
    w = start(watches, cli, "--persona", "P", "--format", "line")
    assert "armed" in w.lines.get(timeout=10)
    line = w.lines.get(timeout=10)
    assert "river" in line and "hello" in line and "\x1b" not in line and line.count("\n") == 1


def test_ack_stdin_protocol_holds_until_acknowledged(sb, cli, watches):
    first = sb.send(to="P", sender="Q", content="one")
    second = sb.send(to="P", sender="Q", content="two")
    w = start(watches, cli, "--persona", "P", "--ack-stdin", stdin=True)
    event = w.new("one")
    time.sleep(0.5)
    assert w.new_ids() == [first]  # the second waits for the first's acknowledgement
    w.send_line({"nack": event["event_id"]})
    time.sleep(0.3)
    w.send_line({"sweep": True})
    again = w.wait_for(lambda e: e["event"] == "new" and len(w.new_ids()) == 2, timeout=10)
    assert again["id"] == first  # not taken: handed over again
    w.send_line({"ack": again["event_id"]})
    nxt = w.new("two")
    w.send_line({"ack": nxt["event_id"]})
    assert nxt["id"] == second
    w.proc.stdin.close()  # the controller went away: watch ends by itself
    assert w.proc.wait(10) == 0
    assert cli("--once", "--json", "--persona", "P").new_ids == []


def test_ack_stdin_waits_without_the_cursor_lock_and_holds_the_message_for_its_session(sb, cli, watches):
    """While the controller has not confirmed a message, other pullers of the same cursor neither wait
    for the lock nor get that message; mail the child does not hold flows to them as usual."""
    first = sb.send(to="P", sender="Q", content="held")
    w = start(watches, cli, "--persona", "P", "--ack-stdin", stdin=True)
    event = w.new("held")
    started = time.monotonic()
    other = cli("--once", "--json", "--persona", "P", "--lock-timeout", "1")
    assert other.code == 0 and time.monotonic() - started < 5
    assert first not in other.new_ids  # pending with the child's session: not handed over twice
    status = json.loads(cli("status", "--json").stdout.splitlines()[0])
    assert status["cursor"] < first  # nor passed by the cursor
    w.send_line({"ack": event["event_id"]})
    w.proc.stdin.close()
    assert w.proc.wait(10) == 0
    assert cli("--once", "--json", "--persona", "P").new_ids == []


def test_ack_stdin_child_killed_while_it_waits_loses_nothing(sb, cli, watches):
    mid = sb.send(to="P", sender="Q", content="in flight")
    w = start(watches, cli, "--persona", "P", "--ack-stdin", stdin=True)
    w.new("in flight")
    w.proc.kill()  # shown to nobody: its hand-over dies with it
    w.proc.wait(10)
    assert cli("--once", "--json", "--persona", "P").new_ids == [mid]


def test_heartbeat_and_clean_signals(sb, cli, watches):
    w = start(watches, cli, "--persona", "P", "--heartbeat", "1")
    beat = w.wait_for(lambda e: e["event"] == "heartbeat", timeout=5)
    assert beat["wake_class"] == "liveness" and beat["persona"] == "P"
    w.proc.send_signal(signal.SIGHUP)
    sb.send(to="P", sender="Q", content="after hup")
    w.new("after hup")
    started = time.monotonic()
    assert w.stop(signal.SIGINT) == 130 and time.monotonic() - started < 3  # Ctrl-C: 130, as documented
    assert "kijito-pull: interrupted" in "".join(w.stderr_lines) and "Traceback" not in "".join(w.stderr_lines)


def test_sigterm_is_a_clean_stop_with_status_0(sb, cli, watches):
    w = start(watches, cli, "--persona", "P")
    w.wait_for(lambda e: e["event"] == "armed")
    assert w.stop(signal.SIGTERM) == 0


def test_stranded_mail_alarm_and_its_own_silencer(sb, cli, watches):
    sb.add_persona("Loom", memory_count=3)
    sb.add_persona("river", memory_count=1)
    w = start(watches, cli, "--persona", "river")
    w.wait_for(lambda e: e["event"] == "armed")
    sb.send(to="loom", sender="river", content="lost in a case variant")
    alert = w.wait_for(lambda e: e["event"] == "alert" and "stranded" in e["reason"], timeout=5)
    assert alert["stranded_inboxes"] == ["loom"] and "case variant of 'Loom'" in alert["reason"]
    silenced = start(watches, Cli(sb.url, TOKEN, cli.state_dir.parent / "s2"), "--persona", "river",
                     "--no-stranded-alerts", "--urgent-after", "1")
    sb.send(to="loom", sender="river", content="urgent!", urgent=True)
    urgent = silenced.wait_for(lambda e: e["event"] == "alert" and "urgent" in e["reason"], timeout=8)
    assert urgent["urgent_inboxes"] == ["loom"]
    assert not [e for e in silenced.events if e["event"] == "alert" and "stranded" in e["reason"]]


def test_mail_that_consumers_already_delivered_is_not_called_stranded(sb, cli, watches):
    sb.add_persona("Loom", memory_count=3)
    sb.add_persona("river", memory_count=1)
    sb.send(to="loom", sender="river", content="delivered twice")
    assert cli("--once", "--json", "--persona", "loom").new_ids  # two consumers took it; the server's
    assert cli("--once", "--json", "--persona", "loom", "--consumer", "script").new_ids  # unread flag stays
    w = start(watches, cli, "--persona", "river", "--wait", "1")
    w.wait_for(lambda e: e["event"] == "armed")
    assert until(lambda: len(notify_requests(sb)) >= 4)  # several answers judged, loom's unread count among them
    assert not [e for e in w.events if e["event"] == "alert" and "stranded" in e["reason"]]
    sb.send(to="loom", sender="river", content="nobody took this one")
    alert = w.wait_for(lambda e: e["event"] == "alert" and "stranded" in e["reason"], timeout=8)
    assert alert["stranded_inboxes"] == ["loom"]
    assert cli("--once", "--json", "--persona", "loom", "--consumer", "script").new_ids  # now someone took it
    recovered = w.wait_for(lambda e: e["event"] == "recovered" and "stranded" in e["reason"], timeout=8)
    assert recovered["stranded_inboxes"] == []


def test_self_test_passes_and_fails_honestly(sb, cli, tmp_path):
    ok = cli.run("watch", "--persona", "P", "--self-test")
    assert ok.code == 0, ok.stderr
    assert [e["event"] for e in ok.events] == ["heartbeat"] and ok.events[0]["self_test"] is True
    bad_sink = cli.run("watch", "--persona", "P", "--self-test", "--emit", "exec-per-event", "--exec", "exit 3")
    assert bad_sink.code == 1 and "sink" in bad_sink.stderr
    sb.add_fault({"kind": "status", "status": 500, "path": "/api/inbox"})
    down = cli.run("watch", "--persona", "P", "--self-test", "--timeout", "0.5")
    assert down.code == 1 and "P:" in down.stderr


def test_seed_at_sets_the_cursor(sb, cli, watches):
    ids = [sb.send(to="P", sender="Q", content=f"m{i}") for i in range(4)]
    w = start(watches, cli, "--persona", "P", "--seed-at", str(ids[1]))
    assert w.new("m2")["id"] == ids[2]
    w.new("m3")
    w.drain(0.5)
    assert w.new_ids() == ids[2:]
    w.stop()
    ahead = start(watches, Cli(sb.url, TOKEN, cli.state_dir.parent / "s3"), "--persona", "P", "--seed-at", "999")
    event = ahead.wait_for(lambda e: e["event"] == "seed_ahead")
    assert (event["seeded"], event["current_max"]) == (999, ids[-1])


def test_watch_and_once_share_one_cursor(sb, cli, watches):
    w = start(watches, cli, "--persona", "P")
    w.wait_for(lambda e: e["event"] == "armed")
    mid = sb.send(to="P", sender="Q", content="exactly once")
    w.new("exactly once")
    assert cli("--once", "--json", "--persona", "P").new_ids == []
    assert w.new_ids() == [mid]


def test_watch_help_and_usage_errors(cli):
    assert cli("watch", "--help").code == 0
    assert cli("watch", "--persona", "P", "--emit", "exec-per-event").code == 2
    assert cli("watch", "--persona", "P", "--events-file-template", "/tmp/no-placeholder").code == 2
    assert cli("watch", "--persona", "../x").code == 2
    fleet = cli("watch", "--source", "redis://127.0.0.1:9/0")  # nothing is started, Redis never asked
    assert fleet.code == 2 and "watch --source needs --persona" in fleet.stderr
    assert len(fleet.stderr.splitlines()) == 1


@pytest.mark.parametrize("system", ["systemd", "launchd"])
def test_supervision_templates_run_their_self_test(sb, cli, tmp_path, system):
    """The rendered unit's command line is the CLI's: run it, as the supervisor would, with --self-test."""
    from kijito_pull.harnesses.daemon import supervision

    command = [sys.executable, "-m", "kijito_pull"]
    argv = supervision.rendered_watch_argv(command, "P", str(tmp_path), system=system)
    rendered = supervision.render_systemd(command) if system == "systemd" else supervision.render_launchd(
        command, "P", str(tmp_path))
    assert TOKEN not in rendered
    concrete = [a.replace("%i", "P").replace("%h", str(tmp_path)) for a in argv]
    token_file = Path(concrete[concrete.index("--token-file") + 1])
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    env = {k: v for k, v in cli.environ.items() if k != "KIJITOMON_TOKEN"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    result = subprocess.run([*concrete, "--api-base", sb.url, "--self-test"], env=env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, (concrete, result.stderr)
    assert "self-test passed" in result.stderr


def test_one_personas_failure_is_contained_to_that_persona(sb, cli, watches):
    w = start(watches, cli, "--persona", "A", "--persona", "B", "--alert-after", "1", "--timeout", "1")
    w.wait_for(lambda e: e["event"] == "armed" and e["persona"] == "B")
    sb.add_fault({"kind": "status", "status": 500, "path": "/api/inbox", "persona": "A"})
    sb.send(to="A", sender="Q", content="for broken A")
    sb.send(to="B", sender="Q", content="for healthy B")
    assert w.new("for healthy B")["persona"] == "B"
    alert = w.wait_for(lambda e: e["event"] == "alert", timeout=10)
    assert alert["persona"] == "A"
    sb.clear_faults()
    assert w.new("for broken A", timeout=20)["persona"] == "A"


def test_rediscovery_adopts_a_new_directory_persona(sb, cli, watches):
    sb.add_persona("first", memory_count=1)
    w = start(watches, cli, "--all-personas", "--rediscover-every", "1")
    w.wait_for(lambda e: e["event"] == "armed" and e["persona"] == "first")
    sb.add_persona("second", memory_count=1)
    added = w.wait_for(lambda e: e["event"] == "persona_added", timeout=5)
    assert added["persona"] == "second"
    sb.send(to="second", sender="first", content="hello second")
    assert w.new("hello second")["persona"] == "second"


def test_content_options_and_suppressed_authors(sb, cli, watches):
    sb.send(to="P", sender="bot", content="from the bot")
    sb.send(to="P", sender="Q", content="abcdefghij" * 10)
    w = start(watches, cli, "--persona", "P", "--content-chars", "12", "--suppress-author", "bot")
    event = w.wait_for(lambda e: e["event"] == "new")
    assert event["from"] == "Q" and event["content"] == "abcdefghijab"
    w.stop()
    sb.send(to="P", sender="Q", content="secret")
    opaque = start(watches, cli, "--persona", "P", "--no-content")
    event = opaque.wait_for(lambda e: e["event"] == "new")
    assert "content" not in event and event["from"] == "Q"


def test_a_stale_empty_read_after_a_count_rise_is_read_again(sb, cli, watches):
    w = start(watches, cli, "--persona", "P")
    w.wait_for(lambda e: e["event"] == "armed")
    # The next inbox read answers "nothing" although the count rose (a lagging replica).
    sb.add_fault({"kind": "mutate", "path": "/api/inbox", "times": 1,
                  "set": {"result": [], "truncated": False, "next_before_id": None}})
    mid = sb.send(to="P", sender="Q", content="behind a stale read")
    assert w.new("behind a stale read", timeout=8)["id"] == mid
