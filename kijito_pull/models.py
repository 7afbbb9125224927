"""Typed values that cross layer boundaries: what the server said, parsed strictly once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    """One inbox row. `sender` is the wire field `from` (a Python keyword)."""

    id: int
    sender: str
    content: str
    created: str
    read: bool
    urgent: bool | None = None
