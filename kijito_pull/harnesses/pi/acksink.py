"""The acknowledge-over-stdin protocol: the controlling process confirms each message it handed over.

Used by the pi extension, whose "took it" is pi showing the message in its session (the `message_end`
of the user message, not `pi.sendUserMessage` returning), something only it can see.
watch writes each event as an NDJSON line on stdout; for a `new` event it then waits for one line on
stdin before acknowledging the message and handing over the next:

    {"ack": "<event_id>"}                 handed over: advance the cursor past it
    {"nack": "<event_id>", "reason": ...} not handed over: hold the cursor, deliver it again later
    {"sweep": true}                       pull now (e.g. the agent just settled)

Closing stdin ends watch. Malformed lines are reported on stderr and ignored.

Each `new` event written in this mode also carries `text`: the message rendered for a model by
`render.for_model` (facts, sanitized and quoted body, clipped with a marker and the command that
reads the rest), so the controller hands the model exactly the framing every other entry point uses
instead of re-implementing it, whatever `--content-chars` clipped `content` to (none with --no-content).

With an interrupt policy (`watch --ack-stdin --interrupt all|urgent|turn-end`, the project's `inbox
interrupt:` line, which the extension reads from `kijito-pull optin --json`), each `new` event also
carries `deliver_as`: `"steer"` for mail the policy lets reach the agent in the middle of a run
(`optin.may_interrupt` with the message's urgency), `"followUp"` for mail that waits for the run's
end. Inbox rows carry no urgent flag: a rise of the persona's `unread_urgent` count, which the watch
loop passes on (`urgent_arrived`), marks the mail of the pull that finds it (core/urgency.py
`Arrivals`), and its `text` then says urgent mail is among it. The words are pi's `sendUserMessage`
options, so the extension passes them on as they are. Without a policy the field is left out and the
controller decides (an extension that predates it sends every message as a followUp, the behaviour
before there was a policy); the acknowledgement rule is the same either way.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

from kijito_pull.core import render, urgency
from kijito_pull.core.models import Message
from kijito_pull.core.sink import CLOSED, PULL_NOW
from kijito_pull.harnesses.session.optin import may_interrupt
from kijito_pull.sinks.stdout import NdjsonSink

MAX_LINE = 64 * 1024


class StdinCommands(threading.Thread):
    """Reads the controller's lines; acks go to `acks`, sweeps and end-of-input to the watch loop."""

    def __init__(self, stream: IO[str], loop: queue.Queue, errors: IO[str] = sys.stderr):
        super().__init__(name="kijito-stdin", daemon=True)
        self.stream = stream
        self.loop = loop
        self.errors = errors
        self.acks: queue.Queue = queue.Queue()

    def run(self) -> None:
        try:
            while True:
                line = self.stream.readline(MAX_LINE)
                if not line:
                    break
                self._handle(line)
        except (OSError, ValueError):
            pass
        self.acks.put(("eof", None))
        self.loop.put(CLOSED)

    def _handle(self, line: str) -> None:
        if not line.strip():
            return
        try:
            command = json.loads(line)
        except (ValueError, RecursionError):  # malformed, or nested deeper than the parser's stack
            command = None
        if isinstance(command, dict) and command.get("sweep") is True:
            self.loop.put(PULL_NOW)
        elif isinstance(command, dict) and isinstance(command.get("ack"), str):
            self.acks.put(("ack", command["ack"]))
        elif isinstance(command, dict) and isinstance(command.get("nack"), str):
            self.acks.put(("nack", command["nack"]))
        else:
            self.errors.write("kijito-pull: watch: ignoring a malformed control line on stdin "
                              '(expected {"ack": ID}, {"nack": ID} or {"sweep": true})\n')
            self.errors.flush()


class AckSink(NdjsonSink):
    """NDJSON on stdout; a message counts as taken only when the controller acknowledges its event_id."""

    def __init__(self, stream: IO[str], commands: StdinCommands, timeout: float = 60.0,
                 errors: IO[str] = sys.stderr, interrupt: str | None = None):
        super().__init__(stream)
        self.commands = commands
        self.timeout = timeout
        self.errors = errors
        self.interrupt = interrupt  # an optin.INTERRUPT_POLICIES value, or None: no deliver_as
        self.urgent = urgency.Arrivals()  # urgent mail the watch loop saw the counts announce
        self._batch: dict[str, list[Message]] = {}  # each persona's current pull, for the urgency note

    def urgent_arrived(self, persona: str, count: int) -> None:
        self.urgent.arrived(persona, count)

    def begin(self, persona: str, messages: Sequence[Message]) -> None:
        self.urgent.found(persona, messages)
        self._batch[persona] = list(messages)

    def deliver(self, event: dict, message: Message) -> bool:
        persona = event.get("persona") or ""
        if message is not None and event.get("event") == "new" and "content" in event:  # not with --no-content
            note = self.urgent.note(persona, self._batch.get(persona) or [message]) \
                if self.urgent.marked(persona, message) else ""
            event = dict(event, text=render.for_model(persona, [message], extra_notes=[note] if note else ()))
        if message is not None and event.get("event") == "new" and self.interrupt is not None:
            steer = may_interrupt(self.interrupt, True if self.urgent.marked(persona, message) else message.urgent)
            event = dict(event, deliver_as="steer" if steer else "followUp")
        if not super().deliver(event, message):
            return False
        wanted = event["event_id"]
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                kind, event_id = self.commands.acks.get(timeout=max(0.0, remaining))
            except queue.Empty:
                self._note(f"no acknowledgement for {wanted} within {self.timeout:g} s; it will be delivered again")
                return False
            if kind == "eof":
                self.commands.acks.put(("eof", None))  # stays closed for later waits
                return False
            if event_id == wanted:
                if kind == "nack":
                    self._note(f"{wanted} was not taken; it will be delivered again")
                return kind == "ack"
            # an answer to an earlier, already abandoned event: ignore it

    def _note(self, text: str) -> None:
        self.errors.write(f"kijito-pull: watch: {text}\n")
        self.errors.flush()
