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
