"""`kijito-pull dashboard` over real HTTP, as a real process against the sandbox: the access key (403 without
it, compared whole), loopback only unless --host (which it says), the token never in an answer, the same
cursor rows as `status --json` (one function: core/overview.py), Redis groups and a Redis that went away,
and --help. The page in a real browser: test_dashboard_browser.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
import requests

from tests.clirunner import Cli
from tests.dashboard.running import dashboard, environ
from tests.harnesses.test_install import wheel as built_wheel  # the package built as a wheel

TOKEN = "dash-token-7f3c1a"
PATHS = ("/", "/events", "/snapshot.json", "/favicon.ico", "/nothing")


def listening(port: int) -> set[str]:
    """The local addresses a TCP socket listens on at `port` (Linux /proc/net/tcp and tcp6), as hex."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hexport = fields[1].rsplit(":", 1)
            if int(hexport, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.add(address)
    return found


def port_of(url: str) -> int:
    return int(url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def first_event(url: str) -> str:
    with requests.get(url, stream=True, timeout=10) as answer:
        assert answer.status_code == 200
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        lines = []
        for line in answer.iter_lines(chunk_size=1, decode_unicode=True):
            if not line and lines:
                return "\n".join(lines)
            if line:
                lines.append(line)
    raise AssertionError("the event stream ended before its first event")


def test_without_the_key_every_request_is_refused_and_with_it_nothing_carries_the_token(sb, tmp_path):
    cli = Cli(sb.url, sb.token, tmp_path / "state")
    sb.send(to="river", sender="loom", content="hello")
    assert cli("--once", "--persona", "river").code == 0
    errors: list[str] = []
    with dashboard(sb.url, sb.token, tmp_path / "state", stderr=errors) as dash:
        snap = dash.wait(lambda s: s["kijito"]["state"] == "up" and s["cursors"])
        wrong = dash.key[:-1] + ("A" if dash.key[-1] != "A" else "B")  # same length, one character off
        for path in PATHS:
            for query in ("", "?key=", f"?key={wrong}", f"?key={dash.key}x", f"?other={dash.key}"):
                answer = requests.get(dash.base.rstrip("/") + path + query, timeout=5)
                assert answer.status_code == 403, (path, query)
                assert dash.key not in answer.text and TOKEN not in answer.text
        for method in ("POST", "PUT", "DELETE", "HEAD", "OPTIONS"):
            assert requests.request(method, dash.at("/", key=False), timeout=5).status_code == 403, method
        assert requests.post(dash.at("/"), timeout=5).status_code == 405  # read-only, even with the key

        page = requests.get(dash.url, timeout=5)
        assert page.status_code == 200 and "kijito-pull dashboard" in page.text
        assert page.headers["Cache-Control"] == "no-store" and page.headers["Referrer-Policy"] == "no-referrer"
        assert "script-src 'nonce-" in page.headers["Content-Security-Policy"]
        event = first_event(dash.at("/events"))
        assert event.startswith("id: ") and '"persona": "river"' in event
        for text in (page.text, event, json.dumps(snap), json.dumps(dash.snapshot())):
            assert TOKEN not in text
    assert TOKEN not in errors[0]


def test_the_token_stays_out_of_the_page_when_kijito_is_down_too(sb, tmp_path):
    with dashboard(sb.url, sb.token, tmp_path / "state") as dash:
        dash.wait(lambda s: s["kijito"]["state"] == "up")
        sb.stop()
        snap = dash.wait(lambda s: s["kijito"]["state"] == "down", timeout=10)
        assert "notify/pending" in snap["kijito"]["error"]
        for text in (requests.get(dash.url, timeout=5).text, json.dumps(snap)):
            assert TOKEN not in text


def test_it_listens_on_loopback_only_unless_host_is_given_and_then_says_so(sb, tmp_path):
    errors: list[str] = []
    with dashboard(sb.url, sb.token, tmp_path / "state", stderr=errors) as dash:
        assert dash.url.startswith("http://127.0.0.1:")
        assert listening(port_of(dash.url)) == {"0100007F"}  # 127.0.0.1, nothing else
    assert "listening on" not in errors[0]
    with dashboard(sb.url, sb.token, tmp_path / "state", "--host", "0.0.0.0", stderr=errors) as dash:
        assert listening(port_of(dash.url)) == {"00000000"}
        assert requests.get(dash.url.replace("0.0.0.0", "127.0.0.1"), timeout=5).status_code == 200
    assert "listening on 0.0.0.0" in errors[1] and "--host" in errors[1]


def test_the_page_shows_the_rows_status_json_prints(sb, tmp_path):
    cli = Cli(sb.url, sb.token, tmp_path / "state")
    for persona in ("river", "argus"):
        sb.send(to=persona, sender="loom", content="hello")
        assert cli("--once", "--persona", persona).code == 0
    assert cli("--once", "--persona", "argus", "--consumer", "script").code == 0
    status = [json.loads(line) for line in cli("status", "--json").stdout.splitlines()]
    assert len(status) == 3
    with dashboard(sb.url, sb.token, tmp_path / "state") as dash:
        snap = dash.wait(lambda s: len(s["cursors"]) == 3 and s["kijito"]["state"] == "up")
        assert snap["cursors"] == status
        assert {p["persona"]: p["unread"] for p in snap["personas"]} == {"river": 1, "argus": 1}
    with dashboard(sb.url, sb.token, tmp_path / "state", "--persona", "argus", "--consumer", "script") as dash:
        snap = dash.wait(lambda s: len(s["cursors"]) == 1)
        assert snap["cursors"] == [r for r in status if r["persona"] == "argus" and r["consumer"] == "script"]
        assert [p["persona"] for p in snap["personas"]] == ["argus"]


def test_a_cursor_folder_that_cannot_be_read_is_said_on_the_page_not_shown_empty(sb, tmp_path):
    from kijito_pull.core.paths import Paths

    cursors = Paths({"KIJITO_PULL_STATE_DIR": str(tmp_path / "state")}).cursors_dir
    cursors.parent.mkdir(parents=True, mode=0o700)
    cursors.symlink_to(cursors)  # a link to itself: it exists and can never be listed (root reads any mode)
    with dashboard(sb.url, sb.token, tmp_path / "state") as dash:
        snap = dash.wait(lambda s: s["problems"] and s["kijito"]["state"] == "up")
        [problem] = snap["problems"]
        assert problem.startswith("reading this machine's cursor files failed: ") and str(cursors) in problem
        assert "symbolic links" in problem
        assert snap["cursors"] == [] and snap["confirmations"]["rows"] == []


def test_a_connection_that_sends_nothing_is_closed_not_held():
    import threading
    import time

    from kijito_pull.dashboard import server as dash_server
    from kijito_pull.dashboard.board import Board

    served = dash_server.DashboardServer(("127.0.0.1", 0), Board("http://127.0.0.1:9"), dash_server.make_key(),
                                         idle_timeout=0.5)
    threading.Thread(target=served.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with socket.create_connection(served.server_address[:2], timeout=10) as silent:
            started = time.monotonic()
            assert silent.recv(1) == b""  # the server hung up on a request that never came
            assert time.monotonic() - started < 5
    finally:
        served.close()


def test_help_teaches_the_address_the_key_and_loopback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kijito_pull", "dashboard", "--help"], capture_output=True,
                          text=True, env=environ("http://127.0.0.1:9", "x", tmp_path), timeout=30)
    assert proc.returncode == 0
    for words in ("?key=", "403", "127.0.0.1", "--host", "server-sent events", "ONE notify/pending long-poll",
                  "status --json"):
        assert words in " ".join(proc.stdout.split()), words


def test_a_port_in_use_is_one_line_and_exit_2(sb, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "kijito_pull", "dashboard", "--port", str(port)],
                              capture_output=True, text=True, env=environ(sb.url, sb.token, tmp_path), timeout=30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and len(proc.stderr.splitlines()) == 1


@pytest.fixture
def redis_server(tmp_path):
    from tests.redisserver import RedisServer, binary

    server = RedisServer(binary(), tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


def test_with_a_redis_source_it_shows_each_group_and_says_when_redis_is_down(sb, tmp_path, redis_server):
    from kijito_pull.core.models import Message
    from kijito_pull.sources import redis_streams

    redis_streams.Appender(redis_server.client(), "test").append(
        "river", Message(id=7, sender="loom", content="hi", created="2026-01-01T00:00:00Z", read=False))
    cli = Cli(sb.url, sb.token, tmp_path / "state")
    assert cli("--once", "--persona", "river", "--source", redis_server.url, "--consumer", "ci").code == 0
    with dashboard(sb.url, sb.token, tmp_path / "state", "--source", redis_server.url, "--persona", "river") as dash:
        snap = dash.wait(lambda s: s["redis"]["state"] == "up" and s["redis"]["groups"])
        [group] = snap["redis"]["groups"]
        assert (group["persona"], group["group"], group["lag"], group["pending"]) == ("river", "ci", 0, 0)
        assert snap["redis"]["relay"][0]["newest_at"] is not None
        redis_server.stop()
        snap = dash.wait(lambda s: s["redis"]["state"] == "down", timeout=10)
        assert snap["redis"]["error"] and snap["kijito"]["state"] == "up"


wheel = built_wheel  # the fixture, under the name its own tests use


def test_the_wheel_carries_the_page(wheel):  # noqa: F811 - the fixture above
    import zipfile

    from kijito_pull.dashboard import server

    names = set(zipfile.ZipFile(wheel).namelist())
    for asset in ("page.html", "page.css", "page.js"):
        assert f"kijito_pull/dashboard/static/{asset}" in names
    assert "/*SCRIPT*/" not in server.page_template() and "EventSource" in server.page_template()
