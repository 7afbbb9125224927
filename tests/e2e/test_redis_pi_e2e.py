"""A real pi session (both package lines) reading its mail from a Redis stream: the extension's watch
child inherits KIJITO_PULL_SOURCE and is given `--consumer` from KIJITO_PULL_CONSUMER, a real relay
fills the stream from the sandbox, and the proof is the mail inside the model requests, as in
test_pi_e2e.py. The session is pointed at a decoy Kijito whose request log must stay empty, and each
entry is acknowledged once pi showed it (the extension's ack)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kijito_pull.sandbox import Sandbox
from tests.e2e import harness as h
from tests.e2e import pi_helpers as ph
from tests.e2e import redis_helpers as rh
from tests.e2e.fakemodel import FakeModel, text_of
from tests.e2e.redis_helpers import redis_in_netns  # noqa: F401 - fixture

pytestmark = pytest.mark.e2e


def _sandbox(netns: h.NetNS) -> Sandbox:
    sandbox = ph.start_sandbox(netns)
    sandbox.add_persona(ph.PERSONA)
    sandbox.add_persona("loom")
    return sandbox


@pytest.fixture
def sb(netns: h.NetNS) -> Iterator[Sandbox]:
    with _sandbox(netns) as sandbox:
        yield sandbox


@pytest.fixture
def pi_decoy(netns: h.NetNS) -> Iterator[Sandbox]:
    """A second sandbox with the same token: what the pi session is told Kijito is."""
    with _sandbox(netns) as sandbox:
        yield sandbox


def test_idle_pi_session_is_woken_by_mail_from_the_stream_and_asks_kijito_nothing(
    pi_harness: h.Harness, netns: h.NetNS, sb: Sandbox, pi_decoy: Sandbox, redis_in_netns,  # noqa: F811
    fake_model: FakeModel, tmp_path: Path,
) -> None:
    project = ph.opt_in(tmp_path / "project")
    relay = rh.start_relay(netns, sb, redis_in_netns, tmp_path / "relay-state", token=ph.TOKEN)
    try:
        session = ph.start_pi_session(pi_harness, sb=pi_decoy, model=fake_model, root=tmp_path, project=project,
                                      state_dir=tmp_path / "state", env=rh.consumer_env(redis_in_netns))
        with session.proc as proc:
            assert session.wait_status("watching", 25.0) is not None, session.diagnostics()
            mid = sb.send(to=ph.PERSONA, sender="loom", content="STREAM-MAIL-1: please look at the build")
            rh.wait_relayed(redis_in_netns, 1)
            request = fake_model.wait_for_text("STREAM-MAIL-1", timeout=15)
            assert request is not None, session.diagnostics()
            assert f"id {mid}, from loom" in text_of(request)
            calls = ph.invocations(session.log)
            assert any(" watch --persona river --ack-stdin" in c and "--consumer ci" in c for c in calls), calls
            # Acknowledged once pi showed it: the group holds nothing pending, and the next mail is the
            # only new thing handed over.
            sb.send(to=ph.PERSONA, sender="loom", content="STREAM-MAIL-2: and the tests")
            assert ph.wait_until(lambda: ph.handed_over([session], "STREAM-MAIL-2") >= 1, 20), session.diagnostics()
            assert ph.wait_until(lambda: rh.group_pending(redis_in_netns) == (2, 0), 10), \
                rh.group_pending(redis_in_netns)
            time.sleep(1.5)
            assert ph.handed_over([session], "STREAM-MAIL-1") == 1
            assert ph.handed_over([session], "STREAM-MAIL-2") == 1
            proc.close_stdin()
            proc.wait(timeout=15)
    finally:
        rh.stop(relay)
    assert pi_decoy.requests == [], pi_decoy.requests[:3]
