"""Fixtures of the Claude Code hook tests: a sandbox with the hooks' token, an opted-in project, and one
that did not opt in."""

from __future__ import annotations

from pathlib import Path

import pytest

from kijito_pull.sandbox import Sandbox

TOKEN = "hook-token-5e1"
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"


@pytest.fixture
def sb():
    with Sandbox(token=TOKEN).start() as sandbox:
        yield sandbox


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
