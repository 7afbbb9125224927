"""What a test needs installed (a harness, redis-server, Chromium, node, tmux): missing on a developer's machine,
the test is skipped; under KIJITO_PULL_REQUIRE_E2E=1 (.ci/run sets it and installs them all) it fails instead, so
CI never passes by skipping."""

from __future__ import annotations

import os
from typing import NoReturn

REQUIRE_ENV = "KIJITO_PULL_REQUIRE_E2E"


def missing(what: str) -> NoReturn:
    """Skip the test for want of `what` (a sentence saying what is missing and how to install it), or fail it
    when REQUIRE_ENV=1. (pytest is imported here, not above: the benches import the e2e helpers without it.)"""
    import pytest

    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{what}; {REQUIRE_ENV}=1 requires it", pytrace=False)
    pytest.skip(what)
