"""The dashboard as a person sees it: a real `kijito-pull dashboard` process, real headless Chromium
(tests/browser.py), the sandbox over real HTTP, and Claude Code's hooks (in-process, with a transcript
written as Claude Code writes it: tests/harnesses/claude/test_confirmed_handover.py) handing mail over
and confirming it. The page loads, shows the persona, follows mail arriving, handed over and confirmed
within 2 s each, says so when Kijito goes away, and never carries the token.
"""

from __future__ import annotations

import time

import pytest

from tests.browser import chromium
from tests.dashboard.running import dashboard
from tests.harnesses.claude.test_confirmed_handover import Session
from tests.harnesses.claude.test_hooks import PERSONA, Hooks
from tests.waiting import budget

TOKEN = "hook-token-5e1"  # tests/harnesses/claude/test_hooks.py's Hooks sends this one to the sandbox

ROW = 'tr[data-persona="' + PERSONA + '"]'


@pytest.fixture
def project(tmp_path):
    from tests.harnesses.claude.conftest import OPT_IN

    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "AGENTS.md").write_text(OPT_IN)
    return folder


def test_the_page_follows_mail_from_arrival_to_confirmation_and_says_when_kijito_is_down(sb, project, tmp_path):
    hooks = Hooks(sb, project, tmp_path / "state", KIJITO_PULL_MAX_STOP_BLOCKS="100")
    sb.send(to=PERSONA, sender="loom", content="before")
    assert hooks.cli("--once", "--persona", PERSONA)[0] == 0  # a cursor on this machine
    with dashboard(sb.url, sb.token, tmp_path / "state") as dash, chromium() as browser:
        browser.get(dash.url)
        browser.wait_for("return document.querySelector(arguments[0]) !== null", ROW)
        assert browser.text(ROW + " td.unread") == "1"  # pulled, not read: Kijito still counts it unread
        assert "agent @ " in browser.text(ROW)  # this machine's cursor
        browser.wait_for("return document.querySelector('#pills').textContent.includes('live')")

        mail = sb.send(to=PERSONA, sender="loom", content="the build is red")
        took = browser.wait_for("return document.querySelector(arguments[0] + ' td.unread').textContent === '2'",
                                ROW, timeout=2.0)
        assert took <= budget(2.0)

        session = Session(hooks, "sess-1", tmp_path)
        assert "the build is red" in session.run("claude-session-start", source="startup")
        browser.wait_for("return document.querySelector('#pending tbody').textContent.includes('sess-1')",
                         timeout=2.0)
        assert "claude" in browser.text("#pending tbody")

        session.run("claude-stop")  # the transcript shows the model has it: confirmed
        browser.wait_for("return document.querySelector('#confirmations tbody').textContent.includes(arguments[0])",
                         str(mail), timeout=2.0)
        browser.wait_for("return document.querySelector('#pending tbody').textContent.includes('nothing pending')",
                         timeout=2.0)
        assert browser.text("#wakes tbody")  # a latency row, or the note that none was seen
        browser.screenshot(tmp_path / "dashboard.png")
        assert (tmp_path / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        page = browser.html()
        assert TOKEN not in page and sb.token not in page

        sb.stop()
        started = time.monotonic()
        browser.wait_for("const b = document.querySelector('#kijito-down'); "
                         "return b !== null && b.textContent.includes('Kijito is unreachable')", timeout=10.0)
        assert time.monotonic() - started <= 10.0
        assert browser.text(ROW) is not None  # this machine's state stays on the page
        assert TOKEN not in browser.html()


def test_with_a_redis_source_the_page_shows_each_group_and_says_when_redis_is_down(sb, tmp_path):
    from kijito_pull.core.models import Message
    from kijito_pull.sources import redis_streams
    from tests.clirunner import Cli
    from tests.redisserver import RedisServer, binary

    server = RedisServer(binary(), tmp_path / "redis").start()
    try:
        redis_streams.Appender(server.client(), "test").append(
            PERSONA, Message(id=0, sender="loom", content="hi", created="2026-01-01T00:00:00Z", read=False))
        cli = Cli(sb.url, sb.token, tmp_path / "state")
        assert cli("--once", "--persona", PERSONA, "--source", server.url, "--consumer", "ci").code == 0
        with dashboard(sb.url, sb.token, tmp_path / "state", "--source", server.url, "--persona", PERSONA) as dash, \
                chromium() as browser:
            browser.get(dash.url)
            browser.wait_for("return document.querySelector('#groups tbody').textContent.includes('ci')")
            assert not browser.script("return document.getElementById('redis-panel').hidden")
            assert browser.text("#relay tbody").startswith(PERSONA)
            server.stop()
            browser.wait_for("const b = document.querySelector('#redis-down'); "
                             "return b !== null && b.textContent.includes('Redis is unreachable')", timeout=10.0)
            assert browser.script("return document.querySelector('#kijito-down') === null")  # Kijito is fine
    finally:
        server.stop()
