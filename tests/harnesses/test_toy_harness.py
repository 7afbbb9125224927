"""Adding a harness is one folder plus one registry line: a toy harness (tests/harnesses/toy/), registered
at test time, is picked up by `install`, `uninstall`, `doctor` and `hook` with no other file edited."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kijito_pull import doctor
from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import hookgate, registry

REPO = Path(__file__).resolve().parents[2]
TOY = "tests.harnesses.toy"
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"


@pytest.fixture
def toy(monkeypatch):
    """The one registry line."""
    monkeypatch.setitem(registry.HARNESSES, "toy", TOY)


@pytest.fixture
def machine(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".git").mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    environ = {"HOME": str(home), "PATH": str(Path(sys.executable).parent),
               "KIJITO_PULL_STATE_DIR": str(tmp_path / "s"), "KIJITO_PULL_CONFIG": os.devnull,
               "XDG_CONFIG_HOME": str(home / ".config")}
    return {"home": home, "project": project, "plain": plain, "environ": environ}


def cli(machine, *argv: str, cwd: Path | None = None, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Environment(stdin=io.StringIO(stdin), stdout=out, stderr=err, environ=machine["environ"],
                                        cwd=str(cwd or machine["project"])))
    return code, out.getvalue(), err.getvalue()


def test_without_the_registry_line_nothing_knows_the_toy(machine):
    code, _out, err = cli(machine, "install", "toy", "--project")
    assert code == 2 and "invalid choice: 'toy'" in err
    assert "toy-stop" not in registry.hook_names()
    assert "harness.toy" not in doctor.CHECK_IDS


def test_install_and_uninstall_pick_it_up(toy, machine):
    hooks = machine["project"] / ".toy" / "hooks.json"
    code, out, err = cli(machine, "install", "toy", "--project", "--flavour", "mint")
    assert (code, err) == (0, ""), err
    assert out.startswith("kijito-pull: toy (project scope): installed")
    assert json.loads(hooks.read_text()) == {"command": "kijito-pull hook toy-stop", "flavour": "mint"}
    assert cli(machine, "install", "toy", "--project")[1].startswith(
        "kijito-pull: toy (project scope): already installed, nothing changed")
    code, out, err = cli(machine, "uninstall", "toy", "--project")
    assert (code, err) == (0, "") and out.startswith("kijito-pull: toy (project scope): uninstalled")
    assert not hooks.exists()
    # its own arguments are its own: --flavour is an install option only
    code, _out, err = cli(machine, "uninstall", "toy", "--project", "--flavour", "mint")
    assert code == 2 and "unrecognized arguments: --flavour" in err


def test_install_help_lists_it(toy, machine):
    _code, out, _err = cli(machine, "install", "--help")
    assert "Toy Agent: one line in .toy/hooks.json" in out


def test_doctor_checks_it(toy, machine):
    assert cli(machine, "install", "toy", "--project")[0] == 0
    code, out, _err = cli(machine, "doctor", "--json")
    rows = {row["check"]: row for row in map(json.loads, out.splitlines())}
    assert list(rows) == list(doctor.CHECK_IDS)
    assert rows["harness.toy"]["verdict"] == "ok" and "wired: project" in rows["harness.toy"]["detail"]
    assert rows["toy.check"]["detail"] == "the toy harness was asked"
    assert list(rows).index("harness.toy") < list(rows).index("waker") < list(rows).index("toy.check")


def test_hook_runs_its_runtime_in_an_opted_in_project(toy, machine):
    (machine["project"] / "AGENTS.md").write_text(OPT_IN)
    stdin = json.dumps({"session_id": "s1", "cwd": str(machine["project"])})
    code, out, err = cli(machine, "hook", "toy-stop", stdin=stdin)
    assert (code, err) == (0, "")
    assert json.loads(out) == {"toy": "toy-stop", "persona": "river", "mode": "headless"}


def test_hook_answers_its_nothing_elsewhere(toy, machine):
    stdin = json.dumps({"cwd": str(machine["plain"])})
    assert cli(machine, "hook", "toy-stop", cwd=machine["plain"], stdin=stdin) == (0, "TOY-NOTHING\n", "")
    out, err = io.StringIO(), io.StringIO()
    code = hookgate.run_hook("toy-stop", io.StringIO("not json"), out, err, machine["environ"], str(machine["plain"]))
    assert (code, out.getvalue()) == (0, "TOY-NOTHING\n")
    _code, help_text, _err = cli(machine, "hook", "--help")
    assert "toy-stop" in help_text and "Toy Stop: says which persona" in help_text


def test_the_console_entry_routes_the_toy_hook(machine):
    """The early gate (the console entry's route) finds the hook through the registry too."""
    (machine["project"] / "AGENTS.md").write_text(OPT_IN)
    probe = ("from kijito_pull.harnesses import hookgate, registry\n"
             f"registry.HARNESSES['toy'] = {TOY!r}\n"
             "hookgate.early_gate(['kijito-pull', 'hook', 'toy-stop'])\n"
             "print('early_gate returned')\n")
    proc = subprocess.run([sys.executable, "-c", probe], input=json.dumps({"cwd": str(machine["project"])}),
                          capture_output=True, text=True, cwd=machine["project"], timeout=30,
                          env={**os.environ, **machine["environ"], "PYTHONPATH": str(REPO)})
    assert (proc.returncode, proc.stderr) == (0, "")
    assert json.loads(proc.stdout) == {"toy": "toy-stop", "persona": "river", "mode": "headless"}
