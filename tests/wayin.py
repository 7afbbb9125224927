"""What the stand-ins for a push watcher's way into a session share (tests/copilotext.py: Copilot CLI's
extension; tests/codexqueue.py: `codex queue`; tests/opencodeserver.py: OpenCode's server): the harness
behind the way in, which takes a pushed text (or refuses it) and records it in the session's record when
the turn takes it, the way the real ones do (measured: docs/copilot.md, docs/codex.md, docs/opencode.md).

Each push gets a fate:

    taken     recorded 0..`record_delay` s later (the idle session's turn starts)
    late      recorded 0.5..2 s later (it waited behind a long turn: a watcher may be killed and the next
              one push it again before it shows)
    never     taken, never recorded (a queued turn the session never ran): it stays pending with the
              watcher's holder until the next watcher of the session, the session's end or its host's end
    refused   the way in answers with an error
    dropped   the crash trials killed the watcher the moment its push arrived, and the push is dropped:
              the watcher died between recording the batch as pending and pushing it (`arm`)

By default every push is taken (or, with `refuse_share`, refused at random); `fates`, an iterator of the
first four, decides each push in turn instead (the crash trials cycle through a fixed list, so every run
has each fate whatever its timing). `refuse`: every push fails; `records` False: every push is taken and
never recorded. `pushes` lists every push with its fate and its sender's `tag` (what the front end can tell
of the sender: a pid, a run number), `prompts` the requests of those taken.

`serve_unix` is the JSON-lines Unix-socket server two of the front ends use.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TAKEN, LATE, NEVER, REFUSED, DROPPED = "taken", "late", "never", "refused", "dropped"
FATES = (TAKEN, LATE, NEVER, REFUSED, DROPPED)
LATE_DELAY = (0.5, 2.0)


@dataclass
class Push:
    tag: str
    text: str
    fate: str
    request: dict = field(default_factory=dict)

    @property
    def delivered(self) -> bool:
        """The model is given it (now or later): it is, or will be, in the record."""
        return self.fate in (TAKEN, LATE)


class WayIn:
    """The harness behind one session's way in (module docstring). A front end calls `offer` for each push
    and answers its sender by the result; a subclass writes the record line (`record`) and says what a
    watcher of the session needs to find it (`watcher_env`, `input_fields`)."""

    #: a push's tag is its sender's pid (the watcher's own); else the tag given in `watcher_env`
    tag_is_pid = False

    def __init__(self, *, record_delay: float = 0.0, refuse_share: float = 0.0, seed: int = 0):
        self.record_delay = record_delay
        self.refuse_share = refuse_share
        self.rng = random.Random(seed)
        self.fates: Iterator[str] | None = None
        self.refuse = False
        self.records = True
        self.pushes: list[Push] = []
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self._armed: tuple[str, Callable[[], bool]] | None = None
        self.closed = False

    # -- what a front end calls --------------------------------------------------------------------------
    def offer(self, text: str, tag: str, request: dict | None = None) -> bool:
        """One push from the sender `tag`: True when the harness took it."""
        with self._lock:
            armed, self._armed = self._armed, None
            if armed is not None and armed[0] != tag:
                self._armed, armed = armed, None  # another sender (a killed watcher's straggler): not this one
        if armed is not None and armed[1]():
            with self._lock:
                self.pushes.append(Push(tag, text, DROPPED, request or {}))
            return False
        with self._lock:  # one hold: a push `close` did not refuse has its timer running before `settle` looks
            fate = self._fate() if not self.closed else REFUSED
            if fate == REFUSED and armed is not None:
                fate = TAKEN  # killed after the push: the harness took it
            push = Push(tag, text, fate, request or {})
            self.pushes.append(push)
            if fate == LATE or (fate == TAKEN and self.record_delay):
                delay = self.rng.uniform(*LATE_DELAY) if fate == LATE else self.rng.uniform(0.0, self.record_delay)
                timer = threading.Timer(delay, self.record, args=(text,))
                timer.start()
                self._timers.append(timer)
        if fate == TAKEN and not self.record_delay:
            self.record(text)
        return push.fate in (TAKEN, LATE, NEVER)

    def _fate(self) -> str:
        if self.refuse:
            return REFUSED
        if self.fates is not None:
            return next(self.fates)
        if self.refuse_share and self.rng.random() < self.refuse_share:
            return REFUSED
        return TAKEN if self.records else NEVER

    # -- what the crash trials call ---------------------------------------------------------------------
    def arm(self, tag: str, at_push: Callable[[], bool]) -> None:
        """Call `at_push` the moment the next push of sender `tag` arrives, before the harness takes it (the
        trials kill the watcher there); it returns True to drop that push, False to let the harness take it."""
        with self._lock:
            self._armed = (tag, at_push)

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    @property
    def prompts(self) -> list[dict]:
        """The requests the harness took."""
        with self._lock:
            return [p.request for p in self.pushes if p.fate in (TAKEN, LATE, NEVER)]

    def record(self, text: str) -> None:
        """Write what the harness records once the model is given `text`."""
        raise NotImplementedError

    def watcher_env(self, tag: str) -> dict[str, str]:
        """What a watcher's environment needs to reach this way in (and, unless `tag_is_pid`, to tag its pushes)."""
        return {}

    def input_fields(self) -> dict[str, str]:
        """What the watcher's input (its harness's hook input) needs beyond the session's record."""
        return {}

    def settle(self) -> None:
        """Wait until every push that is to be recorded is in the record."""
        while True:
            with self._lock:
                timers, self._timers = self._timers, []
            if not timers:
                return
            for timer in timers:
                timer.join()

    def close(self) -> None:
        """The session's process is gone: nothing more is taken, and what was taken is recorded."""
        with self._lock:
            self.closed = True
        self.settle()


def peer_pid(conn: socket.socket) -> int:
    """The pid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


def serve_unix(path: Path, answer: Callable[[dict, int], dict]) -> socket.socket:
    """Listen at `path`; for each connection read one JSON line and write back `answer(request, peer pid)` as
    one, in a daemon thread, one connection at a time. Close the returned socket to stop."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                try:
                    request = json.loads(conn.makefile().readline())
                    conn.sendall(json.dumps(answer(request, peer_pid(conn))).encode() + b"\n")
                except (OSError, ValueError):
                    pass  # the sender went away mid-request (killed): the harness sees a closed connection

    threading.Thread(target=loop, daemon=True).start()
    return server
