"""Claim-back across machines: a member on machine A is SIGKILLed while it holds mail (pending entries of the
group); a member on machine B (its own HOME, state directory and hostname) delivers it after --claim-after,
not before. Real processes, a real redis-server; machines as in scripts/fleet_chaos.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from kijito_pull.core.models import Message
from kijito_pull.sources import redis_streams
from scripts.fleet_chaos import PERSONA, Machine, hostname_prefix
from tests.waiting import until

CLAIM_AFTER = 2.0


def pending(redis_server, group):
    import redis

    try:
        rows = redis_server.client().xpending_range(redis_streams.stream_key(PERSONA), group, "-", "+", 100)
    except redis.ResponseError:  # the group is not there yet
        return set(), 0
    return {r["consumer"] for r in rows}, len(rows)


def once(machine, redis_server, group):
    proc = subprocess.run(machine.argv("--once", "--json", "--persona", PERSONA, "--source", redis_server.url,
                                       "--consumer", group, "--claim-after", str(CLAIM_AFTER)),
                          env=machine.env("https://kijito.invalid/api", ""), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line)["id"] for line in proc.stdout.splitlines() if '"event": "new"' in line]


def test_a_killed_members_mail_is_delivered_by_another_machine_after_claim_after(redis_server, tmp_path):
    prefix = hostname_prefix()
    a, b = Machine("a", tmp_path, prefix), Machine("b", tmp_path, prefix)
    appender = redis_streams.Appender(redis_server.client(), "test")
    for i in (1, 2):
        appender.append(PERSONA, Message(i, "river", f"m{i}", "2026-12-02T10:00:00Z", False, None))
    # Machine A's member hands each message to a command that is still running when A is killed.
    holder = subprocess.Popen(a.argv("watch", "--persona", PERSONA, "--source", redis_server.url, "--consumer",
                                     "workers", "--claim-after", str(CLAIM_AFTER), "--emit", "exec-per-event",
                                     "--exec", "sleep 8"),
                              env=a.env("https://kijito.invalid/api", ""), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert until(lambda: pending(redis_server, "workers")[1] == 2, timeout=30)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(10)
    killed = time.monotonic()
    owners, _ = pending(redis_server, "workers")
    assert owners == {f"{a.hostname}:{holder.pid}"}  # held by A's member, which is gone
    assert once(b, redis_server, "workers") == []  # not before --claim-after: A might still be working
    time.sleep(max(0.0, CLAIM_AFTER + 0.2 - (time.monotonic() - killed)))
    assert once(b, redis_server, "workers") == [1, 2]  # machine B delivers it, in id order
    assert pending(redis_server, "workers") == (set(), 0) and once(b, redis_server, "workers") == []
