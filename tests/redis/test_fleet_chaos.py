"""The three-machine chaos trial (scripts/fleet_chaos.py) at CI size: a real redis-server, two relays, two
consumer groups, SIGKILLs of relays and members, one Redis crash. The full size is in docs/reliability.md."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.clirunner import REPO

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None and os.environ.get("KIJITO_PULL_REQUIRE_E2E") != "1",
    reason="redis-server is not installed")


# appendfsync always: mail and kills from the first moment, relays' first contacts included (a message
# was once lost there); the lost tail: once both relays are past their first contact (a relay started
# after the loss does not know what was appended before it, docs/fleets.md)
@pytest.mark.parametrize("variant", [["--aof", "always", "--no-warmup"], ["--aof", "everysec", "--lose-tail", "1.0"]],
                         ids=["appendfsync-always", "everysec-lost-tail"])
def test_every_message_reaches_each_group_through_kills_and_a_redis_crash(variant, tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fleet_chaos.py"), "--messages", "150",
                           "--seed", "22", "--json", *variant, "--workdir", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=240)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["problems"] == [], summary["problems"]
    assert proc.returncode == 0
    assert summary["lost"] == 0 and summary["kijito_requests_from_consumers"] == 0
    assert all(g["delivered"] == summary["messages"] for g in summary["groups"].values())
    assert sum(summary["kills"].values()) >= 5  # the chaos happened
    if "--lose-tail" in variant:
        assert summary["aof_bytes_cut"] > 0  # the tail really was cut
