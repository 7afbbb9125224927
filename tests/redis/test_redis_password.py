"""A Redis password never in argv, and nowhere else either (the token's rule, tests/test_token_hygiene.py).

A real redis-server with `requirepass`; a relay and consumers given the password by
$KIJITO_PULL_REDIS_PASSWORD and by a 0600 --redis-password-file. The password (a distinctive random
string) must appear in none of: stdout and stderr of every run (the good ones and a wrong-password
one), the relay's argv (/proc/PID/cmdline), its /metrics and /healthz, `status` and `parked` output,
and any file left in the state directories. A URL with a password on the command line is refused with
the ways that keep it private, and the refusal does not echo it.
"""

from __future__ import annotations

import os
import secrets
import signal
import urllib.request
from pathlib import Path

import pytest

from kijito_pull.sources import redis_streams
from tests.clirunner import Cli
from tests.redisserver import free_port as _free_port
from tests.waiting import until

PERSONA = "testbot"
TOKEN = "redis-password-test-token"
PASSWORD = f"rpw-{secrets.token_hex(16)}"


@pytest.fixture
def locked_redis(redis_server):
    redis_server.client().config_set("requirepass", PASSWORD)
    return redis_server


def consumer(tmp_path: Path, name: str) -> Cli:
    cli = Cli("https://kijito.invalid/api", "", tmp_path / name)
    cli.environ.pop("KIJITOMON_TOKEN")
    return cli


def files_under(*roots: Path) -> str:
    return "".join(p.read_text(errors="replace") for root in roots if root.exists()
                   for p in root.rglob("*") if p.is_file())


def test_a_password_in_a_url_on_the_command_line_is_refused_without_echoing_it(sb, tmp_path):
    url = f"redis://:{PASSWORD}@127.0.0.1:6379/0"
    for argv in (["relay", "--redis", url, "--persona", PERSONA],
                 ["--once", "--persona", PERSONA, "--source", url],
                 ["watch", "--persona", PERSONA, "--source", url],
                 ["status", "--persona", PERSONA, "--source", url]):
        result = Cli(sb.url, sb.token, tmp_path / "s")(*argv)
        assert result.code == 2, (argv, result.stderr)
        assert "KIJITO_PULL_REDIS_PASSWORD" in result.stderr and "--redis-password-file" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert PASSWORD not in result.stderr + result.stdout


def test_the_password_from_env_or_a_0600_file_works_and_appears_nowhere(sb, tmp_path, locked_redis):
    sent = [sb.send(PERSONA, "river", f"m{n}") for n in range(3)]
    port = _free_port()
    relay_cli = Cli(sb.url, sb.token, tmp_path / "relay")
    relay = relay_cli.spawn("relay", "--redis", locked_redis.url, "--persona", PERSONA, "--interval", "0.1",
                            "--metrics-port", str(port), env={"KIJITO_PULL_REDIS_PASSWORD": PASSWORD})
    secret = tmp_path / "redis-password"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    seen = ""
    try:
        stream = redis_streams.stream_key(PERSONA)
        import redis

        authed = redis.Redis(port=locked_redis.port, password=PASSWORD, decode_responses=True)
        assert until(lambda: authed.xlen(stream) == 3, timeout=30), relay.poll()
        seen += Path(f"/proc/{relay.pid}/cmdline").read_bytes().decode(errors="replace")
        for path in ("/metrics", "/healthz"):
            pytest.importorskip("prometheus_client")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                seen += answer.read().decode()
        member = consumer(tmp_path, "member")
        got = member("--once", "--json", "--persona", PERSONA, "--source", locked_redis.url, "--consumer", "ci",
                     "--redis-password-file", str(secret))
        assert got.code == 0 and got.new_ids == sent, got.stderr
        seen += got.stdout + got.stderr
        for argv in (["status", "--persona", PERSONA], ["status", "--json", "--persona", PERSONA],
                     ["parked", "--persona", PERSONA]):
            shown = member(*argv, "--source", locked_redis.url, env={"KIJITO_PULL_REDIS_PASSWORD": PASSWORD})
            assert shown.code == 0, shown.stderr
            seen += shown.stdout + shown.stderr
        assert "group ci" in seen and "lag 0" in seen
        # a URL with the password is fine in the environment (not argv); shown, it is masked
        env_url = f"redis://:{PASSWORD}@127.0.0.1:{locked_redis.port}/0"
        shown = member("status", "--persona", PERSONA, env={"KIJITO_PULL_SOURCE": env_url})
        assert shown.code == 0 and f"@ redis://127.0.0.1:{locked_redis.port}/0" in shown.stdout, shown.stderr
        seen += shown.stdout + shown.stderr
        # a wrong password: one line, exit 1, neither password echoed
        wrong = f"rpw-{secrets.token_hex(16)}"
        failed = member("--once", "--persona", PERSONA, "--source", locked_redis.url,
                        env={"KIJITO_PULL_REDIS_PASSWORD": wrong})
        assert failed.code == 1 and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
        assert wrong not in failed.stderr
        seen += failed.stdout + failed.stderr
    finally:
        relay.send_signal(signal.SIGTERM)
        out, err = relay.communicate(timeout=20)
    assert relay.returncode == 0, err
    seen += out + err + files_under(tmp_path / "relay", tmp_path / "member")
    assert PASSWORD not in seen
    assert PASSWORD[4:20] not in seen and PASSWORD[20:] not in seen


def test_a_password_file_others_can_read_is_refused(tmp_path, locked_redis):
    secret = tmp_path / "redis-password"
    secret.write_text(PASSWORD)
    os.chmod(secret, 0o644)
    result = consumer(tmp_path, "m")("--once", "--persona", PERSONA, "--source", locked_redis.url,
                                     "--redis-password-file", str(secret))
    assert result.code == 2 and "chmod 600" in result.stderr and PASSWORD not in result.stderr
