"""The daemon installer's tests: a machine with fake systemctl, loginctl and launchctl on PATH."""

from __future__ import annotations

import pytest

from tests.harnesses.test_install import FAKE_CTL, Machine


@pytest.fixture
def m(tmp_path) -> Machine:
    machine = Machine(tmp_path)
    config = machine.home / ".config" / "kijito-pull" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("")  # $KIJITO_PULL_CONFIG must name a file that exists
    machine.environ["KIJITO_PULL_CONFIG"] = str(config)
    machine.environ["KIJITO_PULL_STATE_DIR"] = str(machine.home / ".local" / "state" / "kijito-pull")
    for name in ("systemctl", "loginctl", "launchctl"):
        machine.fake(name, FAKE_CTL)
    return machine
