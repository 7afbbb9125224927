"""One pull of one cursor through one sink: the loop every entry point shares.

Signals first, then mail in id order; each message is acknowledged as soon as the sink took it, and
the loop stops at the first message the sink refused, so a consumer never sees N+1 before N.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kijito_pull.core.engine import Engine
from kijito_pull.core.events import EventFactory
from kijito_pull.core.sink import Sink


@dataclass
class PullReport:
    persona: str
    delivered: list[int] = field(default_factory=list)
    refused: int | None = None  # id of the message the sink did not take
    pinned: bool = False
    problem: str | None = None
    hidden_unread: bool | None = None  # the newest page's claim about unread mail outside the window

    @property
    def ok(self) -> bool:
        return self.refused is None and not self.pinned


def pull_through(engine: Engine, factory: EventFactory, sink: Sink, *, peek: bool = False,
                 content_chars: int | None = None, no_content: bool = False) -> PullReport:
    """Raises ApiError if the newest page cannot be read, StateError if the cursor cannot be locked or saved."""
    report = PullReport(engine.persona)
    with engine.open(peek=peek) as pull:
        for event in pull.signals:
            sink.signal(event)
        events = [factory.new(engine.persona, m, content_chars=content_chars, no_content=no_content)
                  for m in pull.pending]
        sink.begin(engine.persona, pull.pending)
        if sink.batch:
            if pull.pending and sink.deliver_all(engine.persona, events, pull.pending):
                pull.ack_all(pull.pending)
                report.delivered = [m.id for m in pull.pending]
            elif pull.pending:
                report.refused = pull.pending[0].id
        else:
            for event, message in zip(events, pull.pending):
                if not sink.deliver(event, message):
                    report.refused = message.id
                    break
                pull.ack(message)
                report.delivered.append(message.id)
        report.pinned = pull.pinned
        report.problem = pull.problem
        report.hidden_unread = pull.newest.hidden_unread()
    return report
