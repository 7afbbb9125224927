"""A message's journey: what is known of one message, from Kijito and from this machine's state.

Used by `kijito-pull track ID` (everything), `kijito-pull send --wait seen` (the receipt and, while it
waits, what else is known) and the dashboard (`confirmed_since`: confirmations in the last hour). Each
fact is a `Step`: where it was learnt (Kijito, this machine's cursor files, Redis), what it says, and
when, when the record keeps a time:

    unread / read       Kijito's flag on the row (`read` is the receipt when the recipient emits them)
    waiting             a cursor of this machine that has not reached the message yet
    taken               a cursor moved past it (a script's consumer took it; no hand-over was recorded)
    handed_over         pending with an agent session (holder `harness:session`), since, how many times
    given_back          handed over, not confirmed, unseen again (its holder died, or its deadline passed)
    confirmed           the harness's record showed the model has it (core/confirmations.py: when, whose)
    parked              refused too often; `kijito-pull parked --retry ID` hands it over again
    not_relayed / acknowledged   (Redis) not in the persona's stream yet / the group acknowledged it

`Journey.state` is the furthest of them (a message read at Kijito is `seen`). Receipts: a sender can only
rely on Kijito's read flag when the recipient emits receipts (core/receipts.py); `receipts_known` says
what this machine can tell about that (docs/delivery.md, "Read receipts"). Reads files only (never under
a lock, never following links); the one Kijito request is `at_kijito`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kijito_pull.core import config, confirmations, receipts
from kijito_pull.core.files import listed
from kijito_pull.core.models import InboxPage, message_at
from kijito_pull.core.state import StateError, StateStore

KIJITO = "kijito"
LOCAL = "this machine"
REDIS = "redis"

#: The states of a journey, least to furthest: `Journey.state` is the furthest any step reached.
ORDER = ("unknown", "unread", "not_relayed", "waiting", "taken", "given_back", "handed_over", "parked",
         "confirmed", "acknowledged", "seen")


class Reader(Protocol):
    """What reads one inbox window without marking it (core.api.KijitoClient)."""

    def inbox(self, persona: str, before_id: int | None = None, limit: int | None = None) -> InboxPage: ...


def iso(epoch: float | None) -> str | None:
    return None if epoch is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


@dataclass(frozen=True)
class Step:
    """One fact about a message: `where` it was learnt, its `state` (module docstring), `at` (ISO time, when
    the record keeps one), who (`consumer`: a cursor or Redis group; `holder`: `harness:session`), and a
    sentence for a person."""

    where: str
    state: str
    detail: str
    at: str | None = None
    consumer: str | None = None
    holder: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def harness(self) -> str | None:
        """The harness a holder key names (`claude:6f1c...` -> claude)."""
        return self.holder.split(":", 1)[0] if self.holder and ":" in self.holder else None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"where": self.where, "state": self.state, "at": self.at}
        for name in ("consumer", "holder", "harness"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return {**out, **self.extra, "detail": self.detail}


@dataclass(frozen=True)
class Receipts:
    """Whether the recipient emits receipts: True, False, or None (this machine cannot tell), and why."""

    emitted: bool | None
    why: str

    def as_json(self) -> dict[str, Any]:
        return {"emitted": self.emitted, "why": self.why}


@dataclass
class Journey:
    """Everything known of message `id` of `persona`, as steps."""

    id: int
    persona: str
    steps: list[Step] = field(default_factory=list)
    receipts: Receipts | None = None

    @property
    def state(self) -> str:
        """The furthest state any step reached ("unknown" with none)."""
        return max((s.state for s in self.steps), key=ORDER.index, default="unknown")

    @property
    def seen(self) -> bool:
        return self.state in ("seen", "acknowledged")

    def summary(self) -> str:
        """One line for a person: the furthest state, with the step that says so."""
        best = max(self.steps, key=lambda s: ORDER.index(s.state), default=None)
        if best is None:
            return f"nothing is known of message {self.id} for {self.persona}"
        return f"{self.state.replace('_', ' ')}: {best.detail}"

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "persona": self.persona, "state": self.state, "seen": self.seen,
                "receipts": self.receipts.as_json() if self.receipts else None,
                "steps": [s.as_json() for s in self.steps]}


# -- Kijito ----------------------------------------------------------------------------------------------


def at_kijito(client: Reader, persona: str, ident: int) -> Step:
    """Kijito's read flag on message `ident` of `persona`: one request (the newest row below ident + 1),
    which never marks anything read. Raises core.models.ApiError when Kijito cannot be asked."""
    row = message_at(client, persona, ident)
    if row is None:
        return Step(KIJITO, "unknown", f"message {ident} is not in {persona}'s inbox at Kijito")
    if row.read:
        return Step(KIJITO, "seen", f"read at Kijito (from {row.sender}, sent {row.created})",
                    extra={"sent": row.created})
    return Step(KIJITO, "unread", f"still unread at Kijito (from {row.sender}, sent {row.created})",
                extra={"sent": row.created})


# -- this machine ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    """One cursor file of this machine, as found on disk (its identity read without trusting the file)."""

    path: Path
    api_base: str
    persona: str
    consumer: str

    @property
    def receipts(self) -> bool:
        """This cursor publishes that it emits receipts (core/receipts.py)."""
        return receipts.published(self.path)


def cursors(cursors_dir: Path, api_base: str | None = None, persona: str | None = None) -> Iterator[Cursor]:
    """The cursor files under `cursors_dir` (of `api_base` and `persona`, when given); damaged ones skipped.
    StateError (one line) when the folder exists and cannot be read."""
    for path in listed(cursors_dir, "*.json"):
        try:
            identity = StateStore.existing(path).identity
        except StateError:
            continue
        if api_base not in (None, identity["api_base"]) or persona not in (None, identity["persona"]):
            continue
        yield Cursor(path, identity["api_base"], identity["persona"], identity["consumer"])


def on_this_machine(found: Iterable[Cursor], ident: int) -> list[Step]:
    """What each cursor's state file says of message `ident` (one step per cursor)."""
    return [_cursor_step(c, ident) for c in found]


def _cursor_step(c: Cursor, ident: int) -> Step:
    try:
        loaded = StateStore.existing(c.path).load()
    except StateError as exc:
        return Step(LOCAL, "unknown", f"cursor {c.consumer}: cannot be read ({exc})", consumer=c.consumer)
    state = loaded.state
    if state is None:
        why = loaded.corrupt_reason or "no state yet"
        return Step(LOCAL, "unknown", f"cursor {c.consumer}: cannot be read ({why})", consumer=c.consumer)
    logged = confirmations.read(c.path, ids=[ident])
    if logged:
        last = logged[-1]
        return Step(LOCAL, "confirmed", f"confirmed by {last.holder}'s record (consumer {c.consumer})",
                    at=iso(last.at), consumer=c.consumer, holder=last.holder)
    if ident in state.parked:
        rec = state.parked[ident]
        return Step(LOCAL, "parked", f"parked by consumer {c.consumer} after {rec.get('attempts')} attempts "
                                     f"({rec.get('reason', '')}); `kijito-pull parked --retry {ident}` hands it "
                                     f"over again", at=rec.get("since"), consumer=c.consumer)
    entry = state.pending.get(ident)
    if entry is not None and entry.holder is not None:
        alive = entry.pid is None or _alive(entry.pid, entry.start)
        gone = "" if alive else "; its process is gone, so the next pull takes it back"
        return Step(LOCAL, "handed_over", f"handed over to {entry.holder} (consumer {c.consumer}) "
                                          f"{entry.count} time(s), not confirmed{gone}",
                    at=entry.since, consumer=c.consumer, holder=entry.holder,
                    extra={"handovers": entry.count, "until": iso(entry.until), "holder_alive": alive})
    if entry is not None:
        return Step(LOCAL, "given_back", f"handed over {entry.count} time(s), never confirmed, unseen again "
                                         f"(consumer {c.consumer})", at=entry.since, consumer=c.consumer,
                    extra={"handovers": entry.count})
    if state.cursor is not None and (ident <= state.cursor or ident in state.delivered_above):
        return Step(LOCAL, "taken", f"taken by consumer {c.consumer} (its cursor is at {state.cursor}; no "
                                    f"hand-over to a session was recorded)", consumer=c.consumer)
    tries = state.failures.get(ident)
    refused = f", refused {tries} time(s)" if tries else ""
    return Step(LOCAL, "waiting", f"not yet taken by consumer {c.consumer} (cursor at {state.cursor}{refused})",
                consumer=c.consumer)


def _alive(pid: int, start: str | None) -> bool:
    from kijito_pull.core import process

    return process.alive(pid, start) is not False


# -- receipts --------------------------------------------------------------------------------------------


def receipts_known(persona: str, own: tuple[bool, str] | None, found: Iterable[Cursor],
                   machine: tuple[bool, str] | None = None) -> Receipts:
    """What this machine can tell about whether `persona` emits receipts (Kijito's read flag set on
    confirmation), in this order: its configuration for this persona (`own`: the value and where it was
    set), the markers its cursors here publish, its configuration for every persona (`machine`, when that
    turns receipts on), a cursor here without a marker (read here without receipts), else nothing."""
    if own is not None:
        on, origin = own
        return Receipts(on, f"{persona} {'emits' if on else 'does not emit'} receipts: {origin} on this machine "
                            f"says so")
    found = list(found)
    marked = [c.consumer for c in found if c.receipts]
    if marked:
        return Receipts(True, f"{persona}'s cursor{'s' if len(marked) > 1 else ''} on this machine "
                              f"({', '.join(marked)}) mark confirmed mail read")
    if machine is not None and machine[0]:
        return Receipts(True, f"{machine[1]} on this machine turns receipts on for every persona")
    if found and all(c.consumer == config.RELAY_CONSUMER for c in found):
        return Receipts(None, f"{persona} is relayed from this machine into Redis (consumer "
                              f"{config.RELAY_CONSUMER}): its receipt is the Redis consumer group's "
                              f"acknowledgement; wait with --source redis://HOST:PORT/DB (and --consumer NAME "
                              f"when its group is not 'agent')")
    if found:
        names = ", ".join(c.consumer for c in found)
        return Receipts(False, f"{persona} is read on this machine (consumer {names}) without receipts: its "
                               f"confirmed mail is not marked read at Kijito; turn them on with "
                               f"[personas.{persona}] mark_read = true in the config file")
    return Receipts(None, f"this machine cannot tell whether {persona} emits receipts (no cursor of {persona} "
                          f"here, no [personas.{persona}] mark_read in its config file); Kijito's read flag is "
                          f"set only where {persona}'s runner has mark_read on")


# -- the dashboard: confirmations in a window ------------------------------------------------------------


def confirmed_since(cursors_dir: Path, since: float, persona: str | None = None) -> list[dict[str, Any]]:
    """Every hand-over confirmed on this machine at or after epoch `since` (e.g. time.time() - 3600), oldest
    first: {"persona", "consumer", "api_base", "id", "holder", "at"}. Reads files only, and only the cursors
    whose confirmation log changed since then (a thousand idle cursors cost a directory listing). StateError
    (one line) when the folder exists and cannot be read."""
    recent = []
    for log in listed(cursors_dir, f"*.json{confirmations.SUFFIX}"):
        try:
            if os.stat(log).st_mtime < since:
                continue  # nothing in it is recent enough (the rotated generation is older still)
        except OSError:
            continue
        recent.append(Path(str(log)[:-len(confirmations.SUFFIX)]))
    out: list[tuple[float, dict[str, Any]]] = []
    for path in recent:
        try:
            identity = StateStore.existing(path).identity
        except StateError:
            continue
        if persona not in (None, identity["persona"]):
            continue
        for row in confirmations.read(path, since=since):
            out.append((row.at, {"persona": identity["persona"], "consumer": identity["consumer"],
                                 "api_base": identity["api_base"], **row.as_json()}))
    return [row for _at, row in sorted(out, key=lambda pair: pair[0])]
