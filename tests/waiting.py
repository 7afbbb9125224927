"""Polling for a condition in tests: the one helper, so every test waits the same way."""

from __future__ import annotations

import os
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


def budget(seconds: float) -> float:
    """A time bound a test checks, stretched by how busy the machine is right now. `seconds` is the bound on a
    machine with a core to spare (the product's figures are measured by bench/ and kept in docs/benchmarks.md,
    not here); with more runnable processes than cores (a CPU hog beside the suite, a loaded CI runner) each
    process gets only a share of a core and the same work takes longer by about that much. The factor is the
    1-minute load average per core, at least 1 and at most MAX_STRETCH (so a bound never grows past what the
    test waits for: the waits are 15-20 s for 2 s bounds; a bound of 12 s still fails a wake that never came
    in time), read when the bound is checked."""
    try:
        per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        per_core = 1.0
    return seconds * min(MAX_STRETCH, max(1.0, per_core))


#: The most `budget` stretches a bound: the e2e suite passed beside a CPU hog at load 15 on 2 cores (7.5 per
#: core); a bound stretched further would exceed the waits around it and mean nothing.
MAX_STRETCH = 6.0
