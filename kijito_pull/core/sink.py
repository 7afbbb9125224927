"""The Sink contract: where one pull hands its mail, and what "the consumer took it" means there.

`core.delivery.pull_through` drives a sink; every destination (stdout, an events file, `--exec`, a
harness session) implements this class. A sink's `deliver` returns True only once the message is
really handed over; anything else holds the cursor below the message, so it is delivered again,
never lost. A sink that talks to a controlling process may post `PULL_NOW` (pull every persona now)
or `CLOSED` (the consumer went away: stop) to the watch loop's queue; that is all the watch loop
knows of any consumer (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from kijito_pull.core.models import Message
from kijito_pull.core.pending import Holder

PULL_NOW = "pull_now"
CLOSED = "sink_closed"


class Sink:
    """Base sink: per-message delivery. Subclasses that can only hand over a batch set `batch = True`."""

    batch = False
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

    def deliver(self, event: dict, message: Message) -> bool:
        raise NotImplementedError

    def deliver_all(self, persona: str, events: Sequence[dict], messages: Sequence[Message]) -> int:
        """Hand over a batch; return how many of `messages` were taken, always a prefix (the oldest
        first): an agent's hand-over takes what fits and the rest waits for the next one. 0: refused."""
        raise NotImplementedError
