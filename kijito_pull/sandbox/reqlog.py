"""The request log: what clients asked for, so tests can assert on it. Never holds credentials.

An entry is appended when a request arrives (so order is arrival order, and a request that is being
held is already visible) and completed with its status when it is answered. `status` stays None for
a request that got no HTTP answer (reset/close faults, client gone). Entries have the keys
method, path, query, user_agent, auth_ok, status, ts (epoch seconds), and fault (the applied
fault kind or None).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping
from typing import Any


class RequestLog:
    """Every request the sandbox received, in order (GET /_sandbox/requests), for tests to count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []

    def open(
        self, method: str, path: str, query: Mapping[str, str], user_agent: str | None, auth_ok: bool
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "method": method,
            "path": path,
            "query": dict(query),
            "user_agent": user_agent,
            "auth_ok": bool(auth_ok),
            "status": None,
            "ts": time.time(),
            "fault": None,
        }
        with self._lock:
            self._entries.append(entry)
        return entry

    def update(self, entry: dict[str, Any] | None, **fields: Any) -> None:
        if entry is None:
            return
        with self._lock:
            entry.update(fields)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
