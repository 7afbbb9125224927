"""The daemon installer's tests: a machine with fake systemctl, loginctl and launchctl on PATH."""

from __future__ import annotations

import pytest

from tests.harnesses.test_install import FAKE_CTL, Machine


@pytest.fixture
def m(tmp_path) -> Machine:
    machine = Machine(tmp_path)
    machine.environ["KIJITO_PULL_CONFIG"] = str(machine.home / ".config" / "kijito-pull" / "config.toml")
    machine.environ["KIJITO_PULL_STATE_DIR"] = str(machine.home / ".local" / "state" / "kijito-pull")
    for name in ("systemctl", "loginctl", "launchctl"):
        machine.fake(name, FAKE_CTL)
    return machine
