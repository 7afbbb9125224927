"""Urgent mail, which the Kijito API states only as a count.

Inbox rows carry no urgent flag (a server may add one: `Message.urgent`); `GET /api/notify/pending`
counts each persona's unread mail that a sender marked urgent (`unread_urgent`). So urgency is known of
a batch, not of a message, in two ways:

- `rise`: between two answers the count rose by N, so N urgent messages arrived since the first; they
  are among the mail the next pull of that persona finds (watch, the Claude waker and pusher). Under
  the `inbox interrupt: urgent` policy that lets the batch through mid-turn.
- `among`: within one answer, by counting (`--once`): the unread mail outside the batch cannot hold
  more urgent messages than it has messages, so at least `unread_urgent - (unread - unread in the
  batch)` of the batch are urgent. kijito-pull's peeks never clear the server's unread flags, so
  old urgent mail makes this bound weak (often 0), never wrong.

`note` is the one sentence every hand-over shows about it. Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence

from kijito_pull.core.models import Message


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
