"""The watch loop's decisions, without HTTP: which personas a notify answer sends us to read."""

from __future__ import annotations

import threading
import time

from kijito_pull.core.events import EventFactory
from kijito_pull.core.longpoll import Counts
from kijito_pull.core.models import NotifyResult, PendingCount
from kijito_pull.core.sink import PULL_NOW, Sink
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


class _FakeNotify:
    """notify_pending that answers at once with a new cursor each time, recording when it was called."""

    def __init__(self):
        self.calls: list[float] = []
        self.called = threading.Event()

    def notify_pending(self, wait=None, cursor=None):
        import time
        self.calls.append(time.monotonic())
        self.called.set()
        return NotifyResult((PendingCount("p", len(self.calls), 0),), f"c{len(self.calls)}")


def test_after_news_the_next_hold_waits_until_the_loop_handled_the_answer():
    import queue
    import time

    from kijito_pull.core.longpoll import LongPoll
    from kijito_pull.watch.longpoll import Notifier
    client, out, stop = _FakeNotify(), queue.Queue(), threading.Event()
    notifier = Notifier(client, LongPoll(50, 60.0), out, stop, handoff_wait=5.0)
    notifier.start()
    first = second = third = Counts(NotifyResult((), None), False, False)
    try:
        first = out.get(timeout=5)
        assert isinstance(first, Counts) and first.advanced
        time.sleep(0.3)  # well past NEWS_SPACING: only the loop's hand-off holds the next request back
        assert len(client.calls) == 1
        first.handled.set()
        second = out.get(timeout=5)
        assert len(client.calls) == 2 and client.calls[1] - client.calls[0] >= 0.3
        second.handled.set()
        third = out.get(timeout=5)  # and so on: the notifier keeps going
    finally:
        stop.set()
        for item in [first, second, third]:
            item.handled.set()
        notifier.join(5)
    assert not notifier.is_alive()


def test_a_loop_that_never_answers_delays_the_next_hold_only_by_the_handoff_cap():
    import queue

    from kijito_pull.core.longpoll import LongPoll
    from kijito_pull.watch.longpoll import Notifier
    client, out, stop = _FakeNotify(), queue.Queue(), threading.Event()
    notifier = Notifier(client, LongPoll(50, 60.0), out, stop, handoff_wait=0.2)
    notifier.start()
    try:
        out.get(timeout=5)
        out.get(timeout=5)  # nobody set `handled`: the notifier went on after 0.2 s
        assert 0.15 <= client.calls[1] - client.calls[0] < 2.0
    finally:
        stop.set()
        notifier.join(5)
    assert not notifier.is_alive()


def test_with_a_handler_a_count_answer_is_handled_on_the_notifier_thread_and_never_queued():
    import queue

    from kijito_pull.core.longpoll import LongPoll
    from kijito_pull.watch.longpoll import Notifier
    client, out, stop = _FakeNotify(), queue.Queue(), threading.Event()
    seen: list[tuple[Counts, threading.Thread]] = []
    two = threading.Event()

    def handle(item: Counts) -> None:
        seen.append((item, threading.current_thread()))
        if len(seen) >= 2:
            two.set()

    notifier = Notifier(client, LongPoll(50, 60.0), out, stop, handle=handle)
    notifier.start()
    try:
        assert two.wait(5)
    finally:
        stop.set()
        notifier.join(5)
    assert all(thread is notifier for _, thread in seen)  # no hand-off to another thread on the wake's path
    assert seen[0][0].advanced and out.empty()


def test_the_watcher_pulls_on_the_notifier_thread_and_hands_a_failure_to_the_main_thread():
    watcher, pulled = make_watcher(["a"])
    watcher.targets["a"].last_unread, watcher.targets["a"].last_urgent = 0, 0
    watcher.handle_counts(counts(a=1))
    assert pulled == ["a"] and watcher.loop.empty()

    def broken(target, expect_mail=False):
        raise RuntimeError("a bug in a pull")
    watcher.pull = broken  # type: ignore[method-assign]
    try:
        watcher.handle_counts(counts(a=2))
    except RuntimeError:
        pass
    crashed = watcher.loop.get_nowait()  # handed to the main thread, which raises it (Watcher.run)
    assert isinstance(getattr(crashed, "error", None), RuntimeError)


class _QuietWake:
    """A source's wake that says nothing until told to (`ring`), as an idle stream's XREAD BLOCK."""

    def __init__(self):
        self.bell = threading.Event()
        self.waits = 0

    def wait(self, brief=False):
        from kijito_pull.core.wake import Wakeup
        self.waits += 1
        self.bell.wait()
        self.bell.clear()
        return Wakeup(True)

    def ring(self):
        self.bell.set()

    def close(self):
        pass


def _source_watcher(wake, **options):
    from kijito_pull.watch.loop import SourceWake
    watcher = Watcher(client=None, notify_client=None, make_engine=lambda name: None, sink=Sink(),
                      factory=EventFactory(), options=WatchOptions(**options), personas=["a"],
                      stop=threading.Event(), source_wake=SourceWake(wake, "redis", {"redis": "redis://r"}))
    pulls: list[float] = []
    watcher.pull = lambda target, expect_mail=False: pulls.append(time.monotonic())  # type: ignore[method-assign]
    looks = []
    deadline = watcher._next_deadline
    watcher._next_deadline = lambda: (looks.append(time.monotonic()), deadline())[1]  # type: ignore[method-assign]
    thread = threading.Thread(target=watcher.run, daemon=True)
    return watcher, thread, pulls, looks


def test_an_idle_loop_sleeps_until_its_next_deadline_or_a_message_and_never_ticks():
    wake = _QuietWake()
    watcher, thread, pulls, looks = _source_watcher(wake, poll_seconds=600)
    thread.start()
    try:
        time.sleep(2.5)
        assert len(pulls) == 1  # the first pull, at arming; nothing since
        assert len(looks) == 1, looks  # one wait for a sweep 600 s away, no wake-up a second
        wake.ring()  # the source's wake: a pull at once
        assert _until(lambda: len(pulls) == 2)
        watcher.loop.put(PULL_NOW)  # from the sink (a sweep asked for)
        assert _until(lambda: len(pulls) == 3)
    finally:
        started = time.monotonic()
        watcher.stop.set()  # what SIGTERM's handler does (cli/stopsignals.py): the blocked loop sees it at once
        thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 1.0


def test_the_sweep_is_a_deadline_the_idle_loop_wakes_for():
    wake = _QuietWake()
    watcher, thread, pulls, looks = _source_watcher(wake, poll_seconds=0.4)
    thread.start()
    try:
        assert _until(lambda: len(pulls) >= 4, timeout=5)  # arming, then a sweep every 0.4 s
        gaps = [b - a for a, b in zip(pulls[1:], pulls[2:])]
        assert all(0.3 < gap < 1.0 for gap in gaps), gaps
    finally:
        watcher.stop.set()
        thread.join(5)


def _until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
