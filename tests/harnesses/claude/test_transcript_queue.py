"""The transcript reader's one guarantee the pusher rests on: a marker only in Claude Code's queue record
(`{"type":"queue-operation",...}`) is `queued`, never `shown`, so pushed mail is not acknowledged before
the model is given it (kijito_pull.harnesses.claude.push)."""

from __future__ import annotations

import json

from kijito_pull.core import render
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.transcript import Transcript

PERSONA = "river"


def _line(kind: str, text: str) -> str:
    return json.dumps({"type": kind, "content": text}, separators=(",", ":")) + "\n"


def test_a_queued_marker_is_not_shown_until_the_model_is_given_it(tmp_path):
    path = tmp_path / "t.jsonl"
    markers = {render.ref(PERSONA, 7): 7, render.ref(PERSONA, 8): 8}
    reader = Transcript(Paths({"KIJITO_PULL_STATE_DIR": str(tmp_path / "state")}), "s1", str(path), reader="push")
    path.write_text(_line("queue-operation", f"enqueue {render.ref(PERSONA, 7)}"))
    seen = reader.scan(markers, keep=False)
    assert (seen.shown, seen.queued) == (set(), {7})
    assert reader.find(markers, keep=False) == set()  # the same line again: still not shown

    with path.open("a") as handle:
        handle.write(_line("user", f"mail {render.ref(PERSONA, 7)}"))
        handle.write(_line("queue-operation", f"enqueue {render.ref(PERSONA, 8)}"))
    seen = reader.scan(markers)  # from the start (nothing was kept): 7 queued, then given; 8 only queued
    assert (seen.shown, seen.queued) == ({7}, {8})


def _reader(tmp_path, path):
    return Transcript(Paths({"KIJITO_PULL_STATE_DIR": str(tmp_path / "state")}), "s1", str(path), reader="push")


def test_a_queue_line_is_known_by_its_type_whatever_its_key_order_or_spacing(tmp_path):
    path = tmp_path / "t.jsonl"
    refs = {render.ref(PERSONA, i): i for i in (1, 2, 3)}
    path.write_text(
        # keys reordered: `type` last
        json.dumps({"operation": "enqueue", "content": f"mail {render.ref(PERSONA, 1)}",
                    "type": "queue-operation"}, separators=(",", ":")) + "\n"
        # the default separators (spaces) and `type` in the middle
        + json.dumps({"sessionId": "s1", "type": "queue-operation", "content": render.ref(PERSONA, 2)}) + "\n"
        # leading whitespace before the object
        + "  " + json.dumps({"type": "queue-operation", "content": render.ref(PERSONA, 3)}) + "\n")
    seen = _reader(tmp_path, path).scan(refs, keep=False)
    assert (seen.shown, seen.queued) == (set(), {1, 2, 3})


def test_only_the_top_level_type_makes_a_queue_line(tmp_path):
    """A line the model was given that merely mentions queue-operation (in its text, or as a nested
    `type`) is shown; so is one whose `type` is not a queue's."""
    path = tmp_path / "t.jsonl"
    refs = {render.ref(PERSONA, i): i for i in (4, 5, 6)}
    path.write_text(
        json.dumps({"content": f"about queue-operation: {render.ref(PERSONA, 4)}", "type": "user"}) + "\n"
        + json.dumps({"type": "attachment", "attachment": {"type": "queue-operation",
                                                           "content": render.ref(PERSONA, 5)}}) + "\n"
        + json.dumps({"type": "queue-operations", "content": render.ref(PERSONA, 6)}) + "\n")
    seen = _reader(tmp_path, path).scan(refs, keep=False)
    assert (seen.shown, seen.queued) == ({4, 5, 6}, set())


def test_an_incomplete_queue_line_is_queued_until_it_can_be_read_whole(tmp_path):
    path = tmp_path / "t.jsonl"
    marker = render.ref(PERSONA, 9)
    whole = json.dumps({"operation": "enqueue", "content": f"mail {marker}", "type": "queue-operation"})
    path.write_text(whole[: whole.index(marker) + len(marker) + 3])  # cut before `type` was written
    reader = _reader(tmp_path, path)
    seen = reader.scan({marker: 9})
    assert (seen.shown, seen.queued) == (set(), {9})  # never taken for shown
    path.write_text(whole + "\n" + json.dumps({"content": f"mail {marker}", "type": "user"}) + "\n")
    seen = reader.scan({marker: 9})  # the incomplete line was not passed over: read again, whole
    assert (seen.shown, seen.queued) == ({9}, set())
