"""Where Kimi Code CLI keeps a session's record, and which of its lines show the model something.

Kimi's hook input names no transcript. Each session's record is its `wire.jsonl`, an event log:
`$KIMI_CODE_HOME` (else `~/.kimi-code`) `/sessions/wd_<slug>_<hash>/<session id>/agents/main/wire.jsonl`
(measured on 2.1.0, docs/kimi.md). `session_index.jsonl` in the same home maps each session id to its folder
(one JSON line per session, `{"sessionId", "sessionDir", "workDir"}`), but Kimi may write that line late, so
without one the folder is named the way Kimi names it (`encodeWorkDirKey`: the working folder's name,
lower-cased, runs of anything but `a-z0-9._-` made `-`, trimmed of `-`, at most 40 characters, else
`workspace`; then the first 12 hex digits of the SHA-256 of its path).

The confirmation rule: a hand-over is confirmed only by a `context.append_message` record holding its
marker. Those records are the session's context, what every later model request carries: the
UserPromptSubmit answer (`origin.kind` `hook_result`) and the Stop continuation (`system_trigger`,
`stop_hook`). Nothing else in the log counts: not a `turn.prompt`, not an event of the UI, not our own write.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.transcript import Transcript

HOME_ENV = "KIMI_CODE_HOME"
INDEX = "session_index.jsonl"
MAX_INDEX = 8 << 20  # read at most this much of the index (its newest lines are at the end)
_SESSION = re.compile(r"^session_[A-Za-z0-9-]{1,100}$")


def kimi_home(environ: Mapping[str, str]) -> Path:
    """Kimi Code CLI's data folder: `$KIMI_CODE_HOME`, else `~/.kimi-code`."""
    raw = environ.get(HOME_ENV, "").strip()
    return Paths(environ).expand(raw) if raw else Paths(environ).home / ".kimi-code"


def bucket(work_dir: str) -> str:
    """Kimi's folder name for the sessions of `work_dir` (`wd_<slug>_<hash12>`)."""
    normalized = work_dir.replace("\\", "/").rstrip("/")
    name = normalized.split("/")[-1] or normalized
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-")[:40].strip("-")
    if slug in ("", ".", ".."):
        slug = "workspace"
    return f"wd_{slug}_{hashlib.sha256(normalized.encode('utf-8')).hexdigest()[:12]}"


def _indexed(home: Path, session_id: str) -> str | None:
    try:
        with open(home / INDEX, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - MAX_INDEX))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if session_id.encode("ascii") not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue  # a line of another shape (the index is Kimi's file, not ours)
        folder = entry.get("sessionDir")
        if entry.get("sessionId") == session_id and isinstance(folder, str) and os.path.isabs(folder):
            return folder
    return None


def wire_path(environ: Mapping[str, str], session_id: str, cwd: str) -> Path | None:
    """The session's wire.jsonl (it may not exist yet); None for an id Kimi would not have made."""
    if not _SESSION.match(session_id):
        return None
    home = kimi_home(environ)
    folder = _indexed(home, session_id) or str(home / "sessions" / bucket(cwd) / session_id)
    return Path(folder) / "agents" / "main" / "wire.jsonl"


def shows_model(record: Any) -> bool:
    """Does this wire.jsonl record put its text in front of the model (the confirmation rule, above)?"""
    return isinstance(record, dict) and record.get("type") == "context.append_message"


def record(data: Mapping[str, Any], paths: Paths, session_id: str) -> Transcript | None:
    """The Harness's `record`: the session's wire.jsonl, read for markers in context.append_message records."""
    cwd = data.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or "\0" in cwd:
        return None
    path = wire_path(paths.environ, session_id, cwd)
    return Transcript(paths, session_id, str(path), counts=shows_model) if path is not None else None
