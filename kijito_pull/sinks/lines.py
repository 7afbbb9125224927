"""`--format line`: one short readable line per event, for a person watching a terminal or a log.

    2026-11-30T10:00:00Z new  testbot #42 from river: first 100 characters of the content…
    2026-11-30T10:00:05Z alert testbot: inbox unreachable after 3 attempts

Every field is sanitized and flattened to one line: a sender must not be able to drive the terminal
or fake a second line. The line is a preview; `kijito-pull show ID` prints the whole message.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import IO

from kijito_pull.core import render
from kijito_pull.core.models import Message
from kijito_pull.core.sink import Sink

PREVIEW_CHARS = 100
_FIELD_CHARS = 120
_DETAIL_KEYS = ("seeded", "dropped", "capped_to", "redelivered", "current_max", "stranded_inboxes",
                "ids", "consecutive_failures", "seconds")


def _flat(value: object, limit: int = _FIELD_CHARS) -> str:
    text = " ".join(render.sanitize(str(value)).split())
    return text if len(text) <= limit else text[:limit] + "…"


def _when(event: dict) -> str:
    raw = event.get("ts")
    try:
        stamp = datetime.fromisoformat(str(raw))
    except ValueError:
        return _flat(raw, 40) if raw else datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _detail(event: dict) -> str:
    if event.get("reason"):
        return _flat(event["reason"], 300)
    parts = []
    for key in _DETAIL_KEYS:
        value = event.get(key)
        if value is not None:
            shown = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value
            parts.append(f"{key}={shown}")
    return _flat(", ".join(parts), 300)


def format_line(event: dict) -> str:
    """The one line (with its newline) shown for an event."""
    kind = _flat(event.get("event", "?"), 30)
    head = f"{_when(event)} {kind:<4} {_flat(event.get('persona') or '-')}"
    if kind == "new":
        line = f"{head} #{_flat(event.get('id'), 30)} from {_flat(event.get('from') or '?')}"
        if event.get("urgent"):
            line += " [urgent]"
        if "content" in event:
            line += ": " + _flat(event.get("content") or "", PREVIEW_CHARS)
        return line + "\n"
    detail = _detail(event)
    return f"{head}: {detail}\n" if detail else f"{head}\n"


def _write(stream: IO[str], text: str) -> bool:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        return False
    return True


class LineSink(Sink):
    """`--format line`: one readable line per event on a stream."""

    def __init__(self, stream: IO[str]):
        self.stream = stream

    def signal(self, event: dict) -> None:
        _write(self.stream, format_line(event))

    def deliver(self, event: dict, message: Message) -> bool:
        return _write(self.stream, format_line(event))
