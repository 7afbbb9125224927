"""An `exec` run's hold across machines: while the run lives it renews its hold on the mail it was handed
(MailSource.renew), so a member on another machine leaves it alone however long the run takes; once the
machine running it dies, the other member delivers the mail after --claim-after, not after the run's
6-hour hold. Real processes, a real redis-server; machines as in scripts/fleet_chaos.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from kijito_pull.core.models import Message
from kijito_pull.sources import redis_streams
from scripts.fleet_chaos import PERSONA, Machine, hostname_prefix
from tests.redis.test_fleet_claimback import once, pending
from tests.waiting import until

CLAIM_AFTER = 2.0


def test_a_live_exec_keeps_its_hold_and_a_dead_ones_mail_comes_back_after_claim_after(redis_server, tmp_path):
    prefix = hostname_prefix()
    a, b = Machine("a", tmp_path, prefix), Machine("b", tmp_path, prefix)
    redis_streams.Appender(redis_server.client(), "test").append(
        PERSONA, Message(1, "river", "MAIL-FOR-THE-RUN", "2026-12-03T08:00:00Z", False, None))
    run = subprocess.Popen(a.argv("exec", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci",
                                  "--claim-after", str(CLAIM_AFTER), "--", "sleep", "60"),
                           env=a.env("https://kijito.invalid/api", ""), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert until(lambda: pending(redis_server, "ci")[1] == 1, timeout=30), run.stderr
        [owner] = pending(redis_server, "ci")[0]
        assert owner.startswith("exec:")
        time.sleep(3 * CLAIM_AFTER)  # well past --claim-after: the run is alive and renews its hold
        assert once(b, redis_server, "ci") == []
        assert pending(redis_server, "ci") == ({owner}, 1)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # machine A dies with the run
        run.wait(10)
    died = time.monotonic()
    assert once(b, redis_server, "ci") == []  # the last renewal still stands
    assert until(lambda: once(b, redis_server, "ci") == [1], timeout=3 * CLAIM_AFTER + 5), pending(redis_server, "ci")
    assert time.monotonic() - died < 3 * CLAIM_AFTER + 5  # not the 6 h hold of the run
    assert pending(redis_server, "ci") == (set(), 0)
