"""Pushing new mail into a Claude Code session through its inbox socket, and confirming it.

The session's one long-lived process (the waker, kijito_pull.harnesses.claude.hooks) owns a `Pusher`
when the session has an inbox socket (kijito_pull.harnesses.claude.inbox_socket). A busy session reads
a pushed message at its next tool boundary; an idle one takes a new turn with it.

    push()   under the cursor lock: the unseen mail the project's interrupt policy lets through
             (`inbox interrupt:`, kijito_pull.harnesses.session.optin.may_interrupt), rendered as one
             hand-over (core.render.hand_over: data, with each message's `kijito-ref:` marker), recorded
             as pending with the pusher's own holder, then written to the socket. One socket message
             holds at most `max_text` characters (inbox_socket.MAX_TEXT): when the hand-over would be
             longer it shows fewer messages (the rest follow in the next pushes), and a message that
             does not fit even alone is set aside (`set_aside`: no longer `wanted`), so the doorbell or
             the Stop hook hands it over, while pushing goes on for the rest
    check()  reads the transcript (harnesses/transcript.py): a marker in a queue-operation line means
             Claude Code queued the message (accepted); anywhere else, that the model was given it, and
             only then is it acknowledged (Engine.settle). A push that shows neither within
             `accept_wait` seconds was not taken (`crossSessionInbound` hold or refuse, a socket that
             swallows messages): it is unseen again at once and the pusher stops pushing (`refused`),
             so the doorbell and the Stop hook deliver it instead.

One message is never handed over on two paths: the pending entries are held by
`claude-push:<session id>` with the pusher's own pid, so while the pusher lives the session's Stop and
prompt hooks (holder `claude:<session id>`) see them as held by another live holder and leave them
alone; if the pusher dies they are claimed back and the hooks hand them over.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import IO

from kijito_pull.core import render, urgency
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.engine import Engine
from kijito_pull.core.models import Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import HELD_KEPT, BatchSink
from kijito_pull.harnesses.claude.inbox_socket import MAX_TEXT, InboxSocket
from kijito_pull.harnesses.hookgate import say
from kijito_pull.harnesses.session.optin import may_interrupt
from kijito_pull.harnesses.transcript import Transcript

ACCEPT_WAIT = 5.0  # seconds for the transcript to show a push queued or given to the model
PUSH_TTL = 30 * 60.0  # a push queued behind a long tool call may wait this long before it is claimed back
PUSH_KEY = "claude-push"
SOCKET_NOTE = ("kijito-pull pushed this Kijito mail into the session through Claude Code's session inbox as it "
               "arrived; it was not typed by the user.")


def push_holder_key(session_id: str) -> str:
    return f"{PUSH_KEY}:{session_id}"


def _more_note(later: list[Message]) -> str:
    ids = [m.id for m in later]
    noun = "message" if len(ids) == 1 else "messages"
    return (f"{len(ids)} more unread {noun} (ids {min(ids)} to {max(ids)}) did not fit in this push; "
            f"they follow separately.")


class _PushSink(BatchSink):
    """One push: what the interrupt policy lets through (`select`), fitted into one socket message
    (`compose`), written to the session inbox socket. What the pusher pushed before stays held (HELD_KEPT):
    `Pusher.check` confirms it from the transcript as it goes."""

    held = HELD_KEPT

    def __init__(self, pusher: Pusher):
        super().__init__()
        self.pusher = pusher

    def select(self, pending: Sequence[Message]) -> list[Message]:
        return [m for m in pending if self.pusher.wanted(m)]

    def compose(self, persona: str, messages: Sequence[Message]) -> tuple[str, list[Message]] | None:
        return self.pusher.fit(list(messages), [SOCKET_NOTE, *self.pusher.urgent_notes(list(messages)), *self.notes])

    def before_hand_over(self, shown: Sequence[Message]) -> None:
        self.pusher.mark_handed()  # SessionEnd then settles whatever is pending

    def write(self, text: str, shown: Sequence[Message]) -> bool:
        try:
            self.pusher.socket.send(text)
        except (OSError, ValueError) as exc:
            self.pusher.refused = f"the session inbox socket cannot be written ({type(exc).__name__}: {exc})"
            return False
        return True


class Pusher:
    """The session's pusher: new mail the interrupt policy lets through goes into the session inbox
    socket as a pending hand-over (`push`), confirmed from the transcript (`check`); the module
    docstring has the whole contract."""

    def __init__(self, engine: Engine, sock: InboxSocket, transcript: Transcript, *, persona: str,
                 session_id: str, policy: str, pid: int, pid_start: str | None, errors: IO[str],
                 mark_handed: Callable[[], None] = lambda: None, accept_wait: float = ACCEPT_WAIT,
                 clock: Callable[[], float] = time.monotonic, max_text: int = MAX_TEXT):
        self.engine = engine
        self.socket = sock
        self.transcript = transcript
        self.persona = persona
        self.policy = policy
        self.holder = Holder(push_holder_key(session_id), pid, pid_start, ttl=PUSH_TTL)
        self.errors = errors
        self.mark_handed = mark_handed
        self.accept_wait = accept_wait
        self.clock = clock
        self.inflight: dict[int, float] = {}  # pushed, not yet seen queued or shown: id -> when
        self.queued: set[int] = set()  # Claude Code queued it; the model has not been given it yet
        self.confirmed: list[int] = []
        self.refused: str | None = None  # why this pusher stopped pushing
        self.max_text = max_text  # the longest text one socket message may carry
        self.set_aside: set[int] = set()  # too long to push even alone: the doorbell or Stop hook hands it over
        #: urgent mail the waker saw notify/pending's `unread_urgent` announce (rows carry no flag): it
        #: may interrupt under the `urgent` policy, and the push says urgent mail is among it
        self.urgent = urgency.Arrivals()

    def wanted(self, message: Message) -> bool:
        """Is this message pushed: may it reach the agent mid-turn (the project's interrupt policy, with the
        urgency the counts announced), and does it fit in a socket message?"""
        urgent = True if self.urgent.marked(self.persona, message) else message.urgent
        return message.id not in self.set_aside and may_interrupt(self.policy, urgent)

    def urgent_notes(self, batch: list[Message]) -> list[str]:
        """The push's note that urgent mail is among `batch`, if the counts said so."""
        note = self.urgent.note(self.persona, batch)
        return [note] if note else []

    @property
    def waiting(self) -> bool:
        """Pushes not yet confirmed (the waker must not leave, or ring, while there are any)."""
        return bool(self.inflight or self.queued)

    def push(self) -> list[int]:
        """Push the unseen mail that may interrupt, through the hand-over loop (core/delivery.py) with this
        pusher's holder; returns the ids written to the socket. Raises ApiError or StateError like any
        pull (nothing was handed over then)."""
        if self.refused is not None:
            return []
        report = pull_through(self.engine, self.engine.factory, _PushSink(self), holder=self.holder)
        now = self.clock()
        for i in report.delivered:
            self.inflight[i] = now
        return report.delivered

    def fit(self, batch: list[Message], notes: list[str]) -> tuple[str, list[Message]] | None:
        """The text of one push and the messages it shows, at most `max_text` characters: the hand-over of
        the whole batch, else of fewer messages (halved until it fits; a note says that more follow). A
        message that does not fit even alone is set aside; None when nothing is left to push."""
        while batch:
            count = len(batch)
            while True:
                later = batch[count:]
                extra = [*notes, _more_note(later)] if later else notes
                text, shown = render.hand_over(self.persona, batch[:count], extra_notes=extra)
                if shown and len(text) <= self.max_text:
                    return text, shown
                if len(shown) <= 1:
                    break
                count = len(shown) // 2
            if shown and later:  # alone, without the note on what follows
                text, shown = render.hand_over(self.persona, batch[:1], extra_notes=notes)
                if shown and len(text) <= self.max_text:
                    return text, shown
            # Not even one message fits: set it aside (all of them when none could be shown at all: the
            # notes alone leave no room), so the doorbell or the Stop hook hands it over instead.
            aside = batch[:1] if shown else batch
            self.set_aside.update(m.id for m in aside)
            listed = ", ".join(str(m.id) for m in aside[:10]) + (", ..." if len(aside) > 10 else "")
            why = (f"{len(text)} > {self.max_text} characters" if shown else
                   "this push's notes leave no room for a message")
            say(self.errors, f"claude push: message(s) {listed} do not fit in one session inbox message ({why}); "
                             f"they go by the doorbell or the Stop hook")
            batch = batch[len(aside):]
        return None

    def check(self) -> None:
        """Confirm from the transcript what the model was given; give back what the session never took."""
        if not self.waiting:
            return
        ids = set(self.inflight) | self.queued
        seen = self.transcript.scan({render.ref(self.persona, i): i for i in ids}, keep=False)
        shown = seen.shown & ids
        for i in shown | seen.queued:
            self.inflight.pop(i, None)
        self.queued = (self.queued | (seen.queued & ids)) - shown
        now = self.clock()
        late = sorted(i for i, at in self.inflight.items() if now - at > self.accept_wait)
        if shown or late:
            self.engine.settle(self.holder.key, confirmed=shown, released=late)
        self.transcript.keep_reached()  # only once what it found is durable
        self.confirmed += sorted(shown)
        if late:
            for i in late:
                self.inflight.pop(i, None)
            self.refused = (f"the session did not take what was pushed within {self.accept_wait:g} s (is "
                            f"`crossSessionInbound` set to hold or refuse?)")
            say(self.errors, f"claude push: {self.refused}; message(s) {', '.join(map(str, late))} are unseen "
                             f"again and go by the doorbell or the Stop hook")

    def finish(self) -> None:
        """On the way out: confirm what the transcript shows, give back what was never queued. (What Claude
        Code queued stays pending with this pusher and is claimed back once its process is gone.)"""
        with contextlib.suppress(Exception):
            self.check()
        if self.inflight:
            with contextlib.suppress(Exception):
                self.engine.settle(self.holder.key, released=list(self.inflight))
            self.inflight.clear()
