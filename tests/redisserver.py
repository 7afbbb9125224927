"""A real redis-server per test (Debian's package), on a free loopback port with its own directory: the
`redis_server` fixture of tests/redis/ and tests/e2e/ (each conftest imports it from here).

No fake Redis: every test that claims delivery talks to this server. A missing redis-server skips the
test, except under KIJITO_PULL_REQUIRE_E2E=1 (.ci/run installs it), where it is a failure.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.required import missing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process: AOF on with appendfsync always (the setting docs/fleets.md asks for), or
    `everysec`. `kill` is a crash (SIGKILL); `start` again brings it back on the same port and directory."""

    def __init__(self, binary: str, directory: Path, appendfsync: str = "always", *, wrap=list,
                 call=lambda fn: fn()):
        self.binary = binary
        self.directory = directory
        self.appendfsync = appendfsync
        # e2e: the server runs inside the harnesses' network namespace (tests/e2e/harness.py NetNS): `wrap`
        # an argv to run there, `call` a function whose sockets are made there
        self.wrap, self.call = wrap, call
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, appendonly: bool = True) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--save", "", "--appendonly", "yes" if appendonly else "no", "--appendfsync", self.appendfsync,
                "--daemonize", "no", "--logfile", str(self.directory / "redis.log")]
        self.proc = subprocess.Popen(self.wrap(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        import redis

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited {self.proc.returncode}: "
                                   f"{(self.directory / 'redis.log').read_text(errors='replace')[-500:]}")
            try:
                if self.call(lambda: redis.Redis(port=self.port, socket_timeout=1).ping()):
                    return self
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING within 10 s")

    def client(self):
        """A client on one connection (made where the server is: in the namespace, under e2e)."""
        import redis

        def make():
            # in a namespace, one connection made there (the pool would open later ones outside it)
            client = redis.Redis(port=self.port, decode_responses=True, single_connection_client=self.wrap is not list)
            client.ping()
            return client

        return self.call(make)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def kill(self) -> None:
        """A crash: SIGKILL, no final write of the AOF buffer."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def aof_tail(self) -> Path | None:
        """The AOF file appends go to now (Redis 7's appendonlydir/*.incr.aof), or None without one."""
        files = sorted((self.directory / "appendonlydir").glob("*.incr.aof"))
        return files[-1] if files else None

    def wipe(self) -> None:
        """A Redis that lost its data (a crash with no persistence, a failover to an empty replica):
        stopped, its files removed, started again empty on the same port."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.start()


def binary() -> str:
    """redis-server's path; skips the test when it is missing (fails under KIJITO_PULL_REQUIRE_E2E=1)."""
    found = shutil.which("redis-server")
    if found is None:
        missing("redis-server is not installed (apt-get install redis-server; .ci/run installs it)")
    return found


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(binary(), tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()
