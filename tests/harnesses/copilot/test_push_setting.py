"""Whether Copilot CLI push is on for this user (issue 27, trip 11): `install copilot` says so, at either
scope, with the command that turns it on, and the doctor's `copilot.push` reads the setting where Copilot
records it ($COPILOT_HOME/settings.json). The real Copilot CLI writes that setting in
tests/e2e/test_copilot_setting_e2e.py."""

from __future__ import annotations

import json

import pytest

from kijito_pull.harnesses.copilot import installer
from tests.harnesses.copilot.test_copilot import KIJITO_PULL, Copilot

TOKEN = "tok-COPILOT-PUSH-5d21"


@pytest.fixture
def c(sb, tmp_path) -> Copilot:
    return Copilot(sb, tmp_path)


def push(c: Copilot) -> dict:
    _, out, _ = c.run("doctor", "--json")
    return next(row for row in map(json.loads, out.splitlines()) if row["check"] == "copilot.push")


def test_the_install_and_the_doctor_say_whether_push_is_on_and_how_to_turn_it_on(c):
    code, out, err = c.run("install", "copilot", "--user", "--command", KIJITO_PULL)
    assert code == 0, err
    assert "push is off for you" in out and "run `copilot config experimental on` once" in out
    row = push(c)
    assert row["verdict"] == "warn" and "push is off for you" in row["detail"]
    assert row["fix"].startswith("run `copilot config experimental on` once")
    (c.home / ".copilot" / "settings.json").write_text('{\n  "experimental": true\n}\n')  # what that command writes
    assert push(c)["verdict"] == "ok"
    again = c.run("install", "copilot", "--user", "--command", KIJITO_PULL)[1]
    assert "push is on for you" in again and "push is off" not in again
    (c.home / ".copilot" / "settings.json").write_text('{\n  "experimental": false\n}\n')  # --no-experimental
    assert push(c)["verdict"] == "warn"


def test_a_project_install_says_push_needs_the_user_extension(c):
    code, out, err = c.run("install", "copilot", "--project", "--command", KIJITO_PULL)
    assert code == 0, err
    assert installer.PROJECT_PUSH_NOTE in out
    assert c.run("install", "copilot", "--user", "--command", KIJITO_PULL)[0] == 0
    assert "push is off for you" in c.run("install", "copilot", "--project", "--command", KIJITO_PULL)[1]
