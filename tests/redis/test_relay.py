"""`kijito-pull relay`: real relays (subprocesses) against one sandbox and one real redis-server."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

from kijito_pull.sources import redis_streams
from tests.clirunner import Cli
from tests.waiting import until

PERSONA = "testbot"
TOKEN = "relay-test-token"


def kids(redis_server) -> list[int]:
    rows = redis_server.client().xrange(redis_streams.stream_key(PERSONA))
    return [int(fields["kid"]) for _sid, fields in rows]


def relay(sb, tmp_path, name, redis_server) -> subprocess.Popen:
    cli = Cli(sb.url, sb.token, tmp_path / name)  # its own state dir: a relay on another machine
    return cli.spawn("relay", "--redis", redis_server.url, "--persona", PERSONA, "--interval", "0.1")


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_two_relays_at_once_append_each_message_once(sb, tmp_path, redis_server):
    sent = [sb.send(PERSONA, "river", f"before {n}") for n in range(5)]
    one, two = relay(sb, tmp_path, "one", redis_server), relay(sb, tmp_path, "two", redis_server)
    try:
        sent += [sb.send(PERSONA, "river", f"during {n}") for n in range(10)]
        assert until(lambda: set(kids(redis_server)) >= set(sent), timeout=30), kids(redis_server)
        # both relays read every message (each has its own cursor): give the slower one a few passes too
        time.sleep(1.0)
    finally:
        codes = [stop(one), stop(two, signal.SIGINT)]
    assert sorted(kids(redis_server)) == sorted(sent)  # each message once
    assert codes == [0, 0]


def test_a_killed_relay_restarted_loses_nothing(sb, tmp_path, redis_server):
    first = [sb.send(PERSONA, "river", f"m{n}") for n in range(3)]
    proc = relay(sb, tmp_path, "one", redis_server)
    assert until(lambda: set(kids(redis_server)) >= set(first), timeout=30)
    proc.kill()  # SIGKILL: no clean shutdown
    proc.wait(10)
    later = [sb.send(PERSONA, "river", f"later{n}") for n in range(4)]
    again = relay(sb, tmp_path, "one", redis_server)
    try:
        assert until(lambda: set(kids(redis_server)) >= set(first + later), timeout=30), kids(redis_server)
    finally:
        assert stop(again) == 0
    assert sorted(kids(redis_server)) == sorted(first + later)


def test_a_relay_without_redis_or_with_a_wrong_scheme_is_a_usage_error(sb, tmp_path):
    cli = Cli(sb.url, sb.token, tmp_path / "s")
    assert cli("relay", "--persona", PERSONA).code == 2
    result = cli("relay", "--redis", "http://127.0.0.1:1/0", "--persona", PERSONA)
    assert result.code == 2 and "redis://" in result.stderr


def test_an_unreachable_redis_is_exit_1_with_one_line_and_no_kijito_request(sb, tmp_path):
    cli = Cli(sb.url, sb.token, tmp_path / "s")
    sb.clear_requests()
    result = cli("relay", "--redis", "redis://127.0.0.1:1/0", "--persona", PERSONA)
    assert result.code == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert sb.requests == []


def test_sigterm_while_the_relay_waits_on_a_silent_redis_is_a_clean_stop(sb, tmp_path):
    """A supervisor's stop during the relay's start-up (here: its first PING, unanswered) is exit 0."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        cli = Cli(sb.url, sb.token, tmp_path / "s")
        proc = cli.spawn("relay", "--redis", f"redis://127.0.0.1:{silent.getsockname()[1]}/0", "--persona", PERSONA)
        silent.settimeout(30)
        conn, _ = silent.accept()  # the relay has connected and sent PING; nothing will answer it
        with conn:
            code = stop(proc)
            err = proc.stderr.read()
    assert code == 0, err
    assert "nothing was relayed" not in err and "Traceback" not in err


def test_once_from_redis_reads_the_stream_and_sends_kijito_nothing(sb, tmp_path, redis_server):
    sent = [sb.send(PERSONA, "river", f"m{n}") for n in range(3)]
    proc = relay(sb, tmp_path, "relay", redis_server)
    try:
        assert until(lambda: set(kids(redis_server)) >= set(sent), timeout=30)
    finally:
        assert stop(proc) == 0
    sb.clear_requests()
    # a consumer machine: no Kijito token at all, only the Redis source
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "consumer")
    cli.environ.pop("KIJITOMON_TOKEN")
    first = cli("--once", "--json", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
    assert first.code == 0, first.stderr
    assert first.new_ids == sent
    assert cli("--once", "--json", "--persona", PERSONA, "--source", redis_server.url,
               "--consumer", "ci").new_ids == []
    # another group gets every message too, chosen by the environment this time
    other = cli("--once", "--json", "--persona", PERSONA, "--consumer", "audit",
                env={"KIJITO_PULL_SOURCE": redis_server.url})
    assert other.new_ids == sent
    assert sb.requests == []


def test_once_from_an_unreachable_redis_is_exit_1_and_a_wrong_scheme_exit_2(tmp_path):
    cli = Cli("https://kijito.invalid/api", "", tmp_path / "consumer")
    down = cli("--once", "--persona", PERSONA, "--source", "redis://127.0.0.1:1/0")
    assert down.code == 1 and len(down.stderr.strip().splitlines()) == 1, down.stderr
    assert "nothing was acknowledged" in down.stderr
    assert cli("--once", "--persona", PERSONA, "--source", "http://127.0.0.1:1/0").code == 2


def test_after_redis_lost_its_data_a_running_relay_re_reads_it_from_kijito(sb, tmp_path, redis_server):
    sent = [sb.send(PERSONA, "river", f"m{n}") for n in range(3)]
    proc = relay(sb, tmp_path, "relay", redis_server)
    try:
        assert until(lambda: set(kids(redis_server)) >= set(sent), timeout=30)
        redis_server.wipe()  # the appended tail is gone; the relay's Kijito cursor is past it
        assert until(lambda: set(kids(redis_server)) >= set(sent), timeout=30), kids(redis_server)
        sent.append(sb.send(PERSONA, "river", "after"))
        assert until(lambda: set(kids(redis_server)) >= set(sent), timeout=30)
    finally:
        assert stop(proc) == 0
    assert sorted(kids(redis_server)) == sorted(sent)
    assert "lost 3 appended message" in proc.stderr.read()


def test_a_relay_without_personas_relays_every_persona_of_the_account(sb, tmp_path, redis_server):
    sent = sb.send(PERSONA, "river", "to the whole account")
    cli = Cli(sb.url, sb.token, tmp_path / "all")
    proc = cli.spawn("relay", "--redis", redis_server.url, "--interval", "0.1")
    try:
        assert until(lambda: sent in kids(redis_server), timeout=30), kids(redis_server)
    finally:
        assert stop(proc) == 0


def test_with_redis_gone_a_relay_says_so_once_a_check_not_once_a_persona(sb, tmp_path, redis_server):
    personas = [f"crew{n:02d}" for n in range(12)]
    for name in personas:
        sb.add_persona(name)
    sent = [sb.send(name, "river", f"for {name}") for name in personas]
    cli = Cli(sb.url, sb.token, tmp_path / "many")
    proc = cli.spawn("relay", "--redis", redis_server.url, "--interval", "0.2")
    try:
        client = redis_server.client()
        assert until(lambda: all(client.exists(redis_streams.stream_key(n)) for n in personas), timeout=30)
        redis_server.stop()
        time.sleep(2.5)  # about a dozen checks with Redis gone
        redis_server.start()  # its AOF kept everything: nothing to refill
        time.sleep(1.0)
    finally:
        assert stop(proc) == 0
    lines = [line for line in proc.stderr.read().splitlines() if "Redis at" in line]
    assert 3 <= len(lines) <= 20, lines  # one a check (not twelve)
    assert not any(name in line for line in lines for name in personas), lines
    assert sorted(int(f["kid"]) for n in personas
                  for _sid, f in redis_server.client().xrange(redis_streams.stream_key(n))) == sorted(sent)
