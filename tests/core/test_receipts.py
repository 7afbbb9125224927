"""Kijito's read flag as a confirmed receipt (kijito_pull/core/receipts.py, `--mark-read`): real HTTP against
the sandbox, real cursor files, real `kijito-pull --once` runs.

What a user running ephemeral CI runners counts: three runs, each with a fresh state directory, get each
message once between them; nothing above the cursor is ever marked (another session may still hold it);
a mark that fails costs at most a duplicate later, never a loss, and is tried again."""

from __future__ import annotations

import os

import pytest

from kijito_pull.core.api import KijitoClient
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.engine import Engine
from kijito_pull.core.pending import Holder
from kijito_pull.core.receipts import ReadReceipts
from kijito_pull.core.sink import BatchSink
from tests.clirunner import Cli
from tests.core.conftest import PERSONA

TOKEN = "receipts-token"


def unread(sb, persona=PERSONA):
    return sorted(m["id"] for m in sb.messages(persona) if not m["read"])


def marks(sb):
    return [r for r in sb.requests if r["path"] == "/api/inbox" and r["query"].get("mark_read") != "false"]


def test_three_fresh_runners_get_each_message_once_between_them(sb, tmp_path):
    ids = [sb.send("ci-bot", "loom", f"task {n}") for n in range(3)]
    seen = []
    for run in range(3):
        cli = Cli(sb.url, sb.token, tmp_path / f"runner-{run}")  # a fresh container: no state at all
        result = cli("--once", "--json", "--persona", "ci-bot", "--mark-read")
        assert result.code == 0, result.stderr
        seen += result.new_ids
        if run == 0:
            ids.append(sb.send("ci-bot", "loom", "task 3"))  # arrives between runs
    assert sorted(seen) == ids and len(seen) == len(set(seen)), seen
    assert unread(sb, "ci-bot") == []


def test_without_the_flag_every_fresh_runner_gets_everything_again(sb, tmp_path):
    """The default leaves the server's read flag alone (other tools read it): this is what --mark-read fixes."""
    ids = [sb.send("ci-bot", "loom", f"task {n}") for n in range(2)]
    for run in range(2):
        result = Cli(sb.url, sb.token, tmp_path / f"runner-{run}")("--once", "--json", "--persona", "ci-bot")
        assert result.new_ids == ids
    assert marks(sb) == [] and unread(sb, "ci-bot") == ids


def test_a_failed_mark_loses_nothing_and_is_tried_again(sb, tmp_path):
    ids = [sb.send("ci-bot", "loom", f"task {n}") for n in range(2)]
    cli = Cli(sb.url, sb.token, tmp_path / "runner")
    sb.add_fault({"kind": "status", "status": 503, "path": "/api/inbox", "backward": True, "times": 10})
    first = cli("--once", "--json", "--persona", "ci-bot", "--mark-read")
    assert first.code == 0 and first.new_ids == ids  # the consumer has its mail; only the receipt waits
    assert "marking mail read failed" in first.stderr
    assert unread(sb, "ci-bot") == ids
    # A fresh runner meanwhile gets the same mail again: a duplicate, never a loss.
    assert Cli(sb.url, sb.token, tmp_path / "other")("--once", "--json", "--persona", "ci-bot").new_ids == ids
    sb.clear_faults()
    again = cli("--once", "--json", "--persona", "ci-bot", "--mark-read")
    assert again.code == 0 and again.new_ids == [] and "failed" not in again.stderr
    assert unread(sb, "ci-bot") == []


class Held(BatchSink):
    def write(self, text, shown):
        return True


@pytest.fixture
def receipts(sb, store, factory):
    client = KijitoClient(sb.url, sb.token, attempts=1)
    engine = Engine(client, store, factory, persona=PERSONA, consumer="agent", lock_timeout=1.0)
    yield ReadReceipts(engine, client)
    client.close()


def test_mail_above_the_cursor_is_never_marked(sb, receipts, factory):
    """A hand-over pending with a session is not confirmed: the cursor stays below it, and so do the marks,
    though the window that marks could have reached it."""
    first = sb.send(PERSONA, "river", "one")
    assert pull_through(receipts, factory, Held()).delivered == [first]  # confirmed: marked
    held = sb.send(PERSONA, "river", "two")
    holder = Holder("toy:s1", os.getpid())
    assert pull_through(receipts, factory, Held(), holder=holder).delivered == [held]
    assert unread(sb) == [held]
    assert all(int(r["query"]["before_id"]) == first + 1 for r in marks(sb)), marks(sb)
    receipts.settle(holder.key, confirmed=[held])  # the session's record shows it: confirmed
    pull_through(receipts, factory, Held())  # the next pull moves the cursor past it, and marks it
    assert unread(sb) == []


def test_a_mark_walks_back_over_a_long_window_and_stops_where_the_last_one_reached(sb, receipts, factory):
    sb.set_window(limit=5)
    ids = [sb.send(PERSONA, "river", f"m{n}") for n in range(12)]
    taken = []
    for _ in range(4):
        report = pull_through(receipts, factory, Held())
        taken += report.delivered
    assert taken == ids and unread(sb) == []
    sb.clear_requests()
    later = [sb.send(PERSONA, "river", "late")]
    assert pull_through(receipts, factory, Held()).delivered == later
    assert len(marks(sb)) == 1 and unread(sb) == []  # one window reaches below the last mark: it stops there


def test_a_confirmation_outside_a_pull_is_marked_before_the_run_ends(sb, receipts, factory):
    """SessionEnd (or `exec`) confirms the run's last hand-over with no pull after it: an ephemeral runner
    must still leave it marked, or the next fresh runner gets it again."""
    ids = [sb.send(PERSONA, "river", "one")]
    holder = Holder("toy:end", os.getpid())
    assert pull_through(receipts, factory, Held(), holder=holder).delivered == ids
    assert unread(sb) == ids  # pending with the session: not marked
    receipts.settle(holder.key, confirmed=ids)
    assert unread(sb) == []
