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


@pytest.fixture
def sb(request):
    """A started sandbox whose token is the test module's TOKEN (distinct per module, so a leak test can
    grep for it), with the default 20-row window."""
    with Sandbox(token=getattr(request.module, "TOKEN", "test-token")).start() as sandbox:
        yield sandbox


@pytest.fixture
def cli(sb, tmp_path):
    """kijito-pull configured for `sb`: token and API base in the environment, a private state dir."""
    from tests.clirunner import Cli

    return Cli(sb.url, sb.token, tmp_path / "state")
