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
