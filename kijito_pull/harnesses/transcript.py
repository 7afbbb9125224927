"""Confirming a hand-over from the harness's own record: the session's transcript.

Claude Code passes every hook the path of the session's transcript (JSONL), and records in it the
context a SessionStart or UserPromptSubmit hook added and the reason a Stop hook blocked with, i.e.
exactly what the model was given (measured: docs/claude.md). Every message a hand-over shows carries
a marker (`core.render.ref`), so a later hook of the same session confirms a pending hand-over by
finding its markers there (core/pending.py): never by our own write, which a harness may drop (a
killed hook's output is discarded).

Transcripts grow large, so each session's is read incrementally, line by line: the offset reached (the
start of the first line not yet complete) is kept beside the session's lease (Paths.sessions_dir), and
each look reads only what was appended since. A transcript that was replaced (shorter than the offset,
or another path) is read again from the start. A marker in the incomplete last line counts as queued
(below), never as shown, and that line is read again, whole, by the next look.

A line that only records Claude Code's message queue (`{"type":"queue-operation",...}`: a message sent
through the session inbox socket was queued, or taken off the queue) does not show the model anything:
its markers are reported as `queued` (the session accepted the message; kijito_pull.harnesses.claude.push)
and never as shown. Such a line is known by its parsed top-level `type`, whatever the order of its keys
or its spacing; a complete line is parsed only when it holds a wanted marker and the word
`queue-operation`. A line whose type cannot be told (the incomplete last line: its `type` may not be
written yet; a line that names `queue-operation` but does not parse) counts as queued, never as shown:
erring that way only delays an acknowledgement.

A harness whose record also holds lines that never reach the model names the lines that do (`counts`, a test of
a parsed line): then a marker counts as shown only in a complete line that parses and passes it (Kimi Code
CLI's `wire.jsonl`: only its `context.append_message` records, kijito_pull.harnesses.kimi.record); any other
line is ignored, the incomplete last line counts as queued.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kijito_pull.core import render
from kijito_pull.core.paths import Paths

CHUNK = 1 << 20
MAX_READ = 256 << 20  # one look reads at most this much; the rest is read by the next look
QUEUE_TYPE = "queue-operation"  # the `type` of Claude Code's record of its own message queue
_QUEUE_WORD = QUEUE_TYPE.encode("ascii")  # the cheap test: only a line holding it is parsed


class Seen:
    """What one look found: ids whose marker the model was shown, and ids only queued for it."""

    def __init__(self) -> None:
        self.shown: set[int] = set()
        self.queued: set[int] = set()


class Transcript:
    """One session's transcript, read from where the last look stopped."""

    def __init__(self, paths: Paths, session_id: str, path: str, reader: str = "transcript",
                 counts: Callable[[Any], bool] | None = None):
        self.path = path
        #: None: every line but Claude Code's queue records shows the model what it holds; else the lines that do
        self.counts = counts
        self._paths, self._session_id = paths, session_id
        #: how far this reader got (the hooks and the session's pusher each keep their own)
        self._offset_file = paths.sessions_dir / f"{session_id}.{reader}"
        #: exists while this session may hold hand-overs (session/lifecycle.handed_marker names the same file)
        self.handed_marker = paths.sessions_dir / f"{session_id}.handed"
        self._reached: int | None = None

    def _start(self) -> int:
        try:
            saved = json.loads(self._offset_file.read_text("utf-8"))
        except (OSError, ValueError):
            return 0
        if not isinstance(saved, dict) or saved.get("path") != self.path:
            return 0
        offset = saved.get("offset")
        return offset if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0 else 0

    def _save(self, offset: int) -> None:
        with contextlib.suppress(OSError):
            self._offset_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self._offset_file.with_name(f".{self._offset_file.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"path": self.path, "offset": offset}, handle)
            os.replace(tmp, self._offset_file)

    def skip_to_end(self) -> None:
        """Keep the transcript's present end as where the next look starts (what is there now is not
        read again)."""
        try:
            size = os.stat(self.path).st_size
        except OSError:
            size = 0
        self._save(size)

    def handing_over(self) -> None:
        """Called just before this session is handed something (nothing here: a harness whose record shows
        hand-overs only by what follows them keeps where the record stood, kijito_pull.harnesses.qwen.record)."""

    def forget(self) -> None:
        """The session is over: drop what was kept about it."""
        for path in (self._offset_file, self.handed_marker):
            with contextlib.suppress(OSError):
                path.unlink()

    def find(self, markers: Mapping[str, int], *, keep: bool = True) -> set[int]:
        """The ids whose marker (marker -> id) the model was shown in what the transcript gained since the
        last look. An unreadable or missing transcript confirms nothing (the hand-over is claimed back later).

        keep=False: how far it read is kept only by `keep_reached`, which the caller calls once what it
        found is confirmed durably; a kill before that makes the next look read the same part again."""
        return self.scan(markers, keep=keep).shown

    def scan(self, markers: Mapping[str, int], *, keep: bool = True) -> Seen:
        """`find`, also reporting the ids whose marker is only in a queue-operation line (queued)."""
        seen = Seen()
        if not markers:
            return seen
        wanted = {m.encode("ascii"): i for m, i in markers.items()}
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return seen
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = self._start()
            if start > size:
                start = 0  # replaced or truncated: read it again
            if start:
                handle.seek(start - 1)
                if handle.read(1) != b"\n":  # an offset kept mid-line (an older version): skip to the next line
                    rest = handle.read(min(CHUNK, size - start))
                    cut = rest.find(b"\n")
                    start = start + cut + 1 if cut >= 0 else size
            handle.seek(start)
            end = min(size, start + MAX_READ)
            position = start  # the start of the first line not yet complete
            carry = b""
            while position + len(carry) < end:
                chunk = handle.read(min(CHUNK, end - position - len(carry)))
                if not chunk:
                    break
                window = carry + chunk
                last = window.rfind(b"\n")
                if last < 0:
                    carry = window
                    continue
                self._classify(window[:last + 1], wanted, seen, complete=True, counts=self.counts)
                position += last + 1
                carry = window[last + 1:]
            if carry:
                self._classify(carry, wanted, seen, complete=False, counts=self.counts)  # read again, whole
        self._reached = position
        if keep:
            self._save(position)
        return seen

    def again(self, reader: str) -> Transcript:
        """The same record read by another reader (another holder of the session, with its own offset)."""
        return Transcript(self._paths, self._session_id, self.path, reader=reader, counts=self.counts)

    @staticmethod
    def _classify(block: bytes, wanted: Mapping[bytes, int], seen: Seen, *, complete: bool,
                  counts: Callable[[Any], bool] | None = None) -> None:
        present = [(m, i) for m, i in wanted.items() if i not in seen.shown and m in block]
        if not present:
            return
        for line in block.split(b"\n"):
            found = [(m, i) for m, i in present if i not in seen.shown and m in line]
            if not found:
                continue
            if counts is not None:
                shows = complete and _counted(line, counts)
                if not shows and complete:
                    continue  # a line that never reaches the model
                queue = not shows
            else:
                queue = _is_queue_line(line, complete)
            for _marker, ident in found:
                (seen.queued if queue else seen.shown).add(ident)
        seen.queued -= seen.shown

    def keep_reached(self) -> None:
        """Keep how far the last `find(..., keep=False)` read."""
        if self._reached is not None:
            self._save(self._reached)

    # -- the hand-over loop's Confirmation (core/source.py) -------------------------------------------------

    def shown(self, persona: str, ids: Sequence[int]) -> set[int]:
        """Which of `ids` (of `persona`) the model was shown: their markers (core.render.ref) in what the
        transcript gained. How far it read is kept only by `kept`, once the confirmation is durable."""
        return self.find({render.ref(persona, i): i for i in ids}, keep=False)

    def kept(self) -> None:
        self.keep_reached()


def _is_queue_line(line: bytes, complete: bool) -> bool:
    """Is this transcript line Claude Code's record of its message queue (its top-level `type`)? A complete
    line is parsed only when it names `queue-operation` at all; a line that does not parse counts as one
    (see the module doc)."""
    if complete and _QUEUE_WORD not in line:
        return False
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return True
    return isinstance(record, dict) and record.get("type") == QUEUE_TYPE


def _counted(line: bytes, counts: Callable[[Any], bool]) -> bool:
    try:
        return bool(counts(json.loads(line)))
    except (ValueError, RecursionError):
        return False


def transcript_of(data: Mapping[str, object], paths: Paths, session_id: str) -> Transcript | None:
    """The hook input's transcript, when it names one (an absolute path; the file may not exist yet at
    session start, and a missing file simply confirms nothing)."""
    raw = data.get("transcript_path")
    if not isinstance(raw, str) or not raw or "\0" in raw or not Path(raw).is_absolute():
        return None
    return Transcript(paths, session_id, raw)
