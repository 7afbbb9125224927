"""The real Copilot CLI's own switch for its experimental features, against what kijito-pull reads
(issue 27, trip 11): `copilot config experimental on|off` (Copilot 1.0.102) records the setting where the
doctor's `copilot.push` and `install copilot` look for it, so their "push is on/off for you" is Copilot's
own answer, not a guess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e import copilot_helpers as cp
from tests.e2e import harness as h
from tests.harnesses.copilot.test_copilot import KIJITO_PULL

pytestmark = pytest.mark.e2e


def test_copilots_own_switch_turns_push_on_and_off_as_the_doctor_reads_it(e2e_home: Path, tmp_path: Path) -> None:
    copilot = h.require_harness("copilot")
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    env = h.base_env(e2e_home, {"COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                                "XDG_CACHE_HOME": str(cp.cache_dir()), "KIJITO_PULL_CONFIG": "/dev/null",
                                "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "KIJITOMON_TOKEN": "unused",
                                "KIJITO_BASE": "http://127.0.0.1:9"})

    def kp(*argv: str) -> str:
        done = subprocess.run([KIJITO_PULL, *argv], env=env, cwd=project, capture_output=True, text=True, timeout=60)
        return done.stdout

    def switch(value: str) -> None:
        done = subprocess.run(h.netns().wrap(copilot.cmd("config", "experimental", value)), env=env, cwd=project,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr

    def verdict() -> str:
        rows = [json.loads(line) for line in kp("doctor", "--json").splitlines()]
        return next(r for r in rows if r["check"] == "copilot.push")["verdict"]

    assert "push is off for you" in kp("install", "copilot", "--user", "--command", KIJITO_PULL)
    assert verdict() == "warn"
    switch("on")
    assert verdict() == "ok"
    assert "push is on for you" in kp("install", "copilot", "--user", "--command", KIJITO_PULL)
    switch("off")
    assert verdict() == "warn"
