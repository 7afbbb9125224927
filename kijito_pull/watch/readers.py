"""Has kijito-pull already delivered an inbox's unread mail? The stranded alarm's evidence.

kijito-pull reads every inbox with `mail_read=false` peeks, so the server's unread flags (and its
`notify/pending` counts) never fall when mail is delivered: an inbox outside the persona directory keeps
counting unread mail that a `--once`, a hook or another watch handed over long ago. `delivered_through`
is the highest cursor any local consumer holds for one inbox at one API base (everything at or below a
cursor was handed over), read from the state files as `kijito-pull status` reads them; the alarm
compares it with the newest unread id the inbox shows. Local files only; a file that cannot be read
is no evidence.
"""

from __future__ import annotations

from pathlib import Path

from kijito_pull.core.state import StateError, StateStore


def delivered_through(cursors_dir: Path, api_base: str, persona: str) -> int | None:
    """The highest cursor of (api_base, persona) among every consumer's state file, or None."""
    best: int | None = None
    try:
        files = sorted(cursors_dir.glob("*.json"))
    except OSError:
        return None
    for path in files:
        try:
            store = StateStore.existing(path)
        except StateError:
            continue
        if store.identity.get("api_base") != api_base or store.identity.get("persona") != persona:
            continue
        state = store.load().state
        if state is not None and state.cursor is not None and (best is None or state.cursor > best):
            best = state.cursor
    return best
