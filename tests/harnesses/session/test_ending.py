"""The one fast-gate answer of a SessionEnd that only settles (kijito_pull.harnesses.session.ending), through
the real gate (hookgate.gate) of each harness that uses it: a session never handed mail ends in the gate
(its own files forgotten, the runtime left out), a session holding hand-overs goes on to the runtime, a
SessionEnd without a session id says so, and the harness's other hooks are not answered by it."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from kijito_pull.harnesses import registry
from kijito_pull.harnesses.hookgate import gate
from kijito_pull.harnesses.session import lifecycle

SID = "5e551011-0000-4000-8000-00000000e7d0"
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"
#: The harnesses whose SessionEnd is answered by session.ending, and one other hook each that it must not answer.
USERS = {"claude": "claude-stop", "gemini": "gemini-after-agent", "copilot": "copilot-stop"}


@pytest.fixture
def where(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "AGENTS.md").write_text(OPT_IN)
    environ = {"KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path / "home"),
               "KIJITO_PULL_CONFIG": os.devnull, "KIJITO_PULL_MODE": "headless"}
    return project, environ


def _gate(name: str, hook: str, project: Path, environ: dict[str, str], **data):
    harness = registry.get(name)
    found = harness.hook(hook)
    assert found is not None, hook
    err = io.StringIO()
    stdin = io.StringIO(json.dumps({"cwd": str(project), "hook_event_name": found.event, **data}))
    code, inp = gate(harness, found, stdin, environ, str(project), err)
    return code, inp, err.getvalue()


def _end_hook(name: str) -> str:
    [hook] = [h.name for h in registry.get(name).hooks if h.event == "SessionEnd"]
    return hook


@pytest.mark.parametrize("name", sorted(USERS))
def test_a_session_never_handed_mail_ends_in_the_gate_and_forgets_its_files(name, where):
    project, environ = where
    lifecycle.write_blocks(environ, SID, 2, "p1")
    assert lifecycle.read_blocks(environ, SID, "p1") == 2
    code, inp, err = _gate(name, _end_hook(name), project, environ, session_id=SID)
    assert (code, inp, err) == (0, None, "")
    assert lifecycle.read_blocks(environ, SID, "p1") == 0  # lifecycle.end_session ran


@pytest.mark.parametrize("name", sorted(USERS))
def test_a_session_holding_hand_overs_goes_on_to_the_runtime(name, where):
    project, environ = where
    marker = lifecycle.handed_marker(environ, SID)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    code, inp, _err = _gate(name, _end_hook(name), project, environ, session_id=SID)
    assert code is None and inp is not None and inp.session_id == SID


@pytest.mark.parametrize("name", sorted(USERS))
def test_a_session_end_without_a_session_id_says_so(name, where):
    project, environ = where
    code, inp, err = _gate(name, _end_hook(name), project, environ)
    assert (code, inp) == (0, None)
    assert err.startswith(f"kijito-pull: {_end_hook(name)}: session_id_unavailable") and err.count("\n") == 1, err


@pytest.mark.parametrize("name", ["gemini", "copilot"])
def test_the_shared_answer_leaves_the_harness_s_other_hooks_alone(name, where):
    project, environ = where
    code, inp, _err = _gate(name, USERS[name], project, environ, session_id=SID, stop_hook_active=False)
    assert code is None and inp is not None and inp.hook == USERS[name]
