"""The mail source contract: where one (persona, consumer)'s mail state lives.

Everything above core (the hand-over loop in core/delivery.py and every entry point on it) is written
against these two protocols and never knows which source it reads. Today's source is the Kijito engine
over a local cursor file (`core.engine.Engine`, `core.pull.Pull`); a Redis Streams consumer group
is meant to be the second, mapping each call onto its own mechanism (shared/design.md, "Where the mail
state lives"):

    MailSource.open(holder=)   one pull, exclusive for this (persona, consumer) while it is open:
                               the cursor lock and a page walk (Kijito); XREADGROUP (Redis)
    OpenPull.pending           unseen mail, in id order, that nobody live holds
    OpenPull.ack / ack_all     the consumer took it: the cursor moves past it (XACK)
    OpenPull.hand_over         it went to an agent session (a Holder) that confirms it later: pending
                               with that holder, unacknowledged (a pending entry of the group)
    OpenPull.held / confirm    what this holder was handed before / the harness's record shows it: ack
    OpenPull.retake / release  handed over and never shown: unseen again, its count kept
    OpenPull.refuse            refused once more; parked as poison at the limit (a dead-letter stream)
    MailSource.settle          the same confirm / release outside a pull, briefly exclusive, no request
    MailSource.held_by         the ids a holder holds now (SessionEnd settles them)
    MailSource.renew           a live holder that `renews` keeps its hold: the seconds until the next renewal
                               is due, or None when this source needs none (Kijito: the holder's process is
                               on this machine, its death is seen; Redis: the record's deadline moves on)
    MailSource.unseen          the ids unseen now, without changing anything (a peek)
    MailSource.look            the same as messages, under the pull's exclusion (a hook delivering now is
                               waited for), and whether the source may vouch "nothing new" by its files
    MailSource.wake            a `Wake`: block until the persona's mail may have changed: the notify/pending
                               long-poll (Kijito, core/wake.py); XREAD BLOCK on the stream (Redis)
    MailSource.remarks         lines for a person after a pull (a persona Kijito knows only in another
                               case; a read receipt that waits): what only this source can say

A dead holder's entries, or those past their deadline, are claimed back by the source itself when the
next pull opens (XAUTOCLAIM). `HoldingPull` is the half of an OpenPull every source shares (what a
holder holds, and how it is confirmed, taken back or released); a source supplies its `ack_all` and
what giving a message back means to it (`_unhold`). Every call raises `core.models.ApiError` when the
source cannot be read and `core.state.StateError` when its state cannot be locked or saved; nothing is
acknowledged then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from kijito_pull.core.models import Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.wake import Wakeup


class OpenPull(Protocol):
    """One open pull of one (persona, consumer): what is unseen, and how a consumer takes it."""

    persona: str
    pending: list[Message]
    held: list[Message]
    signals: list[dict]

    @property
    def pinned(self) -> bool: ...
    @property
    def problem(self) -> str | None: ...
    @property
    def hidden_unread(self) -> bool | None: ...

    def ack(self, message: Message) -> None: ...
    def ack_all(self, messages: Iterable[Message]) -> None: ...
    def refuse(self, message: Message, reason: str = ...) -> dict | None: ...
    def hand_over(self, messages: Iterable[Message], shown: Iterable[int] | None = None) -> None: ...
    def confirm(self, ids: Iterable[int]) -> list[Message]: ...
    def retake(self) -> list[Message]: ...
    def release(self, ids: Iterable[int]) -> list[Message]: ...


class HoldingPull:
    """What every source's OpenPull shares: `held` (handed to this pull's holder, not yet confirmed) against
    `pending`, and `confirm` / `retake` / `release` over them. A subclass supplies `ack_all` (durable) and
    `_unhold(messages, given_back)`: its own record of `messages` handed back, `given_back` when another
    consumer may take them at once (`release`: a write that failed) rather than only this pull (`retake`)."""

    pending: list[Message]
    held: list[Message]

    def ack(self, message: Message) -> None:
        """The consumer took `message`: durable before the next one is handed over."""
        self.ack_all([message])

    def ack_all(self, messages: Iterable[Message]) -> None:
        raise NotImplementedError

    def _unhold(self, messages: list[Message], given_back: bool) -> None:
        raise NotImplementedError

    def _hold(self, messages: Sequence[Message]) -> None:
        """`messages` were handed over to this pull's holder: out of `pending`, into `held` (id order)."""
        handed = {m.id for m in messages}
        have = {m.id for m in self.held}
        self.pending = [m for m in self.pending if m.id not in handed]
        self.held = sorted([*self.held, *(m for m in messages if m.id not in have)], key=lambda m: m.id)

    def confirm(self, ids: Iterable[int]) -> list[Message]:
        """The harness's record shows these were given to the model: acknowledge them. Returns those acked."""
        wanted = set(ids)
        done = [m for m in self.held if m.id in wanted]
        if done:
            self.held = [m for m in self.held if m.id not in wanted]
            self.ack_all(done)
        return done

    def retake(self) -> list[Message]:
        """What this holder was handed and has not confirmed goes back to `pending` (unseen, count kept)."""
        back, self.held = self.held, []
        return self._back(back, given_back=False)

    def release(self, ids: Iterable[int]) -> list[Message]:
        """Only these of what this holder holds go back (a write that failed): unseen again, to anyone."""
        wanted = set(ids)
        back = [m for m in self.held if m.id in wanted]
        if not back:
            return []
        self.held = [m for m in self.held if m.id not in wanted]
        return self._back(back, given_back=True)

    def _back(self, back: list[Message], given_back: bool) -> list[Message]:
        self._unhold(back, given_back)
        self.pending = sorted([*self.pending, *back], key=lambda m: m.id)
        return back


class SignalFactory(Protocol):
    """Builds the diagnostic events a pull raises (core.events.EventFactory)."""

    def signal(self, kind: str, persona: str, **fields: Any) -> dict: ...


@dataclass(frozen=True)
class Look:
    """Unseen mail now (`pending`, id order) and, when the source's state lives in files and nothing is
    unseen, held or in doubt, `vouched`: what `look(vouch=)` made of those files under the pull's exclusion
    (a lean hook answers "nothing new" while they stay as they were); None: vouch nothing."""

    pending: list[Message]
    files: list[str]
    vouched: Any = None


class Wake(Protocol):
    """Blocks until one persona's mail may have changed (core/wake.py's `Wakeup` says what it saw). `brief`:
    hold a second at most (the caller waits for something else too). Never raises."""

    def wait(self, brief: bool = False) -> Wakeup: ...
    def close(self) -> None: ...


class MailSource(Protocol):
    """Where one (persona, consumer)'s mail state lives (the module docstring maps each call)."""

    persona: str
    consumer: str
    factory: Any  # the EventFactory its events are built with

    def open(self, peek: bool = False, holder: Holder | None = None) -> AbstractContextManager[OpenPull]: ...
    def settle(self, holder: str, confirmed: Iterable[int] = (), released: Iterable[int] = (),
               shown: Iterable[int] = ()) -> None: ...
    def held_by(self, holder: str) -> list[int]: ...
    def renew(self, holder: Holder) -> float | None: ...
    def unseen(self, exclude: Iterable[int] = ()) -> list[int]: ...
    def look(self, vouch: Callable[[list[str]], Any] | None = None) -> Look: ...
    def wake(self, hold: int, poll: float) -> Wake: ...
    def remarks(self, delivered: int) -> list[str]: ...


class Confirmation(Protocol):
    """The harness's own record of what its model was given (a transcript): the hand-over loop asks it
    which held ids it shows, acknowledges those, and only then tells it they are kept, so a kill between
    the two makes the next look find the same markers again instead of passing them."""

    def shown(self, persona: str, ids: Sequence[int]) -> set[int]: ...
    def kept(self) -> None: ...
