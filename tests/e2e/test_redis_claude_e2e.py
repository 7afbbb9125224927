"""A real Claude Code `claude -p` run reading its mail from a Redis stream (`--source redis://...` on
each hook's command line, as `install claude --source ... --consumer ci` writes it), filled by a real
relay from the sandbox; the proof is the mail inside the model requests, as in test_claude_e2e.py. The
hooks are pointed at a decoy Kijito (same token) whose request log must stay empty, and every entry the
group read is acknowledged once the transcript confirmed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h
from tests.e2e import redis_helpers as rh
from tests.e2e.fakemodel import FakeModel
from tests.e2e.redis_helpers import decoy, redis_in_netns  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def test_claude_p_reads_the_stream_and_asks_kijito_nothing(
    claude_harness: h.Harness, netns: h.NetNS, sandbox, decoy, redis_in_netns, state: Path,  # noqa: F811
    e2e_home: Path, tmp_path: Path,
) -> None:
    project = ch.make_project(tmp_path)
    relay = rh.start_relay(netns, sandbox, redis_in_netns, tmp_path / "relay-state")
    try:
        sandbox.send(ch.PERSONA, "loom", "MAIL-WAITING: the deploy key rotated")
        rh.wait_relayed(redis_in_netns, 1)
        late: list[int] = []

        def reply(request: dict) -> str:
            if not late and "summarize the task" in FakeModel.text_of(request):
                late.append(sandbox.send(ch.PERSONA, "loom", "MAIL-LATE: arrived while the agent worked"))
                rh.wait_relayed(redis_in_netns, 2)  # in the stream before the turn ends
            return "ok"

        plugin = rh.claude_plugin(tmp_path / "plugin", redis_in_netns)
        with FakeModel(reply, bind=netns.listen) as fm:
            result = h.run_claude_p(claude_harness, "summarize the task", base_url=fm.url, home=e2e_home,
                                    cwd=project, plugin_dirs=[plugin], env=ch.hook_env(decoy.url, state),
                                    timeout=90)
            assert result.returncode == 0, result.stderr[-3000:]
            convo = ch.conversation_requests(fm, "summarize the task")
        assert convo, result.stderr[-3000:]
        first = ch.counts(fm, convo[0], ["MAIL-WAITING", "MAIL-LATE"])
        assert first == {"MAIL-WAITING": 1, "MAIL-LATE": 0}, first
        assert any(ch.counts(fm, r, ["MAIL-LATE"])["MAIL-LATE"] == 1 for r in convo[1:]), result.stderr[-3000:]
        assert ch.handovers(fm, convo[-1], ["MAIL-WAITING", "MAIL-LATE"]) == {"MAIL-WAITING": 1, "MAIL-LATE": 1}
    finally:
        rh.stop(relay)
    # The consumers asked Kijito nothing; the group read both entries and acknowledged them (confirmed
    # from the transcript by the Stop and SessionEnd hooks), and no local cursor file was written.
    assert decoy.requests == [], decoy.requests[:3]
    assert rh.group_pending(redis_in_netns) == (2, 0)
    assert not list((state / "cursors").glob("*.json")) if (state / "cursors").exists() else True
    assert ch.waker_pids(state) == []
