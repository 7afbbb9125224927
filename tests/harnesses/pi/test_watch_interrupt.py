"""`kijito-pull watch --ack-stdin --interrupt POLICY`, the real CLI against the sandbox over HTTP: the pi
extension's child marks each message steer or followUp by the project's policy and the sender's urgency."""

from __future__ import annotations

import pytest

from tests.waiting import until
from tests.watchrunner import WatchProc

TOKEN = "pi-interrupt-token-5c1e"


@pytest.fixture
def watches():
    started: list[WatchProc] = []
    yield started
    for w in started:
        w.kill()


@pytest.mark.parametrize("policy,expected", [
    ("all", ["steer", "steer"]),
    # The inbox rows do not say which message is urgent (kijito-api.md: urgency is evidenced only on
    # notify/pending and send; the sandbox serves rows as documented), and mail whose urgency is not
    # stated counts as not urgent. The urgent row -> steer mapping is proven in test_acksink.py.
    ("urgent", ["followUp", "followUp"]),
    ("turn-end", ["followUp", "followUp"]),
])
def test_each_new_line_says_how_pi_takes_it(sb, cli, watches, policy, expected) -> None:
    plain = sb.send(to="P", sender="Q", content="plain news")
    urgent = sb.send(to="P", sender="Q", content="build is red", urgent=True)
    w = WatchProc(cli, "--persona", "P", "--ack-stdin", "--interrupt", policy, stdin=True)
    watches.append(w)
    got = []
    for body in ("plain news", "build is red"):
        event = w.new(body)
        got.append(event["deliver_as"])
        w.send_line({"ack": event["event_id"]})
    assert got == expected
    assert w.new_ids() == [plain, urgent]


def test_without_the_flag_lines_have_no_deliver_as(sb, cli, watches) -> None:
    sb.send(to="P", sender="Q", content="hello", urgent=True)
    w = WatchProc(cli, "--persona", "P", "--ack-stdin", stdin=True)
    watches.append(w)
    event = w.new("hello")
    assert "deliver_as" not in event and "text" in event
    w.send_line({"ack": event["event_id"]})


def test_interrupt_needs_ack_stdin_and_a_known_policy(cli) -> None:
    ran = cli("watch", "--persona", "P", "--interrupt", "all")
    assert ran.code == 2 and "--interrupt needs --ack-stdin" in ran.stderr
    ran = cli("watch", "--persona", "P", "--ack-stdin", "--interrupt", "sometimes")
    assert ran.code == 2 and "invalid choice" in ran.stderr


def test_under_urgent_the_rise_of_the_urgent_count_lets_urgent_mail_steer(sb, cli, watches) -> None:
    """Rows carry no flag, notify/pending's unread_urgent does: mail arriving with a rise of it steers."""
    w = WatchProc(cli, "--persona", "P", "--ack-stdin", "--interrupt", "urgent", "--wait", "2", stdin=True)
    watches.append(w)
    w.wait_for(lambda e: e["event"] == "armed")
    assert until(lambda: any(r["query"].get("wait") for r in sb.requests if r["path"] == "/api/notify/pending"))
    got = {}
    for body, urgent in (("plain news", False), ("build is red", True), ("all green", False)):
        sb.send(to="P", sender="Q", content=body, urgent=urgent)
        event = w.new(body)
        got[body] = (event["deliver_as"], "marked this message urgent" in event["text"])
        w.send_line({"ack": event["event_id"]})
    assert got == {"plain news": ("followUp", False), "build is red": ("steer", True), "all green": ("followUp", False)}
