"""What the e2e tests of a Redis source share: a real redis-server inside the harnesses' network namespace
(tests/redisserver.py), a relay subprocess filling it from the sandbox, a decoy Kijito the consumers are
pointed at (its request log is the proof that a Redis consumer asks Kijito nothing), and the Claude Code
plugin with `--source ... --consumer ...` on each hook's command line (the installer's own rewrite)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kijito_pull.harnesses import plugin_files
from kijito_pull.harnesses.claude.installer import hooks_with
from tests import redisserver
from tests.e2e import claude_helpers as ch
from tests.e2e import harness as h

GROUP = "ci"
STREAM = "kijito:{river}:mail"


@pytest.fixture
def redis_in_netns(netns: h.NetNS, tmp_path: Path) -> Iterator[redisserver.RedisServer]:
    server = redisserver.RedisServer(redisserver.binary(), tmp_path / "redis", wrap=netns.wrap,
                                     call=netns.call).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def decoy(netns: h.NetNS) -> Iterator:
    """A second sandbox with the same token: what the consumers are told Kijito is."""
    with ch.start_sandbox() as sb:
        yield sb


def start_relay(netns: h.NetNS, sandbox, server: redisserver.RedisServer, state: Path,
                token: str = ch.TOKEN) -> subprocess.Popen:
    """`kijito-pull relay` from the (real) sandbox into `server`, inside the namespace, its own state."""
    env = {"PATH": f"{ch.venv_bin()}:/usr/bin:/bin", "KIJITO_BASE": sandbox.url, "KIJITOMON_TOKEN": token,
           "KIJITO_PULL_STATE_DIR": str(state), "KIJITO_PULL_CONFIG": os.devnull,
           "HOME": str(state)}
    argv = netns.wrap([str(ch.venv_bin() / "kijito-pull"), "relay", "--redis", server.url,
                       "--persona", ch.PERSONA, "--interval", "0.2"])
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_relayed(server: redisserver.RedisServer, count: int, timeout: float = 20.0) -> None:
    client = server.client()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.exists(STREAM) and client.xlen(STREAM) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"the relay appended {client.xlen(STREAM) if client.exists(STREAM) else 0} of {count}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def claude_plugin(folder: Path, server: redisserver.RedisServer) -> Path:
    """The plugin's files as `install claude --source URL --consumer ci` materializes them."""
    tail = ["--source", server.url, "--consumer", GROUP]
    for rel, src in plugin_files.claude_plugin_files().items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel == "hooks/hooks.json":
            target.write_bytes(hooks_with(src.read_bytes(), tail))
        else:
            shutil.copy2(src, target)  # the launcher keeps its exec bit
    return folder


def group_pending(server: redisserver.RedisServer) -> tuple[int, int]:
    """(entries the group `ci` read, entries still pending) of the stream."""
    [group] = [g for g in server.client().xinfo_groups(STREAM) if g["name"] == GROUP]
    return int(group.get("entries-read") or 0), int(group["pending"])


def consumer_env(server: redisserver.RedisServer) -> dict[str, str]:
    """A consumer's Redis source and group from the environment (what the pi extension's child inherits)."""
    return {"KIJITO_PULL_SOURCE": server.url, "KIJITO_PULL_CONSUMER": GROUP}
