"""Qwen Code's chat record as a Confirmation: what it shows of a hand-over, and the rule that follows from it.

Every Qwen hook input names the session's chat record as `transcript_path`:
`$QWEN_RUNTIME_DIR (else $QWEN_HOME, else ~/.qwen)/projects/<cwd, every "/" a "-">/chats/<session id>.jsonl`,
one JSON record per line (`"type":"user" | "assistant" | "system"`), written compactly. Measured on 0.24.4
(docs/qwen.md), in `qwen -p` and the TUI:

- a prompt is written as a `user` record *with* its UserPromptSubmit context (an extra text part, and
  `systemPayload.hookContext`), and so is a message pushed through the session inbox;
- each model reply is written as an `assistant` record, before the Stop hook of its turn runs;
- the SessionStart context is **not** written (it lives in the system prompt of every request), nor is a
  Stop block's reason (the continuation's user message is never written; only the reply to it is).

So the rule, resting on what the record shows:

1. a hand-over whose markers (`kijito-ref:`) are in the record is confirmed (UserPromptSubmit context);
2. a hand-over made *before* an `assistant` record is confirmed by that record: a reply Qwen recorded after
   the hand-over answers a request that carried it (SessionStart context is in the system prompt of every
   request; a Stop block's reason is the last user message of the next one). Where the record stood at the
   hand-over is kept as the reader's offset (`handing_over`: the hook has the session waiting, so nothing
   is written meanwhile; in a file of its own, `READER`), and only what was appended after it is read.

A hand-over the record does not confirm so (Qwen killed before its next reply, a dropped answer) stays
pending and is claimed back: when the session's process is gone, at its SessionEnd, or after the hand-over
deadline (core/pending.py). A reply cut off mid-line is not one yet (transcript.Transcript reads an
incomplete last line as queued, never shown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kijito_pull.core import render
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.transcript import Transcript, transcript_of

REPLY = '"type":"assistant"'  # a model reply's record, as Qwen writes it (compact JSON)
REPLIED = -1  # the id the reply "marker" stands for in a scan (never a message id: those are 0 or more)
#: The reader's own offset file (`sessions/<id>.qwen-record`): where the record stood at the last hand-over must
#: outlive lifecycle.end_session, which drops the plain `.transcript` offset before SessionEnd settles (read
#: from the start, a reply from before the hand-over would confirm it); `forget` removes it once settled.
READER = "qwen-record"


class QwenRecord(Transcript):
    """One Qwen session's chat record, read by the rule in the module docstring."""

    def handing_over(self) -> None:
        self.skip_to_end()  # a reply after this point answers a request that carried this hand-over

    def shown(self, persona: str, ids: Sequence[int]) -> set[int]:
        markers = {render.ref(persona, i): i for i in ids}
        seen = self.scan({**markers, REPLY: REPLIED}, keep=False)
        if REPLIED in seen.shown:
            return set(ids)
        return seen.shown & set(ids)


def record_of(data: Mapping[str, object], paths: Paths, session_id: str) -> QwenRecord | None:
    """The hook input's chat record (Harness.record): the path Qwen names, read by Qwen's rule."""
    found = transcript_of(data, paths, session_id)
    return None if found is None else QwenRecord(paths, session_id, found.path, reader=READER)
