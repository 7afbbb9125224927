"""A harness whose hooks live in a JSON settings file is one small folder on the harness kit
(kijito_pull.harnesses.settingshooks): tests/harnesses/settingstoy/, registered at test time only, is
installed, checked by doctor, hands mail over at Stop (pending until its transcript shows it) and is
uninstalled byte for byte, all through real `kijito-pull` processes against the sandbox.

The registry line is added in each process by a `sitecustomize` module on PYTHONPATH (the one line a
real harness adds to kijito_pull/harnesses/registry.py); nothing in kijito_pull/ knows the toy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kijito_pull.harnesses import registry

TOKEN = "settings-toy-token"
REPO = Path(__file__).resolve().parents[2]
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
FOLDER = Path(__file__).parent / "settingstoy"
#: A user's own settings, formatted their way: uninstall must give these bytes back.
USERS_OWN = (b'{\n    "theme":  "dark",\n'
             b'    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}\n}')


@pytest.fixture
def machine(sb, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("from kijito_pull.harnesses import registry\n"
                                           "registry.HARNESSES['settingstoy'] = 'tests.harnesses.settingstoy'\n")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "AGENTS.md").write_text("# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"), "PYTHONPATH": f"{site}:{REPO}",
           "KIJITOMON_TOKEN": sb.token, "KIJITO_BASE": sb.url, "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"),
           "KIJITO_PULL_CONFIG": os.devnull}
    return {"env": env, "project": project, "elsewhere": elsewhere, "transcript": tmp_path / "transcript.jsonl"}


def run(machine, *argv: str, stdin: str = "", cwd: Path | None = None, env: dict | None = None):
    proc = subprocess.run([KIJITO_PULL, *argv], input=stdin, capture_output=True, text=True, timeout=60,
                          cwd=cwd or machine["project"], env={**machine["env"], **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


def hook(machine, name: str, **fields):
    data = {"session_id": "toy-1", "cwd": str(machine["project"]), "transcript_path": str(machine["transcript"]),
            **fields}
    return run(machine, "hook", name, stdin=json.dumps({k: v for k, v in data.items() if v is not None}))


def cursor(machine) -> dict:
    code, out, err = run(machine, "status", "--json", "--persona", "river")
    assert (code, err) == (0, "")
    (row,) = [json.loads(line) for line in out.splitlines()]
    return row


def test_the_folder_is_small():
    lines = sum(len(p.read_text().splitlines()) for p in FOLDER.glob("*.py"))
    assert lines <= 70, lines  # its descriptor for the shared tests and crash trials (testing.py) included


def _site(tmp_path: Path) -> str:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("from kijito_pull.harnesses import registry\n"
                                           "registry.HARNESSES['settingstoy'] = 'tests.harnesses.settingstoy'\n")
    return f"{site}:{REPO}"


def test_the_entry_points_and_crash_trials_list_the_toy_from_its_descriptor(monkeypatch):
    from tests import entrypoints

    toy = {"hook-settingstoy-session-start", "hook-settingstoy-stop"}
    assert not toy & set(entrypoints.crash_entries())
    monkeypatch.setitem(registry.HARNESSES, "settingstoy", "tests.harnesses.settingstoy")  # the one registry line
    assert toy <= set(entrypoints.crash_entries()) and toy <= set(entrypoints.hook_entries(matrix=False))
    assert entrypoints.session_end_of("settingstoy") == "hook-settingstoy-session-end"
    data = json.loads(entrypoints.System("http://127.0.0.1:9", "t", Path(tempfile.mkdtemp()), "river")
                      .hook_payload("hook-settingstoy-stop", "toy-1"))
    assert data["hook_event_name"] == "Stop" and data["stop_hook_active"] is False and data["session_id"] == "toy-1"


@pytest.mark.slow
def test_the_crash_trials_kill_the_toy_s_hooks_and_lose_nothing(tmp_path):
    """scripts/crash_entries.py, unedited, over the toy's entry points: the registry line (sitecustomize) is all."""
    path = _site(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "crash_entries.py"), "--json", "--seed", "5",
                           "--entry", "hook-settingstoy-session-start", "--entry", "hook-settingstoy-stop",
                           "--kills", "3", "--answer-kills", "2", "--hook-timeout", "1.2", "--end-share", "0.2",
                           "--workdir", str(tmp_path / "crash")],
                          capture_output=True, text=True, timeout=400,
                          env={**os.environ, "PYTHONPATH": path, "KIJITO_PULL_TEST_PYTHONPATH": path})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stderr[-3000:]
    total = json.loads(lines[-1])
    assert (proc.returncode, total["problems"]) == (0, []), total
    by_entry = {s["entry"]: s for s in total["entries"]}
    assert set(by_entry) == {"hook-settingstoy-session-start", "hook-settingstoy-stop"}, total
    for s in by_entry.values():
        assert s["lost"] == 0 and s["delivered"] == s["sent"] > 0 and s["random_kills"] >= 3, s
        assert s["answer_kills"]["answer"] > 0 and s["in_killed_output_lost"] == 0, s


def test_install_doctor_stop_confirmed_from_the_transcript_and_byte_exact_uninstall(sb, machine):
    settings = machine["project"] / ".settingstoy" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(USERS_OWN)

    code, out, err = run(machine, "install", "settingstoy", "--project", "--dry-run")
    assert (code, err) == (0, ""), err
    assert "dry run, nothing changed" in out and "+" in out and "hook settingstoy-stop" in out
    assert settings.read_bytes() == USERS_OWN
    code, out, err = run(machine, "install", "settingstoy", "--project")
    assert (code, err) == (0, ""), err
    assert out.startswith("kijito-pull: settingstoy (project scope): installed")
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark"
    commands = {event: [h["command"] for g in groups for h in g["hooks"]] for event, groups in data["hooks"].items()}
    # Through the launcher in kijito-pull's data folder, which tries the installing kijito-pull first.
    launcher = Path(machine["env"]["HOME"]) / ".local" / "share" / "kijito-pull" / "bin" / "kijito-pull-launch"
    assert commands == {"Stop": ["say done", f"{launcher} hook settingstoy-stop"],
                        "SessionStart": [f"{launcher} hook settingstoy-session-start"],
                        "SessionEnd": [f"{launcher} hook settingstoy-session-end"]}
    assert f"HERE={KIJITO_PULL}  # kijito-pull: the installer writes this line" in launcher.read_text()
    assert os.access(launcher, os.X_OK)
    assert run(machine, "install", "settingstoy", "--project")[1].startswith(
        "kijito-pull: settingstoy (project scope): already installed")

    code, out, _err = run(machine, "doctor", "--json")
    rows = {row["check"]: row for row in map(json.loads, out.splitlines())}
    assert rows["harness.settingstoy"]["verdict"] == "ok", rows["harness.settingstoy"]
    assert "wired: project" in rows["harness.settingstoy"]["detail"]
    assert rows["settingstoy.hooks"] == {"check": "settingstoy.hooks", "verdict": "ok", "fix": None,
                                         "detail": "1 settings file(s) hold our hooks"}

    first = sb.send("river", "loom", "the toy's first message")
    # The Stop hook exactly as the harness runs it: its command line, by a shell, with no kijito-pull on PATH.
    stdin = json.dumps({"session_id": "toy-1", "transcript_path": str(machine["transcript"]),
                        "cwd": str(machine["project"]), "hook_event_name": "Stop"})
    proc = subprocess.run(["/bin/sh", "-c", commands["Stop"][1]], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=machine["project"], env={**machine["env"], "PATH": "/usr/bin:/bin"})
    code, out, err = proc.returncode, proc.stdout, proc.stderr
    assert code == 0, err
    answer = json.loads(out)
    assert answer["decision"] == "block" and "the toy's first message" in answer["reason"]
    assert "kijito-ref:" in answer["reason"]
    row = cursor(machine)
    assert row["cursor"] is None or row["cursor"] < first
    assert [(p["holder"], p["ids"]) for p in row["pending"]] == [("settingstoy:toy-1", [first])]

    # The harness records what the model was given in its transcript; the next hook confirms from it.
    with machine["transcript"].open("a") as handle:
        handle.write(json.dumps({"type": "stop_hook", "reason": answer["reason"]}) + "\n")
    code, out, err = hook(machine, "settingstoy-stop", hook_event_name="Stop")
    assert (code, out) == (0, "{}\n"), err
    row = cursor(machine)
    assert (row["cursor"], row["pending"]) == (first, [])

    code, out, err = run(machine, "uninstall", "settingstoy", "--project")
    assert (code, err) == (0, ""), err
    assert "restored byte for byte" in out
    assert settings.read_bytes() == USERS_OWN


def test_a_fresh_project_is_left_as_it_was(machine):
    before = sorted(p.relative_to(machine["project"]) for p in machine["project"].rglob("*"))
    assert run(machine, "install", "settingstoy", "--project")[0] == 0
    assert (machine["project"] / ".settingstoy" / "settings.json").exists()
    code, out, err = run(machine, "uninstall", "settingstoy", "--project")
    assert (code, err) == (0, "") and "removed (it did not exist before the install)" in out
    assert sorted(p.relative_to(machine["project"]) for p in machine["project"].rglob("*")) == before


def test_a_hand_over_the_transcript_never_shows_is_released_at_session_end(sb, machine):
    sent = sb.send("river", "loom", "shown to nobody")
    code, out, _err = hook(machine, "settingstoy-session-start", hook_event_name="SessionStart")
    assert "shown to nobody" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    machine["transcript"].write_text(json.dumps({"type": "other", "text": "no marker here"}) + "\n")
    row = cursor(machine)
    assert row["cursor"] is None or row["cursor"] < sent
    assert [(p["holder"], p["ids"]) for p in row["pending"]] == [("settingstoy:toy-1", [sent])]
    code, out, err = hook(machine, "settingstoy-session-end", hook_event_name="SessionEnd")
    assert (code, out) == (0, "{}\n"), err
    row = cursor(machine)
    assert row["cursor"] is None or row["cursor"] < sent  # never shown, so never confirmed
    assert [p["holder"] for p in row["pending"]] in ([], [None])  # unseen again: the next session gets it
    code, out, err = hook(machine, "settingstoy-stop", session_id="toy-2", hook_event_name="Stop")
    assert "shown to nobody" in json.loads(out)["reason"], err


def test_the_project_folder_comes_from_the_harness_own_variable(sb, machine):
    """With no `cwd` in the input, the gate looks at the folder the harness's `project_env` names, and at no
    other harness's (CLAUDE_PROJECT_DIR is Claude Code's own)."""
    sb.send("river", "loom", "found through the variable")
    stdin = json.dumps({"session_id": "toy-2"})
    code, out, err = run(machine, "hook", "settingstoy-stop", stdin=stdin, cwd=machine["elsewhere"],
                         env={"CLAUDE_PROJECT_DIR": str(machine["project"])})
    assert (code, out) == (0, "{}\n"), err
    code, out, err = run(machine, "hook", "settingstoy-stop", stdin=stdin, cwd=machine["elsewhere"],
                         env={"SETTINGSTOY_PROJECT_DIR": str(machine["project"])})
    assert code == 0, err
    assert "found through the variable" in json.loads(out)["reason"]


def test_the_kit_refuses_two_hooks_on_one_event():
    """Codex's watcher shares SessionStart with codex-session-start; it is no settings hook, so Codex names
    the ones it installs. Left to the default, the kit would silently drop one."""
    from kijito_pull.harnesses.codex import HARNESS as CODEX
    from kijito_pull.harnesses.settingshooks import SettingsHooks

    with pytest.raises(ValueError, match="each settings event takes one hook"):
        SettingsHooks(CODEX, lambda scope, environ, project: project / "hooks.json")
    kit = SettingsHooks(CODEX, lambda scope, environ, project: project / "hooks.json",
                        hooks=("codex-session-start", "codex-stop", "codex-session-end"))
    assert kit.events == {"SessionStart": "codex-session-start", "Stop": "codex-stop",
                          "SessionEnd": "codex-session-end"}
