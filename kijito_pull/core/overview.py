"""What `kijito-pull status --json` says and the dashboard shows, computed in one place.

`cursor_row(state_file)` describes one cursor file (identity, position, pin, lock holder, a damaged file
read from its last good copy, pending hand-overs per holder, parked mail); `cursor_rows(directory,
personas, consumer)` every one under the cursor directory, filtered as `status` filters.
`group_rows(persona, source)` is what a Redis source says of each consumer group of one persona's stream
(`status --source`). Local files only, and the Redis source given; never Kijito, never the token. Reads
through the state store's own careful reader (no links followed, no FIFO blocked on, no giant file read).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kijito_pull.core import lockholder
from kijito_pull.core.files import listed
from kijito_pull.core.state import CursorState, StateError, StateStore


def cursor_rows(directory: Path, personas: Iterable[str] | None = None,
                consumer: str | None = None) -> list[dict[str, Any]]:
    """One row per cursor file under `directory` (sorted by file name), only `personas`' and `consumer`'s
    when given; [] when the directory does not exist yet, StateError (one line) when it cannot be read."""
    rows = [cursor_row(p) for p in listed(directory, "*.json")]
    if personas:
        wanted = set(personas)
        rows = [r for r in rows if r.get("persona") in wanted]
    if consumer:
        rows = [r for r in rows if r.get("consumer") == consumer]
    return rows


def cursor_row(state_file: Path) -> dict[str, Any]:
    """Read one state file's identity without trusting it, then load it through the real validator."""
    try:
        store = StateStore.existing(state_file)
    except StateError as exc:
        return {"file": str(state_file), "status": "corrupt", "reason": str(exc)}
    identity = store.identity
    loaded = store.load()
    row: dict[str, Any] = {"api_base": identity["api_base"], "persona": identity["persona"],
                           "consumer": identity["consumer"], "file": str(state_file)}
    if loaded.corrupt_reason:
        row.update(status="corrupt", reason=loaded.corrupt_reason)
    else:
        state = loaded.state
        assert state is not None
        row.update(status="pinned" if state.pin else "ok", cursor=state.cursor,
                   delivered_above=len(state.delivered_above), pin=state.pin, pending=pending_rows(state),
                   parked=parked_rows(state),
                   restored=loaded.restored)  # why the file was damaged, when read from its last good copy
    written = store.lock_holder()
    if written is None:
        row["lock"] = "free"
    else:  # the pid the locker wrote may have exited, leaving the lock to a child that inherited it
        held = lockholder.holder(store.lock_path, written)
        row["lock"] = {"held_by_pid": held.pid, "holder": held.describe()}
    return row


def pending_rows(state: CursorState) -> list[dict[str, Any]]:
    """Hand-overs to agent sessions not yet confirmed, one row per holder (None: released, unseen again)."""
    by_holder: dict[str | None, dict[str, Any]] = {}
    for ident, entry in sorted(state.pending.items()):
        row = by_holder.setdefault(entry.holder, {"holder": entry.holder, "ids": [], "since": entry.since,
                                                  "until": entry.until, "handovers": 0})
        row["ids"].append(ident)
        row["handovers"] = max(row["handovers"], entry.count)
        if entry.since and (row["since"] is None or entry.since < row["since"]):
            row["since"] = entry.since
    return list(by_holder.values())


def parked_rows(state: CursorState) -> list[dict[str, Any]]:
    """Parked mail, oldest id first: {"id", "since", "attempts", "reason", "retry"}."""
    return [{"id": ident, "since": rec.get("since"), "attempts": rec.get("attempts"), "reason": rec.get("reason", ""),
             "retry": bool(rec.get("retry"))} for ident, rec in sorted(state.parked.items())]


def group_rows(persona: str, source: Any) -> list[dict[str, Any]]:
    """Each consumer group of `persona`'s stream in a Redis source (RedisSource.lag): its lag, pending
    entries and their holders, with the persona and the (password-free) source. ApiError when Redis fails."""
    return [{"persona": persona, "source": source.where, **row} for row in source.lag()]
