"""Unit tests of the one hand-over loop (kijito_pull/core/delivery.py): real HTTP against the sandbox, a
real cursor store, and sinks that record what they were given, for each of the loop's shapes.

What a user would count: mail the sink never took is never acknowledged, what a holder was handed
and its record never showed comes again, nothing is handed to two holders at once, and a holder
that dies gives its mail back.
"""

from __future__ import annotations

import os

import pytest

from kijito_pull.core import render
from kijito_pull.core.api import KijitoClient
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.engine import Engine
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import HELD_KEPT, HELD_WAITS, BatchSink, Sink
from tests.core.conftest import PERSONA

TOKEN = "delivery-loop-token"


class Each(Sink):
    """Takes each message unless its id is in `refuse`."""

    def __init__(self, refuse=(), parks=False):
        self.taken: list[int] = []
        self.refuse = set(refuse)
        self.parks = parks

    def deliver(self, event, message):
        assert event["event_id"] == f"{PERSONA}:new:{message.id}"
        if message.id in self.refuse:
            return False
        self.taken.append(message.id)
        return True


class Text(BatchSink):
    """Writes each hand-over's text to a list; `fail` makes the write fail."""

    def __init__(self, fail=False, held=None, only=None):
        super().__init__()
        self.texts: list[str] = []
        self.fail = fail
        self.marks = 0
        self.only = only
        if held is not None:
            self.held = held

    def select(self, pending):
        return [m for m in pending if self.only is None or m.id in self.only]

    def before_hand_over(self, shown):
        self.marks += 1

    def write(self, text, shown):
        if self.fail:
            return False
        self.texts.append(text)
        return True


class Record:
    """A harness's record of what its model was shown: the texts it is given (a transcript)."""

    def __init__(self):
        self.lines: list[str] = []
        self.kept_calls = 0

    def shown(self, persona, ids):
        return {i for i in ids if any(render.ref(persona, i) in line for line in self.lines)}

    def kept(self):
        self.kept_calls += 1


@pytest.fixture
def source(sb, store, factory):
    client = KijitoClient(sb.url, sb.token, attempts=1)
    yield Engine(client, store, factory, persona=PERSONA, consumer="agent", lock_timeout=1.0)
    client.close()


def send(sb, count):
    return [sb.send(PERSONA, "river", f"message {n}") for n in range(count)]


def test_each_message_is_acknowledged_as_taken_and_the_loop_stops_at_the_first_refusal(sb, source, factory):
    ids = send(sb, 4)
    sink = Each(refuse={ids[2]})
    report = pull_through(source, factory, sink)
    assert sink.taken == ids[:2] and report.delivered == ids[:2] and report.refused == ids[2]
    again = Each()
    assert pull_through(source, factory, again).delivered == ids[2:]  # nothing after the refusal was passed


def test_a_parking_sink_parks_poison_mail_and_the_mail_behind_it_flows(sb, source, factory):
    source.max_attempts = 2
    ids = send(sb, 2)
    assert pull_through(source, factory, Each(refuse={ids[0]}, parks=True)).refused == ids[0]
    sink = Each(refuse={ids[0]}, parks=True)
    report = pull_through(source, factory, sink)
    assert report.parked == [ids[0]] and sink.taken == [ids[1]]


def test_a_batch_without_holder_acknowledges_what_its_text_showed_once_written(sb, source, factory):
    ids = send(sb, 3)
    failing = Text(fail=True)
    assert pull_through(source, factory, failing).refused == ids[0]
    sink = Text()
    report = pull_through(source, factory, sink)
    assert report.delivered == ids and all(render.ref(PERSONA, i) in sink.texts[0] for i in ids)
    assert pull_through(source, factory, Text()).delivered == []


def test_a_holder_confirms_from_its_record_and_what_the_record_never_showed_comes_again(sb, source, factory):
    ids = send(sb, 2)
    holder, record = Holder("toy:s1", os.getpid()), Record()
    first = Text()
    report = pull_through(source, factory, first, holder=holder, confirm=record)
    assert report.delivered == ids and report.held == ids and first.marks == 1
    assert pull_through(source, factory, Each()).delivered == []  # pending with a live holder: nobody else's
    # The record shows only the first message (the second text was dropped): the next pull acknowledges
    # the first and hands the second over again, with its count raised.
    record.lines.append(f"ctx {render.ref(PERSONA, ids[0])}")
    second = Text()
    report = pull_through(source, factory, second, holder=holder, confirm=record)
    assert report.confirmed == [ids[0]] and report.delivered == [ids[1]] and record.kept_calls == 1
    assert render.ref(PERSONA, ids[1]) in second.texts[0] and render.ref(PERSONA, ids[0]) not in second.texts[0]
    record.lines.append(f"ctx {render.ref(PERSONA, ids[1])}")
    report = pull_through(source, factory, Text(), holder=holder, confirm=record)
    assert report.confirmed == [ids[1]] and report.delivered == [] and report.held == []
    assert source.unseen() == []


def test_a_failed_write_to_a_holder_makes_the_mail_unseen_again_at_once(sb, source, factory):
    ids = send(sb, 2)
    holder = Holder("toy:s2", os.getpid())
    report = pull_through(source, factory, Text(fail=True), holder=holder, confirm=Record())
    assert report.refused == ids[0] and report.held == []
    assert source.held_by(holder.key) == []
    assert pull_through(source, factory, Each()).delivered == ids  # another consumer gets it at once


def test_a_waiting_holder_hands_nothing_more_over_until_its_record_confirms(sb, source, factory):
    first = send(sb, 1)
    holder, record = Holder("toy:s3", os.getpid()), Record()
    assert pull_through(source, factory, Text(held=HELD_WAITS), holder=holder, confirm=record).delivered == first
    later = send(sb, 1)
    report = pull_through(source, factory, Text(held=HELD_WAITS), holder=holder, confirm=record)
    assert report.delivered == [] and report.held == first  # one queued turn at a time
    record.lines.append(render.ref(PERSONA, first[0]))
    report = pull_through(source, factory, Text(held=HELD_WAITS), holder=holder, confirm=record)
    assert report.confirmed == first and report.delivered == later


def test_a_keeping_holder_keeps_what_it_holds_and_hands_over_only_what_it_selects(sb, source, factory):
    ids = send(sb, 3)
    holder = Holder("toy:push", os.getpid())
    assert pull_through(source, factory, Text(held=HELD_KEPT, only={ids[0]}), holder=holder).delivered == [ids[0]]
    report = pull_through(source, factory, Text(held=HELD_KEPT), holder=holder)
    assert report.delivered == ids[1:] and report.held == ids  # the first stays held, not handed over twice


def test_a_dead_holders_hand_over_is_claimed_back(sb, source, factory):
    ids = send(sb, 1)
    dead = Holder("toy:dead", pid=2**22 + 12345, start="not-a-real-start")
    assert pull_through(source, factory, Text(), holder=dead, confirm=Record()).delivered == ids
    sink = Each()
    assert pull_through(source, factory, sink).delivered == ids  # its process is gone: the mail comes back


class Slow(BatchSink):
    """Writes after the lock is released (as `exec` runs its command); the answer settles the hand-over."""

    writes_unlocked = True

    def __init__(self, source, answer):
        super().__init__()
        self.source = source
        self.answer = answer
        self.lock_free: bool | None = None

    def write(self, text, shown):
        with self.source.store.locked(0.5):  # would time out if the loop still held the cursor's lock
            self.lock_free = True
        return self.answer


@pytest.mark.parametrize("answer", [True, False])
def test_an_unlocked_write_runs_without_the_lock_and_its_answer_settles_the_hand_over(sb, source, factory, answer):
    ids = send(sb, 2)
    holder = Holder("toy:exec", os.getpid())
    sink = Slow(source, answer)
    report = pull_through(source, factory, sink, holder=holder)
    assert sink.lock_free is True and report.held == []
    if answer:
        assert report.delivered == ids and source.unseen() == []
    else:
        assert report.refused == ids[0] and source.unseen() == ids


class Acks(Sink):
    """The pi child's shape: each message written, then confirmed (or not) with the lock released."""

    def __init__(self, source, take):
        self.source = source
        self.take = take
        self.seen: list[int] = []

    def deliver(self, event, message):
        with self.source.store.locked(0.5):
            pass
        self.seen.append(message.id)
        return message.id in self.take


def test_a_per_message_holder_settles_each_message_and_releases_the_rest_at_a_refusal(sb, source, factory):
    ids = send(sb, 3)
    holder = Holder("toy:child", os.getpid())
    sink = Acks(source, take={ids[0]})
    report = pull_through(source, factory, sink, holder=holder)
    assert report.delivered == [ids[0]] and report.refused == ids[1] and sink.seen == ids[:2]
    assert source.held_by(holder.key) == [] and source.unseen() == ids[1:]
