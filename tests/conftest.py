"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

from kijito_pull.sandbox import Sandbox


@pytest.fixture
def sandbox():
    """A started Kijito sandbox on 127.0.0.1 (random free port, token "test-token", in-memory DB)."""
    sb = Sandbox(token="test-token").start()
    try:
        yield sb
    finally:
        sb.stop()
