"""core/sdnotify.py over real unix datagram sockets: a path and the abstract namespace ('@name')."""

from __future__ import annotations

import os
import time

from kijito_pull.core.sdnotify import Notifier
from tests.notifysocket import NotifySocket


def test_a_path_socket_gets_key_value_lines(tmp_path):
    sock = NotifySocket(str(tmp_path / "n.sock"))
    try:
        assert Notifier({"NOTIFY_SOCKET": sock.address}).send(READY=1, STATUS="two\nlines")
        assert sock.read() == ["READY=1\nSTATUS=two lines\n"]
    finally:
        sock.close()


def test_the_abstract_namespace_is_reached_through_an_at_sign():
    sock = NotifySocket(f"@kijito-pull-test-{os.getpid()}")
    try:
        assert Notifier({"NOTIFY_SOCKET": sock.address}).send(WATCHDOG=1)
        assert sock.read() == ["WATCHDOG=1\n"]
    finally:
        sock.close()


def test_without_a_socket_nothing_is_sent_and_a_dead_socket_is_ignored(tmp_path):
    assert not Notifier({}).send(READY=1)
    assert Notifier({}).watchdog_period() is None
    assert not Notifier({"NOTIFY_SOCKET": str(tmp_path / "absent.sock")}).send(READY=1)


def test_the_watchdog_period_is_half_of_watchdog_usec_for_this_process_only(tmp_path):
    env = {"NOTIFY_SOCKET": str(tmp_path / "n.sock"), "WATCHDOG_USEC": "3000000"}
    assert Notifier(env).watchdog_period() == 1.5
    assert Notifier({**env, "WATCHDOG_PID": str(os.getpid())}).watchdog_period() == 1.5
    assert Notifier({**env, "WATCHDOG_PID": str(os.getpid() + 1)}).watchdog_period() is None
    assert Notifier({**env, "WATCHDOG_USEC": "soon"}).watchdog_period() is None


def test_a_reader_that_stopped_reading_never_stalls_the_sender(tmp_path):
    sock = NotifySocket(str(tmp_path / "n.sock"))  # never read: its queue fills after a few datagrams
    try:
        notifier = Notifier({"NOTIFY_SOCKET": sock.address})
        started = time.monotonic()
        sent = [notifier.send(STATUS=f"line {n}") for n in range(500)]
        assert time.monotonic() - started < 5
        assert sent[0] and not all(sent)  # the first went through, the overflow was dropped, not waited on
    finally:
        sock.close()
