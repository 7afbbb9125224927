"""Unit tests of kijito_pull/core/urgency.py: what the counts prove about a batch's urgency."""

from __future__ import annotations

import pytest

from kijito_pull.core import urgency
from kijito_pull.core.models import Message


def msgs(n: int, read: bool = False) -> list[Message]:
    return [Message(i + 1, "loom", f"m{i}", "2026-12-01T00:00:00Z", read) for i in range(n)]


@pytest.mark.parametrize("batch,unread,urgent,expected", [
    (2, 2, 1, 1),   # every unread message is in the batch: the urgent one is too
    (1, 3, 1, 0),   # two older unread messages could hold the one urgent message
    (2, 3, 2, 1),   # one older unread message holds at most one of the two
    (2, 2, 0, 0),
    (2, 2, None, 0),  # an older server: no statement
    (2, 1, 5, 1),   # counts that disagree with the batch never claim more than the batch's unread
])
def test_among_is_the_pigeonhole_bound(batch, unread, urgent, expected):
    assert urgency.among(msgs(batch), unread, urgent) == expected


def test_among_counts_only_the_batchs_unread_rows():
    assert urgency.among(msgs(2, read=True), 1, 1) == 0  # the urgent unread message is not among them


def test_rise_is_the_arrivals_between_two_counts():
    assert [urgency.rise(1, 3), urgency.rise(3, 1), urgency.rise(None, 2), urgency.rise(2, None)] == [2, 0, 0, 0]


def test_note_says_which_share_of_the_hand_over_is_urgent():
    assert urgency.note(0, 3) == ""
    assert urgency.note(1, 1) == "A sender marked this message urgent."
    assert urgency.note(2, 2) == "A sender marked all 2 of these messages urgent."
    assert urgency.note(1, 3) == ("Urgent mail is among these messages: a sender marked one of the 3 urgent "
                                  "(the server does not say which).")


def test_arrivals_mark_the_pull_that_finds_the_urgent_mail_and_nothing_after():
    marks = urgency.Arrivals()
    old, new, later = msgs(3)
    assert not marks.marked("river", old)
    marks.arrived("river", 1)
    marks.found("river", [])  # a read that found nothing yet (a lagging replica): kept for the next
    marks.found("river", [old, new])
    assert marks.marked("river", old) and marks.marked("river", new)
    assert not marks.marked("river", later) and not marks.marked("loom", old)
    assert marks.note("river", [old, new]) == ("Urgent mail is among these messages: a sender marked one of "
                                               "the 2 urgent (the server does not say which).")
    assert marks.note("river", [later]) == ""
