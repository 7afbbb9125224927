"""Urgent mail, which the Kijito API states only as a count.

Inbox rows carry no urgent flag (a server may add one: `Message.urgent`); `GET /api/notify/pending`
counts each persona's unread mail that a sender marked urgent (`unread_urgent`). So urgency is known of
a batch, not of a message, in two ways:

- `rise`: between two answers the count rose by N, so N urgent messages arrived since the first; they
  are among the mail the next pull of that persona finds (watch, the Claude waker and pusher). Under
  the `inbox interrupt: urgent` policy that lets the batch through mid-turn.
- `among`: within one answer, by counting (`--once`, through `count_among`, which asks for the answer):
  the unread mail outside the batch cannot hold more urgent messages than it has messages, so at least
  `unread_urgent - (unread - unread in the batch)` of the batch are urgent. kijito-pull's peeks never
  clear the server's unread flags, so old urgent mail makes this bound weak (often 0), never wrong.

`note` is the one sentence every hand-over shows about it. Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kijito_pull.core.models import ApiError, Message


def rise(before: int | None, now: int | None) -> int:
    """How many urgent messages arrived between two counts (0 when either is unknown or it fell)."""
    if before is None or now is None:
        return 0
    return max(0, now - before)


def among(messages: Sequence[Message], unread: int, unread_urgent: int | None) -> int:
    """At least how many of `messages` are urgent, from one notify answer's counts for their persona."""
    if not unread_urgent:
        return 0
    in_batch = sum(1 for m in messages if not m.read)
    return max(0, min(in_batch, unread, unread_urgent - max(0, unread - in_batch)))


def count_among(client: Any, persona: str, messages: Sequence[Message]) -> int:
    """`among` from one `notify/pending` answer of `client` (a KijitoClient); 0 when it cannot be had: the
    mail is shown anyway, only its urgency is unknown."""
    try:
        counts = client.notify_pending()
    except ApiError:
        return 0
    row = next((c for c in counts.counts if c.persona == persona), None)
    return among(messages, row.unread, row.unread_urgent) if row else 0


def note(count: int, total: int) -> str:
    """What a hand-over of `total` messages says when at least `count` of them are urgent ("" for none)."""
    if count <= 0 or total <= 0:
        return ""
    if total == 1:
        return "A sender marked this message urgent."
    if count >= total:
        return f"A sender marked all {total} of these messages urgent."
    some = "one" if count == 1 else str(count)
    return (f"Urgent mail is among these messages: a sender marked {some} of the {total} urgent "
            f"(the server does not say which).")


class Arrivals:
    """Urgent mail announced by a count's `rise`, tied to the pull that finds it.

    A rise says how many urgent messages arrived, not which: `arrived` records it, and `found` (given
    the unseen mail of the persona's next pull that finds any) bounds them by that pull's newest id.
    From then on every unseen message at or below the bound counts as `marked` (the urgent ones are
    among them, and the older ones waited longer still), and `note` says so in the hand-over."""

    def __init__(self) -> None:
        self._waiting: dict[str, int] = {}
        self._bound: dict[str, tuple[int, int]] = {}  # persona -> (newest id the urgent mail is at or below, count)

    def arrived(self, persona: str, count: int) -> None:
        if count > 0:
            self._waiting[persona] = self._waiting.get(persona, 0) + count

    def found(self, persona: str, messages: Sequence[Message]) -> None:
        count = self._waiting.get(persona, 0)
        if count and messages:  # a pull that found nothing (a lagging replica) keeps it for the next one
            del self._waiting[persona]
            newest = max(m.id for m in messages)
            before = self._bound.get(persona, (newest, 0))
            self._bound[persona] = (max(newest, before[0]), count + before[1])

    def marked(self, persona: str, message: Message) -> bool:
        bound = self._bound.get(persona)
        return bool(message.urgent) or (bound is not None and message.id <= bound[0])

    def note(self, persona: str, messages: Sequence[Message]) -> str:
        """The hand-over's sentence about urgent mail among `messages` ("" when none is known)."""
        bound = self._bound.get(persona)
        flagged = sum(1 for m in messages if m.urgent)
        inside = sum(1 for m in messages if bound is not None and m.id <= bound[0])
        count = max(flagged, min(inside, bound[1]) if bound else 0)
        return note(count, len(messages))
