"""Fixtures of the core tests: a real cursor store in a private temp dir and a deterministic event factory."""

from __future__ import annotations

import pytest

from kijito_pull.core.events import EventFactory
from kijito_pull.core.state import StateStore

PERSONA = "testbot"
IDENTITY = {"api_base": "https://api.kijito.test", "persona": PERSONA, "consumer": "agent"}


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "cursors"
    return StateStore(d / "c.json", d / "c.lock", IDENTITY)


@pytest.fixture
def factory():
    return EventFactory("0123456789abcdef")
