"""Polling for a condition in tests: the one helper, so every test waits the same way."""

from __future__ import annotations

import time
from typing import Any, Callable


def until(predicate: Callable[[], Any], timeout: float = 15.0, step: float = 0.05) -> Any:
    """The first truthy value of `predicate` within `timeout` seconds, else its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()
