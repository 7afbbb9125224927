"""The one hand-over loop: every entry point's mail goes through `pull_through`, whatever the source.

It owns opening the pull, the render budget, the hand-over, emitting and settling; the caller brings a
mail source (core/source.py), a sink (what "taken" means there, core/sink.py), and for an agent session
a holder (who holds the pending hand-over) and a confirmation (which markers the harness's own record
shows). Four shapes, chosen by the sink:

    per message, no holder   scripts (stdout, events file, `--exec` per event): signals first, then each
                             message in id order, acknowledged as soon as the sink took it; the loop stops
                             at the first refusal (a sink that `parks` counts it and parks poison mail),
                             so a consumer never sees N+1 before N.
    batch, no holder         one text of what fits (`BatchSink.compose`, core/render.hand_over) written at
                             once; what it showed is acknowledged once written.
    batch, with a holder     an agent session (hooks, the Claude pusher, the Codex watcher, `exec`): what
                             the holder was handed before is first confirmed from the harness's record
                             (`Confirmation`), and what it still holds is handed over again, waited for or
                             kept (`BatchSink.held`); then the text's messages are recorded as pending with
                             the holder, durably, before the text is written (a kill after that loses
                             nothing: they are claimed back). A failed write makes them unseen again at
                             once. A sink that `writes_unlocked` (`exec`: the command runs for minutes) is
                             written after the lock is released, and its answer settles the hand-over.
    per message, with holder the pi child: under the lock the batch is claimed for the holder; then, with
                             the lock released, each message is written and its confirmation awaited, and
                             settled (a brief lock) as confirmed or released. Each message counts as handed
                             over when it is written (the first with the batch, each next one with the
                             settle of the one before), so a session killed early never counts against
                             mail it did not reach, and a slow session never blocks the cursor's other
                             pullers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kijito_pull.core.models import Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import HELD_AGAIN, HELD_WAITS, BatchSink, Sink
from kijito_pull.core.source import Confirmation, MailSource, OpenPull


@dataclass
class PullReport:
    """What one pass of the loop did for one persona."""

    persona: str
    delivered: list[int] = field(default_factory=list)  # taken (no holder) or written to the holder
    refused: int | None = None  # id of the first message the sink did not take
    pinned: bool = False
    problem: str | None = None
    hidden_unread: bool | None = None  # the newest page's claim about unread mail outside the window
    waiting: int = 0  # unseen mail a batch sink had no room for: it goes out with the next hand-over
    parked: list[int] = field(default_factory=list)  # refused too often: parked, announced, passed
    confirmed: list[int] = field(default_factory=list)  # held before, now shown by the harness's record
    held: list[int] = field(default_factory=list)  # still pending with the holder when the pull closed

    @property
    def ok(self) -> bool:
        """Nothing refused and the cursor not pinned."""
        return self.refused is None and not self.pinned


def pull_through(source: MailSource, factory, sink: Sink, *, holder: Holder | None = None,  # noqa: ANN001
                 confirm: Confirmation | None = None, peek: bool = False, content_chars: int | None = None,
                 no_content: bool = False) -> PullReport:
    """One pass of the loop for `source`'s persona through `sink` (the module docstring has the shapes).
    `factory` builds the `new` events (core.events.EventFactory); `holder` defaults to the sink's own.

    Raises ApiError if the source cannot be read, StateError if its state cannot be locked or saved;
    nothing is acknowledged then."""
    holder = holder if holder is not None else sink.holder
    if isinstance(sink, BatchSink):
        if holder is None or peek:
            return _batch(source, sink, peek)
        return _batch_held(source, sink, holder, confirm)
    if holder is not None and not peek:
        return _each_held(source, factory, sink, holder, content_chars, no_content)
    return _each(source, factory, sink, peek, content_chars, no_content)


def _observe(report: PullReport, pull: OpenPull) -> None:
    report.pinned = pull.pinned
    report.problem = pull.problem
    report.hidden_unread = pull.hidden_unread


def _each(source: MailSource, factory, sink: Sink, peek: bool,  # noqa: ANN001
          content_chars: int | None, no_content: bool) -> PullReport:
    report = PullReport(source.persona)
    with source.open(peek=peek) as pull:
        for event in pull.signals:
            sink.signal(event)
        events = [factory.new(source.persona, m, content_chars=content_chars, no_content=no_content)
                  for m in pull.pending]
        sink.begin(source.persona, pull.pending)
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
        _observe(report, pull)
    return report


def _batch(source: MailSource, sink: BatchSink, peek: bool) -> PullReport:
    report = PullReport(source.persona)
    with source.open(peek=peek) as pull:
        for event in pull.signals:
            sink.signal(event)
        batch = sink.select(pull.pending)
        _observe(report, pull)
        fitted = sink.compose(source.persona, batch) if batch else None
        if fitted is None:
            return report
        text, shown = fitted
        if not sink.write(text, shown):
            report.refused = batch[0].id
            return report
        pull.ack_all(shown)
        report.delivered = [m.id for m in shown]
        report.waiting = len(batch) - len(shown)
    return report


def _batch_held(source: MailSource, sink: BatchSink, holder: Holder, confirm: Confirmation | None) -> PullReport:
    report = PullReport(source.persona)
    unlocked: tuple[str, list[Message]] | None = None
    with source.open(holder=holder) as pull:
        if pull.held and confirm is not None:
            done = pull.confirm(confirm.shown(source.persona, [m.id for m in pull.held]))
            confirm.kept()  # only once what it found is durable
            report.confirmed = [m.id for m in done]
        if pull.held and sink.held == HELD_AGAIN:
            pull.retake()  # handed over, never shown to the model (a killed hook, a dropped answer): again
        for event in pull.signals:
            sink.signal(event)
        _observe(report, pull)
        batch = [] if (pull.held and sink.held == HELD_WAITS) else sink.select(pull.pending)
        fitted = sink.compose(source.persona, batch) if batch else None
        if fitted is not None:
            text, shown = fitted
            # SessionEnd settles only a session marked as handed to, so the mark comes first: a kill
            # between the two leaves a mark with nothing pending (harmless), never pending mail it skips.
            sink.before_hand_over(shown)
            pull.hand_over(shown)  # durable before the text is written: a kill after it loses nothing
            ids = [m.id for m in shown]
            if sink.writes_unlocked:
                unlocked = (text, shown)
            elif sink.write(text, shown):
                report.delivered = ids
                report.waiting = len(batch) - len(shown)
            else:
                pull.release(ids)
                report.refused = ids[0]
        report.held = [m.id for m in pull.held]
    if unlocked is not None:
        text, shown = unlocked
        ids = [m.id for m in shown]
        if sink.write(text, shown):
            source.settle(holder.key, confirmed=ids)
            report.delivered = ids
        else:
            source.settle(holder.key, released=ids)
            report.refused = ids[0]
        report.held = [i for i in report.held if i not in ids]
    return report


def _each_held(source: MailSource, factory, sink: Sink, holder: Holder,  # noqa: ANN001
               content_chars: int | None, no_content: bool) -> PullReport:
    report = PullReport(source.persona)
    with source.open(holder=holder) as pull:
        for event in pull.signals:
            sink.signal(event)
        pull.retake()  # what this holder was handed and never settled (its wait was cut short) goes again
        batch = list(pull.pending)
        if batch:
            # Written one at a time: each message counts as handed over when it is written (the next one
            # with the settle of the one before), so a consumer killed early does not count against mail
            # it never saw (ten such kills would park it as poison).
            pull.hand_over(batch, shown=[batch[0].id])
        _observe(report, pull)
    sink.begin(source.persona, batch)
    for index, message in enumerate(batch):
        event = factory.new(source.persona, message, content_chars=content_chars, no_content=no_content)
        if not sink.deliver(event, message):
            report.refused = message.id
            source.settle(holder.key, released=[m.id for m in batch[index:]])
            break
        source.settle(holder.key, confirmed=[message.id],
                      shown=[batch[index + 1].id] if index + 1 < len(batch) else [])
        report.delivered.append(message.id)
    return report

