"""What a new user tripped over (issue 27): documented config keys called unknown, a missing config file
the user named, a misspelt persona met with silence, an empty persona directory called unreadable. Each
runs the real command against the sandbox (the doctor in-process, the pull as a subprocess too)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kijito_pull.context import Flags, Settings
from kijito_pull.core import config
from tests.test_doctor import findings, machine, run  # noqa: F401 - `machine` is a fixture

TOKEN = "tok-NEWUSER-2b7d91"
CONTEXT = Path(__file__).resolve().parent.parent / "kijito_pull" / "context.py"


# -- 2. the config keys the code reads are the keys the doctor knows ---------------------------------------

def test_every_config_key_the_code_reads_is_a_known_key():
    read = set(re.findall(r"self\.file\.get\(\"([a-z_]+)\"", CONTEXT.read_text()))
    assert {"source", "claim_after", "redis_password_file", "consumer", "mark_read"} <= read
    assert read <= set(config.KNOWN_KEYS)


def test_reading_an_undeclared_key_fails_at_once(tmp_path):
    f = tmp_path / "config.toml"
    f.write_text('persona = "river"\n')
    settings = config.load_config_file({"KIJITO_PULL_CONFIG": str(f)})
    assert settings.get("persona") == "river" and settings["persona"] == "river"
    with pytest.raises(KeyError, match="KNOWN_KEYS"):
        settings.get("colour")


def test_the_doctor_calls_no_documented_key_unknown(machine):  # noqa: F811
    environ = dict(machine["environ"])
    conf = machine["home"] / "config.toml"
    token = machine["home"] / "redis-password"
    token.write_text("pw\n")
    token.chmod(0o600)
    conf.write_text(f'claim_after = 900\nsource = "redis://127.0.0.1:1/0"\nredis_password_file = "{token}"\n'
                    f'max_stop_blocks = 2\ncolour = "red"\n')
    environ["KIJITO_PULL_CONFIG"] = str(conf)
    _, out, _ = run(["--json"], environ, machine["project"])
    row = findings(out)["config"]
    assert row["verdict"] == "warn"
    assert row["detail"].endswith("unknown keys ignored: colour"), row
    assert "claim_after" in row["detail"].split(";")[0] and "redis_password_file" in row["fix"]


def test_a_known_key_of_the_wrong_type_is_an_error_not_a_crash(tmp_path):
    f = tmp_path / "config.toml"
    f.write_text("source = 6379\n")
    with pytest.raises(config.ConfigError, match="source must be a quoted string"):
        config.load_config_file({"KIJITO_PULL_CONFIG": str(f)})


# -- 3. a config file the user names must exist -------------------------------------------------------------

def test_a_missing_config_file_named_by_the_variable_is_an_error_for_a_pull(cli, tmp_path):
    absent = tmp_path / "nonexistent.toml"
    cli.environ["KIJITO_PULL_CONFIG"] = str(absent)
    result = cli("--once", "--persona", "river")
    assert result.code == 2
    assert result.stderr.count("\n") == 1  # one line, no traceback
    assert (f"$KIJITO_PULL_CONFIG names {absent}, which does not exist; create it, point the variable at your "
            f"config file, or set it to /dev/null for none") in result.stderr
    assert result.stdout == ""


def test_a_missing_config_file_named_by_the_variable_fails_the_doctor(machine, tmp_path):  # noqa: F811
    environ = {**machine["environ"], "KIJITO_PULL_CONFIG": str(tmp_path / "nonexistent.toml")}
    code, out, _ = run(["--json"], environ, machine["project"])
    row = findings(out)["config"]
    assert code == 1 and row["verdict"] == "fail"
    assert "does not exist" in row["detail"] and "unset $KIJITO_PULL_CONFIG" in row["fix"]


def test_the_default_config_file_stays_optional_and_dev_null_means_none(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty-xdg"))
    assert Settings({}, Flags()).file == {}
    assert Settings({"KIJITO_PULL_CONFIG": os.devnull}, Flags()).file == {}


# -- 4. a misspelt persona is named, not met with silence ---------------------------------------------------

def test_a_misspelt_persona_is_named_on_stderr_and_the_pull_still_succeeds(sb, cli):
    sb.add_persona("river")
    sb.send(to="river", sender="loom", content="for river")
    wrong = cli("--once", "--persona", "rivr")
    assert wrong.code == 0 and wrong.stdout == "No new mail for rivr.\n"
    assert wrong.stderr == ("kijito-pull: warning: rivr is not in the account's directory (1 persona; the "
                            "nearest: river): nobody has written to it yet, or the name is misspelt\n")
    scripted = cli("--once", "--json", "--persona", "rivr")
    assert scripted.code == 0 and scripted.of_kind("new") == [] and "the nearest: river" in scripted.stderr
    # No extra request: the directory is asked once per pull only while the cursor has delivered nothing,
    # as for the case-variant warning, and never once mail was delivered.
    assert len([r for r in sb.requests if r["path"] == "/api/personas"]) == 2
    assert cli("--once", "--persona", "river").stderr == ""
    assert cli("--once", "--persona", "river").stderr == ""
    assert len([r for r in sb.requests if r["path"] == "/api/personas"]) == 2


def test_an_empty_directory_warns_nobody_at_pull_time(sb, cli):
    assert cli("--once", "--persona", "river").stderr == ""  # a new account: nothing to compare with


# -- 6. an empty persona directory is readable --------------------------------------------------------------

def test_the_doctor_calls_an_empty_directory_empty_not_unreadable(machine, sandbox):  # noqa: F811
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    _, out, _ = run(["--json"], environ, machine["project"])
    row = findings(out)["persona"]
    assert row["verdict"] == "ok", row
    assert "directory is empty (a new account" in row["detail"] and "could not be read" not in row["detail"]


def test_the_doctor_still_says_when_the_directory_cannot_be_read(machine, sandbox):  # noqa: F811
    sandbox.add_persona("river")
    sandbox.add_fault({"kind": "body", "path": "/api/personas", "body": '{"result": [{"persona": ""}]}'})
    environ = {**machine["environ"], "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    _, out, _ = run(["--json"], environ, machine["project"])
    row = findings(out)["persona"]
    assert row["verdict"] == "warn" and "could not be read" in row["detail"], row


# -- 9. the demo and text-mode notes speak to people ---------------------------------------------------------

def test_the_demo_says_urgent_mail_is_handed_over_and_where_show_works(tmp_path):
    from tests.clirunner import Cli

    result = Cli("http://127.0.0.1:9", "unused", tmp_path / "state").run(
        "demo", env={"KIJITOMON_TOKEN": "", "KIJITO_BASE": ""}, timeout=30)
    assert result.code == 0, result.stderr
    handed = result.stdout.split("== 2.", 1)[1].split("== 3.", 1)[0]
    assert "Urgent mail is among these messages: a sender marked one of the 3 urgent" in handed
    assert re.search(r"Read all of it with: kijito-pull show \d+ --persona demo-agent\]", handed)
    assert "This sandbox stops when the demo ends, so there is nothing for `kijito-pull show` to read" in handed


def test_a_first_pull_over_read_mail_says_so_in_a_sentence_and_json_keeps_the_fields(sb, cli):
    for n in range(3):
        sb.send(to="ci-bot", sender="loom", content=f"old {n}")
    sb.mark_read("ci-bot")
    sb.send(to="ci-bot", sender="loom", content="new")
    text = cli("--once", "--persona", "ci-bot")
    assert text.code == 0 and "new" in text.stdout
    assert text.stderr == ("kijito-pull: note: ci-bot: first pull for this consumer: its cursor is set at message "
                           f"{sb.messages('ci-bot')[-1]['id']}; 3 messages already read on the server were not "
                           "handed over (`kijito-pull show ID --persona ci-bot` reads one).\n")
    assert "baseline_skipped" not in text.stderr and "seeded=" not in text.stderr
    for n in range(2):
        sb.send(to="ci-bot", sender="loom", content=f"more {n}")
    scripted = cli("--once", "--json", "--persona", "ci-bot", "--consumer", "script")
    [event] = scripted.of_kind("baseline_skipped")
    assert event["skipped_read"] == 3 and event["seeded"] == sb.messages("ci-bot")[-1]["id"]


def test_every_diagnostic_kind_reads_as_a_sentence():
    from kijito_pull.core.events import EventFactory
    from kijito_pull.core.render import sentence

    f = EventFactory()
    said = {
        "replay_capped": sentence(f.signal("replay_capped", "river", capped_to=50, dropped=7, ids=[1, 2])),
        "state_corrupt": sentence(f.signal("state_corrupt", "river", reason="bad JSON", redelivered=1)),
        "seed_ahead": sentence(f.signal("seed_ahead", "river", seeded=100, current_max=5)),
        "alert": sentence(f.signal("alert", "river", reason="cursor pinned at 5: a gap")),
        "heartbeat": sentence(f.signal("heartbeat", "river")),
    }
    assert said["replay_capped"].startswith("river: first pull for this consumer: 7 older unread messages were "
                                            "not handed over (ids 1, 2), only the newest 50 (--max-replay)")
    assert said["state_corrupt"] == ("river: the cursor file could not be trusted (bad JSON); the 1 visible message "
                                     "is handed over again.")
    assert said["seed_ahead"].startswith("river: --seed-at 100 is above the newest message (5)")
    assert said["alert"] == "river: cursor pinned at 5: a gap."
    for text in said.values():
        assert not re.search(r"\b[a-z]+_[a-z_]+\b|=", text), text  # no field names, no key=value
