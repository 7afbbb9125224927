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
2. a hand-over made *before* an `assistant` record is confirmed by that record, but only when the hook that
   made it finished its answer (`answered`: the markers of its answer, noted after it was flushed, just
   before the hook exits; per message, so a finished hook never vouches for a killed one's): a reply Qwen
   recorded after such a hand-over answers a request that carried it (SessionStart context is in the system
   prompt of every request; a Stop block's reason is the last user message of the next one). A hook killed
   before it finished (its answer dropped) leaves no note, and Qwen's turn goes on and replies all the same:
   that reply confirms nothing (the crash trials, scripts/crash_entries.py, found such mail counted as seen
   before this rule). Where the record stood at the hand-over is kept as the reader's offset
   (`handing_over`: the hook has the session waiting, so nothing is written meanwhile; in a file of its own,
   `READER`), and only what was appended after it is read.

A hand-over the record does not confirm so (Qwen killed before its next reply, a dropped answer) stays
pending and is claimed back: when the session's process is gone, at its SessionEnd, or after the hand-over
deadline (core/pending.py). A reply cut off mid-line is not one yet (transcript.Transcript reads an
incomplete last line as queued, never shown).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from kijito_pull.core import render
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.transcript import Transcript, transcript_of

MARKER = re.compile(r"kijito-ref:[A-Za-z0-9]+")
REPLY = '"type":"assistant"'  # a model reply's record, as Qwen writes it (compact JSON)
REPLIED = -1  # the id the reply "marker" stands for in a scan (never a message id: those are 0 or more)
#: The reader's own offset file (`sessions/<id>.qwen-record`): where the record stood at the last hand-over must
#: outlive lifecycle.end_session, which drops the plain `.transcript` offset before SessionEnd settles (read
#: from the start, a reply from before the hand-over would confirm it); `forget` removes it once settled.
READER = "qwen-record"
#: `sessions/<id>.qwen-answered`: the markers of the answers the session's hooks finished (rule 2), one a line.
ANSWERED = "qwen-answered"
MAX_ANSWERED = 64 << 10  # bytes of markers kept (the newest); far more than a session holds at once


def answered_note(paths: Paths, session_id: str) -> Path:
    return paths.sessions_dir / f"{session_id}.{ANSWERED}"


def answered(paths: Paths, session_id: str, answers: Sequence[object]) -> None:
    """The hook's answers are written and flushed (called by the hook just before it exits): note the markers
    they carried, so a reply in the record from now on confirms those messages (rule 2)."""
    found = set(MARKER.findall(json.dumps(answers)))
    if not found:
        return
    note = answered_note(paths, session_id)
    with contextlib.suppress(OSError):
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, "".join(f"{m}\n" for m in sorted(found)).encode("ascii"))
        finally:
            os.close(fd)
        if note.stat().st_size > MAX_ANSWERED:
            keep = note.read_bytes()[-MAX_ANSWERED // 2:].split(b"\n", 1)[-1]
            tmp = note.with_name(f".{note.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                os.write(fd, keep)
            finally:
                os.close(fd)
            os.replace(tmp, note)


def _answered_markers(note: Path) -> set[str]:
    try:
        fd = os.open(note, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return set()
    try:
        return set(os.read(fd, MAX_ANSWERED * 2).decode("ascii", "replace").split())
    finally:
        os.close(fd)


class QwenRecord(Transcript):
    """One Qwen session's chat record, read by the rule in the module docstring."""

    def __init__(self, paths: Paths, session_id: str, path: str, reader: str = READER):
        super().__init__(paths, session_id, path, reader=reader)
        self.answered_note = answered_note(paths, session_id)

    def handing_over(self) -> None:
        self.skip_to_end()  # a reply after this point answers a request that carried this hand-over

    def shown(self, persona: str, ids: Sequence[int]) -> set[int]:
        markers = {render.ref(persona, i): i for i in ids}
        seen = self.scan({**markers, REPLY: REPLIED}, keep=False)
        shown = seen.shown & set(ids)
        if REPLIED in seen.shown:
            finished = _answered_markers(self.answered_note)
            shown |= {i for marker, i in markers.items() if marker in finished}
        return shown

    def forget(self) -> None:
        super().forget()
        with contextlib.suppress(FileNotFoundError):
            self.answered_note.unlink()


def record_of(data: Mapping[str, object], paths: Paths, session_id: str) -> QwenRecord | None:
    """The hook input's chat record (Harness.record): the path Qwen names, read by Qwen's rule."""
    found = transcript_of(data, paths, session_id)
    return None if found is None else QwenRecord(paths, session_id, found.path, reader=READER)
