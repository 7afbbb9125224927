"""`watch --ack-stdin` puts the model rendering of each message on its `new` event (the pi extension
hands that `text` to the model as is), and leaves every other event and mode alone."""

from __future__ import annotations

import io
import json
import queue

from kijito_pull.core import render
from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import Message
from kijito_pull.harnesses.pi.acksink import AckSink, StdinCommands


def _sink(out: io.StringIO, answer: str) -> AckSink:
    commands = StdinCommands(io.StringIO(""), queue.Queue())
    commands.acks.put(("ack", answer))
    return AckSink(out, commands, timeout=1.0, errors=io.StringIO())


def test_new_event_carries_text_rendered_for_a_model() -> None:
    body = "hello \x1b]0;pwned\x07there\n" + "x" * 5000
    message = Message(id=41, sender="loom", content=body, created="2026-01-01T00:00:00Z", read=False)
    event = EventFactory().new("river", message, content_chars=220)
    out = io.StringIO()
    assert _sink(out, event["event_id"]).deliver(event, message) is True
    line = json.loads(out.getvalue())
    assert line["text"] == render.for_model("river", [message])
    assert "\x1b" not in line["text"] and "kijito-pull show 41 --persona river" in line["text"]
    assert len(line["content"]) == 220  # the raw, clipped field is unchanged
    assert "text" not in event  # the caller's event is not mutated


def test_no_text_without_content_or_for_signals() -> None:
    message = Message(id=42, sender="loom", content="secret", created="2026-01-01T00:00:00Z", read=False)
    factory = EventFactory()
    event = factory.new("river", message, no_content=True)
    out = io.StringIO()
    assert _sink(out, event["event_id"]).deliver(event, message) is True
    assert "text" not in json.loads(out.getvalue())
    out = io.StringIO()
    AckSink(out, StdinCommands(io.StringIO(""), queue.Queue())).signal(factory.signal("armed", "river"))
    assert "text" not in json.loads(out.getvalue())


def test_a_deeply_nested_control_line_is_reported_not_fatal():
    import io
    import queue

    from kijito_pull.core.sink import PULL_NOW
    from kijito_pull.harnesses.pi.acksink import StdinCommands

    loop: queue.Queue = queue.Queue()
    errors = io.StringIO()
    commands = StdinCommands(io.StringIO("[" * 100000 + "\n" + '{"sweep": true}\n'), loop, errors)
    commands.run()
    assert "malformed control line" in errors.getvalue()
    assert loop.get_nowait() == PULL_NOW  # the line after it is still obeyed


# -- the interrupt policy: deliver_as on each `new` line ---------------------------------------------------


def _line(interrupt, urgent) -> dict:
    message = Message(id=7, sender="loom", content="build is red", created="2026-01-01T00:00:00Z", read=False,
                      urgent=urgent)
    event = EventFactory().new("river", message, content_chars=220)
    out = io.StringIO()
    commands = StdinCommands(io.StringIO(""), queue.Queue())
    commands.acks.put(("ack", event["event_id"]))
    assert AckSink(out, commands, timeout=1.0, errors=io.StringIO(), interrupt=interrupt).deliver(event, message)
    return json.loads(out.getvalue())


def test_deliver_as_follows_the_interrupt_policy_and_the_message_urgency() -> None:
    expected = {
        ("all", True): "steer", ("all", False): "steer", ("all", None): "steer",
        ("urgent", True): "steer", ("urgent", False): "followUp", ("urgent", None): "followUp",  # unstated: not urgent
        ("turn-end", True): "followUp", ("turn-end", False): "followUp", ("turn-end", None): "followUp",
    }
    got = {key: _line(*key)["deliver_as"] for key in expected}
    assert got == expected


def test_no_policy_no_deliver_as_and_signals_never_carry_it() -> None:
    assert "deliver_as" not in _line(None, True)  # an older extension's child: the extension decides
    out = io.StringIO()
    AckSink(out, StdinCommands(io.StringIO(""), queue.Queue()), interrupt="all").signal(
        EventFactory().signal("armed", "river"))
    assert "deliver_as" not in json.loads(out.getvalue())
