"""The Sink contract: where one pull hands its mail, and what "the consumer took it" means there.

`core.delivery.pull_through` drives a sink; every destination (stdout, an events file, `--exec`, a
harness session) implements `Sink` (one message at a time) or `BatchSink` (one text of what fits: an
agent's hand-over). A sink's `deliver` returns True only once the message is
really handed over; anything else holds the cursor below the message, so it is delivered again,
never lost. A sink that talks to a controlling process may post `PULL_NOW` (pull every persona now)
or `CLOSED` (the consumer went away: stop) to the watch loop's queue; that is all the watch loop
knows of any consumer (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from kijito_pull.core import render
from kijito_pull.core.models import ApiError, Message
from kijito_pull.core.pending import Holder

PULL_NOW = "pull_now"
CLOSED = "sink_closed"

#: What a batch sink's holder still holds, unconfirmed, when its next pull opens (BatchSink.held):
HELD_AGAIN = "again"  # hand it over again with the rest (a hook: the last answer never reached the model)
HELD_WAITS = "wait"  # hand nothing more over until it is confirmed (the Codex watcher: one queued turn at a time)
HELD_KEPT = "keep"  # leave it held and hand over the rest (the Claude pusher confirms its own pushes as it goes)


class Sink:
    """Per-message delivery: `deliver` each message in id order (core/delivery.py)."""

    #: Set when the consumer is an agent session that confirms each message itself, possibly long after
    #: it was written (the pi child): the mail is then a pending hand-over for this holder, and the
    #: cursor's lock is not held while `deliver` waits (core/delivery.py).
    holder: Holder | None = None
    #: A consumer that can refuse one message while taking others (an `--exec` command, an events file):
    #: a message it refuses `max_attempts` times is parked so later mail flows (Pull.refuse). A stream
    #: whose reader went away refuses everything alike, so stdout never parks.
    parks = False

    def signal(self, event: dict) -> None:
        """Diagnostics (alert, state_corrupt, ...): best effort, they never gate the cursor."""

    def begin(self, persona: str, messages: Sequence[Message]) -> None:
        """Called once before the messages of one pull are delivered."""

    def urgent_arrived(self, persona: str, count: int) -> None:
        """The persona's count of unread urgent mail rose by `count` (core/urgency.py): urgent mail is among
        what its next pull finds. A sink that lets urgent mail interrupt an agent uses it; others ignore it."""

    def deliver(self, event: dict, message: Message) -> bool:
        """Hand one message over; True only once the consumer took it (False holds the cursor below it)."""
        raise NotImplementedError

    def blames(self, exc: ApiError) -> str:
        """Which dependency an ApiError raised through this sink's pull came from, for the metrics' error
        label: the mail source ("kijito"), unless the sink writes to a service of its own (the relay's Redis)."""
        return "kijito"


class BatchSink(Sink):
    """One text per pull: the oldest messages that fit one hand-over (core.render.hand_over), each with
    its id, sender, time, marker and opening words; only those it shows count as handed over, the rest
    wait for the next one. The diagnostics of the pull become notes in that text.

    A subclass writes the text (`write`) and may choose which unseen mail may go now (`select`), fit the
    text its own way (`compose`), act just before the hand-over is recorded (`before_hand_over`), and say
    what happens to what its holder still holds (`held`: HELD_AGAIN, HELD_WAITS or HELD_KEPT)."""

    held = HELD_AGAIN
    #: write only after the pull's lock is released (the write takes long: `exec` runs a command); its
    #: answer then confirms (True) or releases (False) the hand-over
    writes_unlocked = False

    def __init__(self, extra_notes: Sequence[str] = ()):
        self.extra = [n for n in extra_notes if n]
        self.notes: list[str] = []
        self.shown: list[Message] = []

    def signal(self, event: dict) -> None:
        """A diagnostic becomes one note in this pull's text."""
        self.notes.append(render.note(event))

    def select(self, pending: Sequence[Message]) -> list[Message]:
        """The unseen mail that may go in this hand-over (default: all of it)."""
        return list(pending)

    def compose(self, persona: str, messages: Sequence[Message]) -> tuple[str, list[Message]] | None:
        """The text and the messages it shows (a prefix, the oldest first); None: nothing can go now."""
        return render.hand_over(persona, messages, extra_notes=[*self.notes, *self.extra])

    def text(self, persona: str, messages: Sequence[Message]) -> str:
        """The text for `messages` (an empty list: the "no mail" text with this pull's notes)."""
        return render.hand_over(persona, messages, extra_notes=[*self.notes, *self.extra])[0]

    def before_hand_over(self, shown: Sequence[Message]) -> None:
        """Called under the lock just before `shown` is recorded as pending with the holder."""

    def write(self, text: str, shown: Sequence[Message]) -> bool:
        """Hand the text over; True only once the consumer has it (written and flushed, queued, run)."""
        raise NotImplementedError
