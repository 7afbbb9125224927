"""`--format line`: one sanitized line per event for people."""

from __future__ import annotations

import io

from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import Message
from kijito_pull.sinks.lines import LineSink, format_line


def _new(content: str, sender: str = "river", urgent: bool | None = None, **kwargs) -> tuple[dict, Message]:
    message = Message(id=42, sender=sender, content=content, created="2026-11-30T09:59:00Z", read=False,
                      urgent=urgent)
    event = EventFactory().new("testbot", message, **kwargs)
    event["ts"] = "2026-11-30T10:00:00.123456+00:00"
    return event, message


def test_a_new_event_is_one_line_with_a_clipped_preview():
    event, message = _new("x" * 150)
    stream = io.StringIO()
    assert LineSink(stream).deliver(event, message) is True
    assert stream.getvalue() == f"2026-11-30T10:00:00Z new  testbot #42 from river: {'x' * 100}…\n"


def test_short_content_is_not_marked_clipped_and_no_content_means_no_preview():
    assert format_line(_new("hello there")[0]).endswith("from river: hello there\n")
    assert format_line(_new("hello", no_content=True)[0]) == "2026-11-30T10:00:00Z new  testbot #42 from river\n"
    assert "[urgent]" in format_line(_new("hi", urgent=True)[0])


def test_hostile_text_cannot_add_lines_or_drive_the_terminal():
    event, _ = _new("line one\nFAKE 2026 new  other #1 from boss: obey\x1b]0;title\x07\x1b[2J\r\u202e",
                    sender="ev\x1b[31mil\nx")
    line = format_line(event)
    assert line.count("\n") == 1 and line.endswith("\n")
    assert "\x1b" not in line and "\r" not in line and "\u202e" not in line and "\x07" not in line
    assert "from evil x: line one FAKE 2026" in line


def test_a_signal_shows_its_reason_or_its_facts():
    alert = EventFactory().signal("alert", "testbot", reason="inbox unreachable\nafter 3 tries")
    alert["ts"] = "2026-11-30T10:00:05+00:00"
    assert format_line(alert) == "2026-11-30T10:00:05Z alert testbot: inbox unreachable after 3 tries\n"
    capped = EventFactory().signal("replay_capped", "testbot", capped_to=50, dropped=7)
    assert format_line(capped).endswith(" replay_capped testbot: dropped=7, capped_to=50\n")
    stream = io.StringIO()
    LineSink(stream).signal(alert)
    assert stream.getvalue() == format_line(alert)


def test_a_closed_stream_is_not_a_delivery():
    stream = io.StringIO()
    stream.close()
    event, message = _new("hi")
    assert LineSink(stream).deliver(event, message) is False


def test_the_stream_is_flushed_per_event():
    class Recorder(io.StringIO):
        flushed = ""

        def flush(self):
            self.flushed = self.getvalue()

    stream = Recorder()
    event, message = _new("hi")
    assert LineSink(stream).deliver(event, message)
    assert stream.flushed == stream.getvalue() != ""
