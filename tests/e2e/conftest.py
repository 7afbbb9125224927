"""Fixtures for the end-to-end tests that drive the real harnesses (see tests/e2e/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import harness as h
from tests.e2e.fakemodel import FakeModel


@pytest.fixture(autouse=True)
def _kill_harness_processes() -> Iterator[None]:
    """Whatever a test started (process groups, tmux servers) dies with the test, pass or fail."""
    yield
    h.kill_all()
    h.kill_all_tmux()


@pytest.fixture(scope="session")
def netns() -> Iterator[h.NetNS]:
    """The loopback-only network namespace harnesses run in (inactive when unavailable)."""
    yield h.netns()


@pytest.fixture
def sandbox(netns: h.NetNS) -> Iterator:
    """A Kijito sandbox reachable from the harnesses (listening inside their namespace)."""
    from tests.e2e import claude_helpers as ch

    sb = ch.start_sandbox()
    try:
        yield sb
    finally:
        sb.stop()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """The kijito-pull state directory of the test (cursors, leases, session files)."""
    return tmp_path / "kijito-state"


@pytest.fixture
def codex_harness() -> h.Harness:
    return h.require_harness("codex")


@pytest.fixture
def fake_model(netns: h.NetNS, tmp_path: Path) -> Iterator[FakeModel]:
    """A fresh fake model server reachable from the harnesses; requests also logged to
    ``tmp_path/model-requests.jsonl`` for post-mortems."""
    fm = FakeModel(bind=netns.listen, log_path=str(tmp_path / "model-requests.jsonl")).start()
    try:
        yield fm
    finally:
        fm.stop()


@pytest.fixture(params=["claude", "claude2"], ids=["claude-2.1.197", "claude-2.1.332"])
def claude_harness(request: pytest.FixtureRequest) -> h.Harness:
    """Each pinned Claude Code in turn: the oldest supported (2.1.197: no session inbox socket) and the
    current release (2.1.332: the socket, so the waker pushes instead of ringing)."""
    return h.require_harness(request.param)


@pytest.fixture
def pi073_harness() -> h.Harness:
    return h.require_harness("pi073")


@pytest.fixture
def pi1_harness() -> h.Harness:
    return h.require_harness("pi1")


@pytest.fixture(params=["pi073", "pi1"])
def pi_harness(request: pytest.FixtureRequest) -> h.Harness:
    """Each pi line in turn (0.73.x on the system node, 1.x on the Node 22 from .harness/)."""
    return h.require_harness(request.param)


@pytest.fixture
def e2e_home(tmp_path: Path) -> Path:
    """An empty HOME for the harness under test."""
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def e2e_workdir(tmp_path: Path) -> Path:
    """The project directory the harness runs in."""
    work = tmp_path / "work"
    work.mkdir()
    return work
