"""The watch loop's decisions, without HTTP: which personas a notify answer sends us to read."""

from __future__ import annotations

import threading

from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import NotifyResult, PendingCount
from kijito_pull.core.sink import Sink
from kijito_pull.watch.longpoll import Counts
from kijito_pull.watch.loop import Watcher, WatchOptions


def make_watcher(personas):
    watcher = Watcher(client=None, notify_client=None, make_engine=lambda name: None, sink=Sink(),
                      factory=EventFactory(), options=WatchOptions(resync_every=3), personas=personas,
                      stop=threading.Event())
    pulled: list[str] = []
    watcher.pull = lambda target, expect_mail=False: pulled.append(target.name)  # type: ignore[method-assign]
    return watcher, pulled


def counts(advanced=True, **unread):
    return Counts(NotifyResult(tuple(PendingCount(p, n, 0) for p, n in unread.items()), "c"), advanced, True)


def test_a_persona_without_a_previous_count_is_read_whatever_its_count():
    watcher, pulled = make_watcher(["fresh"])
    watcher.on_counts(counts(fresh=1))
    assert pulled == ["fresh"]  # just adopted: there is no earlier count to compare with


def test_only_personas_whose_count_rose_are_read_until_the_resync_floor():
    watcher, pulled = make_watcher(["a", "b"])
    for target in watcher.targets.values():
        target.last_unread, target.last_urgent = 1, 0
    watcher.on_counts(counts(a=2, b=1))
    assert pulled == ["a"]
    watcher.on_counts(counts(a=2, b=1))
    watcher.on_counts(counts(a=2, b=1))
    assert pulled == ["a", "b"]  # b skipped three arrivals: the floor reads it anyway
    watcher.on_counts(counts(advanced=False, a=2, b=1))
    assert pulled == ["a", "b"]  # an idle answer (nothing arrived) is not a skip
