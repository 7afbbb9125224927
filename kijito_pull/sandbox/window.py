"""The inbox window rule, as a pure function: which of the newest rows fit, and what was withheld.

Walk newest -> oldest. A row is taken while the count limit has room and its UTF-8 content fits the
remaining byte budget. A row that does not fit stops the walk, except when nothing has been taken
yet: then it is taken with its content clipped to the budget (`size_truncated`). Rows withheld at
the stop are split into `size_dropped` (as many as the count limit would still have allowed) and
`truncated` (any beyond those, withheld by count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Window:
    """The rows one inbox answer returns, newest first, and what the window's limits cut from it."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # newest first, as taken
    truncated: bool = False
    size_dropped: int = 0
    size_truncated: bool = False

    @property
    def ids(self) -> list[int]:
        return [r["id"] for r in self.rows]

    @property
    def withheld(self) -> bool:
        return self.truncated or self.size_dropped > 0

    @property
    def next_before_id(self):
        return min(self.ids) if self.withheld and self.rows else None


def clip_utf8(text: str, budget: int) -> str:
    """The longest prefix of `text` whose UTF-8 encoding fits in `budget` bytes."""
    return text.encode("utf-8")[: max(0, budget)].decode("utf-8", "ignore")


def compute_window(rows: list[dict[str, Any]], total: int, limit: int, budget: int) -> Window:
    """`rows`: candidate rows newest first (at least `limit + 1` of them when that many exist);
    `total`: how many candidate rows exist in all (older ones need not be in `rows`)."""
    win = Window()
    remaining = budget
    for index, row in enumerate(rows):
        if len(win.rows) >= limit:
            win.truncated = total - index > 0
            return win
        size = len(row["content"].encode("utf-8"))
        if size <= remaining:
            win.rows.append(dict(row))
            remaining -= size
            continue
        if not win.rows:
            clipped = dict(row)
            clipped["content"] = clip_utf8(row["content"], remaining)
            win.rows.append(clipped)
            win.size_truncated = True
            remaining = 0
            continue
        left = total - index
        win.size_dropped = min(limit - len(win.rows), left)
        win.truncated = left > win.size_dropped
        return win
    # Every fetched row was taken; anything older than what was fetched is withheld by count.
    win.truncated = total > len(rows)
    return win
