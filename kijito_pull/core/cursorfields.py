"""The fields of a cursor state file, parsed strictly (core/state.py reads and writes the file): the
remembered recent ids with their fingerprints, the refusal counts, the parked mail. Standard library only.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

#: How many accounted ids at or below the cursor are remembered, so an id that becomes visible late
#: (taken before higher ids, committed after they were delivered) is still delivered: docs/delivery.md.
RECENT_LIMIT = 128

#: Every id the contract accepts fits (MAX_ID has 19 digits); the engine never lets a larger one in.
_RECENT_ITEM = re.compile(r"(-?\d{1,19}):([0-9a-f]{8})")


def parse_recent(raw: Any, cursor: int | None) -> dict[int, str] | None:
    """The `recent` string of a state file ("id:fingerprint ..."), or None when it is malformed."""
    if not isinstance(raw, str):
        return None
    items = raw.split()
    if len(items) > RECENT_LIMIT or (items and cursor is None):
        return None
    out: dict[int, str] = {}
    for item in items:
        match = _RECENT_ITEM.fullmatch(item)
        if match is None or int(match.group(1)) > cursor:
            return None
        out[int(match.group(1))] = match.group(2)
    return dict(sorted(out.items()))


MAX_PARKED = 10_000


def is_id(key: Any) -> bool:
    """A JSON object key that spells an id (a state file keys its maps by id)."""
    return isinstance(key, str) and key.lstrip("-").isdigit() and len(key) <= 20


def parse_failures(raw: Any) -> dict[int, int]:
    """The `failures` object of a state file (id -> refusals); ValueError when it is malformed."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or len(raw) > MAX_PARKED or not all(
            is_id(k) and isinstance(v, int) and not isinstance(v, bool) and v > 0 for k, v in raw.items()):
        raise ValueError("the state file's failure counts are malformed")
    return {int(k): v for k, v in sorted(raw.items(), key=lambda kv: int(kv[0]))}


def parse_parked(raw: Any) -> dict[int, dict[str, Any]]:
    """The `parked` object of a state file (id -> its record); ValueError when it is malformed."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or len(raw) > MAX_PARKED:
        raise ValueError("the state file's parked mail is malformed")
    out = {}
    for k, v in raw.items():
        if not (is_id(k) and isinstance(v, dict) and isinstance(v.get("since"), str)
                and isinstance(v.get("attempts"), int) and isinstance(v.get("retry", False), bool)):
            raise ValueError("the state file's parked mail is malformed")
        out[int(k)] = {"since": v["since"], "attempts": v["attempts"], "retry": v.get("retry", False),
                       **({"reason": v["reason"]} if isinstance(v.get("reason"), str) else {})}
    return dict(sorted(out.items()))


def fingerprint(sender: str, created: str, content: str) -> str:
    """A short digest of who sent a message, when, and how it begins (a server clips only the end of a
    body): a reused id carries another one."""
    text = f"{sender}\0{created}\0{content[:32]}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
