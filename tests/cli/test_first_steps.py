"""What a new user trips over first (issue 23): the messages of `pull`, `send`, `completion` and a
Ctrl-C, run in-process and as real subprocesses against the sandbox."""

from __future__ import annotations

TOKEN = "tok-FIRST-STEPS-8e21"


def test_a_persona_known_only_in_another_case_is_named_by_the_pull(sb, cli):
    sb.add_persona("river", memory_count=1)
    sb.send(to="river", sender="loom", content="for river")
    wrong = cli("--once", "--persona", "River")
    assert wrong.code == 0
    assert wrong.stdout == "No new mail for River.\n"
    assert ("kijito-pull: warning: River is not in the account's directory, but river is: inbox names are "
            "case-sensitive, so mail for river never reaches River; use --persona river") in wrong.stderr
    again = cli("--once", "--json", "--persona", "River")  # still nothing delivered: still said
    assert "but river is" in again.stderr
    right = cli("--once", "--json", "--persona", "river")
    assert [e["content"] for e in right.of_kind("new")] == ["for river"] and right.stderr == ""


def test_the_directory_is_asked_only_while_a_cursor_has_delivered_nothing(sb, cli):
    sb.add_persona("river", memory_count=1)
    sb.send(to="river", sender="loom", content="one")
    assert cli("--once", "--persona", "river").code == 0  # delivers: no directory read needed
    assert cli("--once", "--persona", "river").stdout == "No new mail for river.\n"
    assert [r for r in sb.requests if r["path"] == "/api/personas"] == []
    assert cli("--once", "--persona", "nobody").stderr == ""  # asked, but no variant: nothing to say
    assert len([r for r in sb.requests if r["path"] == "/api/personas"]) == 1


def test_send_quiet_prints_nothing_but_json_still_answers(sb, cli):
    quiet = cli("send", "-q", "--to", "river", "--from", "loom", "hello")
    assert (quiet.code, quiet.stdout, quiet.stderr) == (0, "", "")
    loud = cli("send", "--to", "river", "--from", "loom", "again")
    assert loud.stdout.startswith("sent message ") and loud.stdout.endswith(" to river\n")
    data = cli("send", "-q", "--json", "--to", "river", "--from", "loom", "third")
    assert data.events[0]["to"] == "river"
    assert [e["content"] for e in cli("--once", "--json", "--persona", "river").of_kind("new")] == [
        "hello", "again", "third"]


def test_verbose_is_offered_only_by_commands_that_send_requests(cli):
    completion = cli("completion", "-v", "bash")
    assert completion.code == 2 and "unrecognized arguments: -v" in completion.stderr
    assert "HTTP" not in cli("completion", "--help").stdout
    assert "HTTP" not in cli("status", "--help").stdout
    assert "-q, --quiet" in cli("completion", "--help").stdout
    assert "also log each HTTP request" in cli("pull", "--help").stdout
    assert "also log each HTTP request" in cli("send", "--help").stdout


def test_the_self_test_counts_one_persona_in_the_singular(sb, cli):
    one = cli("watch", "--persona", "P", "--self-test")
    assert one.code == 0 and f"self-test passed (1 persona, {sb.url})" in one.stderr
    two = cli("watch", "--persona", "P", "--persona", "Q", "--self-test")
    assert f"self-test passed (2 personas, {sb.url})" in two.stderr
