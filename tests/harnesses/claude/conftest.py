"""Fixtures of the Claude Code hook tests: an opted-in project and one that did not opt in. The sandbox is
tests/conftest.py's `sb`, which serves the test module's TOKEN."""

from __future__ import annotations

from pathlib import Path

import pytest

TOKEN = "hook-token-5e1"
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "AGENTS.md").write_text(OPT_IN)
    return folder


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "AGENTS.md").write_text("# A project that did not opt in\n")
    return folder


@pytest.fixture
def fake():
    """A fake of Claude Code's session inbox socket (test_inbox_socket.FakeInbox), closed after the test."""
    from tests.harnesses.claude.test_inbox_socket import FakeInbox

    inbox = FakeInbox()
    try:
        yield inbox
    finally:
        inbox.close()
