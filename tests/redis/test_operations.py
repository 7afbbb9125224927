"""The operator side of `relay` and `watch` (core/metrics.py, core/sdnotify.py): the real /metrics and
/healthz of real subprocesses against the sandbox and a real redis-server, and systemd's notify protocol
over a real unix datagram socket set as NOTIFY_SOCKET."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.clirunner import REPO, Cli
from tests.notifysocket import NotifySocket
from tests.redisserver import free_port as _free_port
from tests.waiting import until

PERSONA = "testbot"
TOKEN = "ops-test-token"

pytest.importorskip("prometheus_client")


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text `text`, or None when it is absent."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def notify_socket(tmp_path):
    sock = NotifySocket(str(tmp_path / "notify.sock"))
    yield sock
    sock.close()


def test_relay_serves_metrics_and_health_and_speaks_sd_notify(sb, tmp_path, redis_server, notify_socket):
    sent = [sb.send(PERSONA, "river", f"m{n}") for n in range(3)]
    port = _free_port()
    cli = Cli(sb.url, sb.token, tmp_path / "relay")
    proc = cli.spawn("relay", "--redis", redis_server.url, "--persona", PERSONA, "--interval", "0.1",
                     "--metrics-port", str(port), "--stale-after", "2",
                     env={"NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "400000"},
                     stderr=(tmp_path / "relay.err").open("w"))  # a line per failed pass: no pipe to fill
    try:
        def relayed() -> float | None:
            return sample(scrape(port)[1], "kijito_pull_messages_relayed_total", persona=PERSONA)

        # all three on the stream before the consumer reads: a stream that exists may hold only the first
        assert until(lambda: relayed() == 3, timeout=30), scrape(port)
        # a consumer group, so the relay has a lag and pending count to report
        consumer = Cli("https://kijito.invalid/api", "", tmp_path / "consumer")
        got = consumer("--once", "--json", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
        assert got.code == 0, got.stderr
        assert [json.loads(line)["id"] for line in got.stdout.splitlines()
                if json.loads(line)["event"] == "new"] == sent, got.stdout
        sent.append(sb.send(PERSONA, "river", "one more"))
        assert until(lambda: relayed() == 4, timeout=30)
        text = until(lambda: (t := scrape(port)[1]) and sample(t, "kijito_pull_group_lag", group="ci") == 1 and t,
                     timeout=30)
        assert sample(text, "kijito_pull_group_pending", persona=PERSONA, group="ci") == 0
        assert sample(text, "kijito_pull_build_info", command="relay") == 1
        assert sample(text, "kijito_pull_last_success_timestamp_seconds") > 0
        code, body = scrape(port, "/healthz")
        assert code == 200 and body.startswith("ok"), body
        # the wire to systemd: READY once, a STATUS line, and the watchdog at half of WATCHDOG_USEC
        assert until(lambda: sum("WATCHDOG=1" in d for d in notify_socket.read()) >= 3, timeout=10)
        datagrams = notify_socket.read()
        assert sum("READY=1" in d for d in datagrams) == 1
        assert any(re.search(r"^STATUS=relay to redis://127\.0\.0\.1:\d+/0: \d+ relayed", d, re.M)
                   for d in datagrams), datagrams

        redis_server.stop()  # the source (Redis, here the relay's destination) fails: health goes 503
        assert until(lambda: scrape(port, "/healthz")[0] == 503, timeout=30)
        code, body = scrape(port, "/healthz")
        assert "redis:" in body and len(body.strip().splitlines()) == 1, body
        assert sample(scrape(port)[1], "kijito_pull_source_errors_total", kind="redis") >= 1
    finally:
        notify_socket.read()  # drained, so the queue has room for the last word
        assert stop(proc) == 0
    assert any("STOPPING=1" in d for d in notify_socket.read())


def test_watch_from_redis_counts_what_it_delivered(sb, tmp_path, redis_server):
    sent = [sb.send(PERSONA, "river", f"m{n}") for n in range(2)]
    relay = Cli(sb.url, sb.token, tmp_path / "relay").spawn("relay", "--redis", redis_server.url, "--persona",
                                                            PERSONA, "--interval", "0.1")
    port = _free_port()
    watcher = Cli("https://kijito.invalid/api", "", tmp_path / "member")
    watcher.environ.pop("KIJITOMON_TOKEN")
    proc = watcher.spawn("watch", "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci",
                         "--metrics-port", str(port))
    try:
        assert until(lambda: sample(scrape(port)[1], "kijito_pull_messages_delivered_total",
                                    persona=PERSONA) == 2, timeout=30), scrape(port)
        text = scrape(port)[1]
        assert sample(text, "kijito_pull_group_pending", persona=PERSONA, group="ci") == 0
        assert sample(text, "kijito_pull_build_info", command="watch") == 1
        assert scrape(port, "/healthz")[0] == 200
    finally:
        assert stop(proc) == 0
        assert stop(relay) == 0
    assert [json.loads(line)["id"] for line in proc.stdout.read().splitlines()
            if json.loads(line)["event"] == "new"] == sent


def test_watch_from_kijito_serves_the_same_metrics(sb, tmp_path):
    sent = [sb.send(PERSONA, "river", f"m{n}") for n in range(3)]
    port = _free_port()
    proc = Cli(sb.url, sb.token, tmp_path / "w").spawn("watch", "--persona", PERSONA, "--metrics-port", str(port))
    try:
        assert until(lambda: sample(scrape(port)[1], "kijito_pull_messages_delivered_total",
                                    persona=PERSONA) == len(sent), timeout=30), scrape(port)
        assert scrape(port, "/healthz")[0] == 200
    finally:
        assert stop(proc) == 0


def test_health_is_503_with_the_reason_before_any_success(tmp_path):
    port = _free_port()
    # Kijito unreachable: nothing ever succeeds
    proc = Cli("http://127.0.0.1:1/api", "tok", tmp_path / "w").spawn(
        "watch", "--persona", PERSONA, "--metrics-port", str(port), "--poll-seconds", "1", "--wait", "0")
    try:
        assert until(lambda: scrape(port, "/healthz")[0] == 503, timeout=30)
        assert until(lambda: "last error kijito" in scrape(port, "/healthz")[1], timeout=30), scrape(port, "/healthz")
        assert scrape(port, "/healthz")[1].startswith("no source success yet")
        assert scrape(port, "/nothing")[0] == 404
    finally:
        assert stop(proc) == 0


def test_metrics_without_prometheus_client_is_one_line_and_exit_2(sb, tmp_path, redis_server):
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "from kijito_pull.cli.main import main; sys.exit(main(sys.argv[1:]))")
    cli = Cli(sb.url, sb.token, tmp_path / "s")
    for argv in (["relay", "--redis", redis_server.url, "--persona", PERSONA], ["watch", "--persona", PERSONA]):
        done = subprocess.run([sys.executable, "-c", code, *argv, "--metrics-port", str(_free_port())],
                              env={**cli.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            "kijito-pull: --metrics-port needs prometheus_client: pip install 'kijito-pull[metrics]'"]


def test_a_port_in_use_is_one_line_and_exit_2(sb, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = Cli(sb.url, sb.token, tmp_path / "s")("watch", "--persona", PERSONA, "--metrics-port",
                                                        str(taken.getsockname()[1]))
    assert result.code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot listen on 127.0.0.1:" in result.stderr
