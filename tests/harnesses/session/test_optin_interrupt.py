"""The `inbox interrupt:` line: which mail may reach an agent in the middle of a turn."""

from __future__ import annotations

import io
import json

import pytest

from kijito_pull.cli import main as cli_main
from kijito_pull.harnesses.session import optin


def _project(tmp_path, *lines):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("\n".join(["# notes", "- inbox monitor: raise on start", *lines]) + "\n")
    return tmp_path


def test_default_is_all(tmp_path):
    found = optin.resolve(_project(tmp_path), {})
    assert (found.interrupt, found.interrupt_source, found.interrupt_problem) == ("all", "default", None)


@pytest.mark.parametrize("line, policy", [
    ("- inbox interrupt: urgent", "urgent"),
    ("* Inbox Interrupt: `turn-end`", "turn-end"),
    ("inbox interrupt:ALL", "all"),
])
def test_line_sets_the_policy(tmp_path, line, policy):
    found = optin.resolve(_project(tmp_path, line), {})
    assert (found.interrupt, found.interrupt_source, found.interrupt_problem) == (policy, "file", None)
    assert found.persona == tmp_path.name and found.problem is None


def test_unknown_value_interrupts_nobody_but_delivery_goes_on(tmp_path):
    found = optin.resolve(_project(tmp_path, "- inbox interrupt: sometimes"), {})
    assert found.interrupt == "turn-end"
    assert "sometimes" in found.interrupt_problem and "all, urgent, turn-end" in found.interrupt_problem
    assert found.problem is None and found.persona  # the hooks still deliver, at the turn's end


@pytest.mark.parametrize("policy, urgent, expected", [
    ("all", None, True), ("all", False, True), ("all", True, True),
    ("urgent", None, False), ("urgent", False, False), ("urgent", True, True),
    ("turn-end", True, False), ("turn-end", None, False),
])
def test_may_interrupt(policy, urgent, expected):
    assert optin.may_interrupt(policy, urgent) is expected


def _run(argv, cwd):
    from kijito_pull.core.environment import Environment

    out, err = io.StringIO(), io.StringIO()
    env = Environment(environ={}, cwd=str(cwd), stdout=out, stderr=err)
    code = cli_main.main(argv, env)
    return code, out.getvalue(), err.getvalue()


def test_optin_command_shows_the_policy(tmp_path):
    _project(tmp_path, "- inbox interrupt: urgent")
    code, out, _ = _run(["optin", "--cwd", str(tmp_path)], tmp_path)
    assert code == 0 and "interrupt urgent (only urgent mail may reach the agent mid-turn, from the file)" in out
    code, out, _ = _run(["optin", "--json", "--cwd", str(tmp_path)], tmp_path)
    data = json.loads(out)
    assert (data["interrupt"], data["interrupt_source"], data["interrupt_problem"]) == ("urgent", "file", None)


def test_optin_command_warns_about_a_bad_policy(tmp_path):
    _project(tmp_path, "- inbox interrupt: loud")
    code, out, err = _run(["optin", "--cwd", str(tmp_path)], tmp_path)
    assert code == 0 and "interrupt turn-end" in out and "'inbox interrupt: loud'" in err
