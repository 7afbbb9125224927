"""One pull of one cursor through one sink: the loop every entry point shares.

Signals first, then mail in id order; each message is acknowledged as soon as the sink took it, and
the loop stops at the first message the sink refused, so a consumer never sees N+1 before N.

A sink with a `holder` (an agent session that confirms each message itself, the pi child) is served in
two phases instead: under the cursor's lock the batch is recorded as pending hand-overs for the holder;
then, with the lock released, each message is written and its confirmation awaited, and settled (a
brief lock) as confirmed or released. Each message counts as handed over when it is written (the
first with the batch, each next one with the settle of the one before), so a session killed early
never counts against mail it did not reach. So a slow session never blocks the other pullers of the
cursor, and a process killed while it waits loses nothing: its entries are claimed back
(core/pending.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kijito_pull.core.engine import Engine
from kijito_pull.core.events import EventFactory
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import Sink


@dataclass
class PullReport:
    persona: str
    delivered: list[int] = field(default_factory=list)
    refused: int | None = None  # id of the message the sink did not take
    pinned: bool = False
    problem: str | None = None
    hidden_unread: bool | None = None  # the newest page's claim about unread mail outside the window
    waiting: int = 0  # unseen mail a batch sink had no room for: it goes out with the next hand-over
    parked: list[int] = field(default_factory=list)  # refused too often: parked, announced, passed

    @property
    def ok(self) -> bool:
        return self.refused is None and not self.pinned


def pull_through(engine: Engine, factory: EventFactory, sink: Sink, *, peek: bool = False,
                 content_chars: int | None = None, no_content: bool = False) -> PullReport:
    """Raises ApiError if the newest page cannot be read, StateError if the cursor cannot be locked or saved."""
    if sink.holder is not None and not peek:
        return _hand_over_through(engine, factory, sink, sink.holder, content_chars, no_content)
    report = PullReport(engine.persona)
    with engine.open(peek=peek) as pull:
        for event in pull.signals:
            sink.signal(event)
        events = [factory.new(engine.persona, m, content_chars=content_chars, no_content=no_content)
                  for m in pull.pending]
        sink.begin(engine.persona, pull.pending)
        if sink.batch:
            taken = sink.deliver_all(engine.persona, events, pull.pending) if pull.pending else 0
            if taken:
                pull.ack_all(pull.pending[:taken])
                report.delivered = [m.id for m in pull.pending[:taken]]
                report.waiting = len(pull.pending) - taken
            elif pull.pending:
                report.refused = pull.pending[0].id
        else:
            for event, message in zip(events, pull.pending):
                if not sink.deliver(event, message):
                    parked = pull.refuse(message) if sink.parks else None
                    if parked is None:
                        report.refused = message.id  # held: the consumer never sees N+1 before N
                        break
                    sink.signal(parked)  # poison mail: parked, announced, and the mail behind it flows
                    report.parked.append(message.id)
                    continue
                pull.ack(message)
                report.delivered.append(message.id)
        report.pinned = pull.pinned
        report.problem = pull.problem
        report.hidden_unread = pull.newest.hidden_unread()
    return report


def _hand_over_through(engine: Engine, factory: EventFactory, sink: Sink, holder: Holder,
                       content_chars: int | None, no_content: bool) -> PullReport:
    report = PullReport(engine.persona)
    with engine.open(holder=holder) as pull:
        for event in pull.signals:
            sink.signal(event)
        pull.retake()  # what this holder was handed and never settled (its wait was cut short) goes again
        batch = list(pull.pending)
        if batch:
            # Written one at a time: each message counts as handed over when it is written (the next one
            # with the settle of the one before), so a consumer killed early does not count against mail
            # it never saw (ten such kills would park it as poison).
            pull.hand_over(batch, shown=[batch[0].id])
        report.pinned = pull.pinned
        report.problem = pull.problem
        report.hidden_unread = pull.newest.hidden_unread()
    sink.begin(engine.persona, batch)
    for index, message in enumerate(batch):
        event = factory.new(engine.persona, message, content_chars=content_chars, no_content=no_content)
        if not sink.deliver(event, message):
            report.refused = message.id
            engine.settle(holder.key, released=[m.id for m in batch[index:]])
            break
        engine.settle(holder.key, confirmed=[message.id],
                      shown=[batch[index + 1].id] if index + 1 < len(batch) else [])
        report.delivered.append(message.id)
    return report
