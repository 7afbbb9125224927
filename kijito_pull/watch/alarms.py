"""Edge-triggered, self-clearing alarms: each condition is announced once when it starts and once when it ends.

Repeating an unchanged condition every tick would train people to ignore the stream; never announcing
its end would leave them guessing. Each alarm returns the event fields to emit, or None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Health:
    """A source is DOWN after `alert_after` consecutive failures, and `recovered` on its next success."""

    alert_after: int
    failures: int = 0
    down: bool = False

    def failure(self, reason: str) -> dict[str, Any] | None:
        self.failures += 1
        if not self.down and self.failures >= self.alert_after:
            self.down = True
            return {"kind": "alert", "reason": reason, "consecutive_failures": self.failures}
        return None

    def success(self, what: str) -> dict[str, Any] | None:
        was_down, failures = self.down, self.failures
        self.failures, self.down = 0, False
        if was_down:
            return {"kind": "recovered", "reason": f"{what} answers again after {failures} failures",
                    "consecutive_failures": 0}
        return None


@dataclass
class SetAlarm:
    """Alarms on a set of names (stranded inboxes, unanswered urgent mail): alert when it changes to a
    non-empty set, recover when it empties."""

    label: str
    field_name: str
    current: frozenset[str] = field(default_factory=frozenset)

    def update(self, names: set[str], detail: str = "") -> dict[str, Any] | None:
        new = frozenset(names)
        if new == self.current:
            return None
        before, self.current = self.current, new
        if new:
            return {"kind": "alert", "reason": f"{self.label}: {', '.join(sorted(new))}{detail}",
                    self.field_name: sorted(new)}
        if before:
            return {"kind": "recovered", "reason": f"{self.label}: none any more", self.field_name: []}
        return None


def stranded(counts: dict[str, int], directory: dict[str, int | None]) -> tuple[set[str], str]:
    """Inboxes holding unread mail that no persona will read: not in the directory, or owning no memories.

    Returns the names and a detail naming case variants (`Loom` has mail, the directory knows `loom`),
    the commonest way mail strands, since the server's inbox namespace is case-sensitive.
    """
    folded = {name.casefold(): name for name in directory}
    out: set[str] = set()
    variants = []
    for persona, unread in counts.items():
        if unread <= 0:
            continue
        if persona not in directory:
            out.add(persona)
            twin = folded.get(persona.casefold())
            if twin:
                variants.append(f"{persona!r} is a case variant of {twin!r}")
        elif directory[persona] == 0:
            out.add(persona)
    return out, (" (" + "; ".join(variants) + ")") if variants else ""
