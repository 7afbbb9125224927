"""`Sandbox`: a Kijito-compatible server on 127.0.0.1 that tests, demos and developers drive from Python.

    with Sandbox(token="t") as sb:
        sb.send(to="P", sender="Q", content="hi")
        requests.get(sb.url + "/api/inbox", params={"persona": "P", "mark_read": "false"},
                     headers={"Authorization": "Bearer t", "User-Agent": "me/1"})
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from kijito_pull.sandbox.faults import FaultBook
from kijito_pull.sandbox.reqlog import RequestLog
from kijito_pull.sandbox.server import SandboxHTTPServer, serve_in_thread
from kijito_pull.sandbox.store import Store

HOST = "127.0.0.1"


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer")
    return value


class Sandbox:
    """A Kijito-compatible server on 127.0.0.1 (`kijito-pull sandbox`, the demo and the tests): its store,
    the request log, faults to inject, and the inbox window it serves."""

    def __init__(
        self,
        token: str,
        db_path: str | None = None,
        port: int = 0,
        window_limit: int = 20,
        content_budget: int = 65536,
        auth_header: str | None = None,
        identity: str = "sandbox",
    ) -> None:
        if not isinstance(token, str) or not token.strip():
            raise ValueError("the sandbox needs a non-empty token")
        self.token = token.strip()
        self.db_path = db_path
        self.port = port
        self.auth_header = auth_header or None
        self.identity = identity
        self._window_lock = threading.Lock()
        self._limit = _positive_int("window_limit", window_limit)
        self._budget = _positive_int("content_budget", content_budget)
        self.store = Store(db_path)
        self.faults = FaultBook()
        self.log = RequestLog()
        self.stop_event = threading.Event()
        self._server: SandboxHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> Sandbox:
        if self._server is not None:
            raise RuntimeError("sandbox already started")
        if self.stop_event.is_set():
            raise RuntimeError("a stopped sandbox cannot be restarted; create a new one")
        self._server = SandboxHTTPServer((HOST, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = serve_in_thread(self._server)
        return self

    def stop(self) -> None:
        """Stop serving: ends held requests and open connections, then closes the database."""
        if self.stop_event.is_set():
            return
        self.stop_event.set()
        self.store.wake_waiters()
        if self._server is not None:
            self._server.shutdown()
            self._server.close_all_connections()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.store.close()

    def stopping(self) -> bool:
        return self.stop_event.is_set()

    def __enter__(self) -> Sandbox:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("sandbox not started")
        return f"http://{HOST}:{self.port}"

    # -- mail and directory ------------------------------------------------------------------------

    def send(
        self, to: str, sender: str | None = None, content: str = "", urgent: bool = False,
        created: str | None = None,
    ) -> int:
        """Store a message exactly as POST /api/send would; returns its id."""
        return self.store.send(to, sender or self.identity, content, urgent=urgent, created=created)

    def late_commit(self) -> tuple[int, Callable[[str, str, str], int]]:
        """What a database does under concurrent writers: an id is taken now, the message becomes visible
        later, after higher ids were visible. Returns (id, commit(to, sender, content))."""
        mid = self.store.reserve_id()
        return mid, lambda to, sender, content: self.store.send_as(mid, to, sender, content)

    def forget_account(self) -> None:
        """A server that lost (or restored an old copy of) the account: ids start over below any cursor."""
        self.store.forget_account()

    def add_persona(self, persona: str, memory_count: int = 0) -> None:
        self.store.add_persona(persona, memory_count)

    def mark_read(self, persona: str, ids: Iterable[int] | None = None) -> int:
        """Mark rows read as another reader would (all of the inbox when ids is None)."""
        return self.store.mark_read(persona, ids)

    def messages(self, persona: str | None = None) -> list[dict[str, Any]]:
        """Every stored row (or one inbox's) by id, with to/from/read/urgent: for assertions."""
        return self.store.messages(persona)

    # -- faults, request log, window ---------------------------------------------------------------

    def add_fault(self, rule: dict[str, Any]) -> None:
        self.faults.add(rule)

    def clear_faults(self) -> None:
        self.faults.clear()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.log.snapshot()

    def clear_requests(self) -> None:
        self.log.clear()

    def window(self) -> tuple[int, int]:
        with self._window_lock:
            return self._limit, self._budget

    def set_window(self, limit: int | None = None, content_budget: int | None = None) -> None:
        new_limit = self._limit if limit is None else _positive_int("limit", limit)
        new_budget = (
            self._budget if content_budget is None else _positive_int("content_budget", content_budget)
        )
        with self._window_lock:
            self._limit, self._budget = new_limit, new_budget
