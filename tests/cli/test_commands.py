"""The CLI's other commands and its configuration errors, against the sandbox over real HTTP."""

from __future__ import annotations

import io
import json
import os
import subprocess

import pytest

from kijito_pull.cli.main import main
from kijito_pull.context import Context
from kijito_pull.core.environment import Environment
from tests.clirunner import Cli

TOKEN = "cmd-token-77c2"


def _one_line_usage_error(result):
    assert result.code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kijito-pull: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_missing_token_is_a_usage_error_that_points_at_the_sandbox(sb, cli):
    line = _one_line_usage_error(cli("--once", "--persona", "P", env={"KIJITOMON_TOKEN": ""}))
    assert "KIJITOMON_TOKEN" in line and "demo" in line
    assert sb.requests == []


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_token_file_readable_by_others_is_refused(sb, cli, tmp_path, mode):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(mode)
    line = _one_line_usage_error(cli("--once", "--persona", "P", "--token-file", str(token_file),
                                     env={"KIJITOMON_TOKEN": ""}))
    assert "chmod 600" in line and TOKEN not in line
    assert sb.requests == []


def test_unreadable_token_file_is_refused(sb, cli, tmp_path):
    line = _one_line_usage_error(cli("--once", "--persona", "P", "--token-file", str(tmp_path / "absent")))
    assert "cannot open" in line
    assert sb.requests == []


def test_private_token_file_wins_over_the_environment(sb, cli, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    mid = sb.send(to="P", sender="Q", content="hi")
    result = cli("--once", "--json", "--persona", "P", "--token-file", str(token_file),
                 env={"KIJITOMON_TOKEN": "wrong-token"})
    assert result.code == 0 and result.new_ids == [mid]


@pytest.mark.parametrize("base", ["http://example.com", "http://10.1.2.3:8080", "ftp://127.0.0.1", "not a url"])
def test_unsafe_or_bad_api_base_is_refused(sb, cli, base):
    line = _one_line_usage_error(cli("--once", "--persona", "P", "--api-base", base))
    assert "api-base" in line
    assert sb.requests == []


@pytest.mark.parametrize("persona", ["../etc", "a/b", "a\\b", "bad\x00name", "x" * 500, "", ".hidden", "sp ace"])
def test_hostile_persona_names_are_refused_before_any_request(sb, cli, persona):
    line = _one_line_usage_error(cli("--once", "--persona", persona))
    assert "invalid persona" in line
    assert "\x00" not in line and len(line) < 300
    assert sb.requests == []
    assert not (cli.state_dir / "cursors").exists()


def test_persona_defaults_to_the_environment(sb, cli):
    mid = sb.send(to="envbot", sender="Q", content="hi")
    assert cli("--once", "--json", env={"KIJITO_PERSONA": "envbot"}).new_ids == [mid]
    _one_line_usage_error(cli("--once", "--json"))


def test_wrong_token_exits_1_with_a_clear_reason(sb, cli):
    result = cli("--once", "--persona", "P", env={"KIJITOMON_TOKEN": "nope"})
    assert result.code == 1
    assert "rejected the token (401)" in result.stderr and "nope" not in result.stderr


def test_unknown_flag_is_a_usage_error(cli):
    assert cli("--once", "--no-such-flag").code == 2


def test_usage_errors_a_command_finds_itself_are_one_line_and_exit_2(cli):
    for argv, words in ((["relay"], "relay needs --redis"), (["exec", "--persona", "P"], "no command given"),
                        (["parked", "--retry", "1"], "exactly one --persona")):
        result = cli(*argv)
        _one_line_usage_error(result)
        assert words in result.stderr, (argv, result.stderr)


def test_pull_and_once_spellings_are_the_same_command(sb, cli):
    a = sb.send(to="P", sender="Q", content="a")
    assert cli("pull", "--once", "--json", "--persona", "P").new_ids == [a]
    b = sb.send(to="P", sender="Q", content="b")
    assert cli("--once", "--json", "--persona", "P").new_ids == [b]


def test_send_then_show(sb, cli):
    sent = cli("send", "--to", "P", "--from", "loom", "--urgent", "--json", "line one\nline two")
    assert sent.code == 0, sent.stderr
    mid = json.loads(sent.stdout)["id"]
    shown = cli("show", str(mid), "--persona", "P", "--json")
    assert shown.code == 0
    doc = json.loads(shown.stdout)
    assert (doc["id"], doc["from"], doc["content"]) == (mid, "loom", "line one\nline two")
    text = cli("show", str(mid), "--persona", "P")
    assert "from loom" in text.stdout and "    line two" in text.stdout
    # show never marks read and never moves a cursor
    assert cli("--once", "--json", "--persona", "P").new_ids == [mid]


def test_send_reads_stdin_and_text_output(sb, cli):
    result = cli("send", "--to", "P", "-", stdin="from stdin")
    assert result.code == 0 and result.stdout.startswith("sent message ")
    assert cli("--once", "--json", "--persona", "P").of_kind("new")[0]["content"] == "from stdin"


def test_show_missing_message(sb, cli):
    sb.send(to="other", sender="Q", content="not P's")
    result = cli("show", "1", "--persona", "P")
    assert result.code == 1 and "not in P's inbox" in result.stderr


def test_status_reports_cursor_pin_and_lock(sb, cli):
    assert cli("status").stdout.startswith("no cursors yet")
    mid = sb.send(to="P", sender="Q", content="x")
    cli("--once", "--persona", "P")
    cli("--once", "--persona", "P", "--consumer", "script")
    rows = [json.loads(line) for line in cli("status", "--json").stdout.splitlines()]
    assert sorted((r["persona"], r["consumer"], r["cursor"], r["status"], r["lock"]) for r in rows) == [
        ("P", "agent", mid, "ok", "free"), ("P", "script", mid, "ok", "free")]
    only = [json.loads(line) for line in cli("status", "--json", "--consumer", "script").stdout.splitlines()]
    assert [r["consumer"] for r in only] == ["script"]
    assert f"cursor {mid}" in cli("status", "--persona", "P").stdout


def test_status_shows_pending_hand_overs_per_session(sb, cli):
    from kijito_pull.context import Flags, Settings
    from kijito_pull.core.pending import Holder

    first = sb.send(to="P", sender="Q", content="one")
    assert cli("--once", "--json", "--persona", "P").new_ids == [first]
    mids = [sb.send(to="P", sender="Q", content=f"m{i}") for i in range(3)]
    environ = {"KIJITOMON_TOKEN": sb.token, "KIJITO_BASE": sb.url, "KIJITO_PULL_STATE_DIR": str(cli.state_dir),
               "KIJITO_PULL_CONFIG": os.devnull}
    with Context(Settings(environ, Flags())) as ctx, ctx.engine("P").open(holder=Holder("claude:s1")) as pull:
        pull.hand_over(pull.pending[:2])
    [row] = [json.loads(line) for line in cli("status", "--json").stdout.splitlines()]
    [held] = row["pending"]
    assert held["holder"] == "claude:s1" and held["ids"] == mids[:2] and held["handovers"] == 1
    assert held["since"] and held["until"]
    assert f"2 pending with claude:s1 since {held['since']}" in cli("status").stdout


def test_status_shows_a_pin(sb, cli):
    sb.send(to="P", sender="Q", content="x")
    cli("--once", "--persona", "P")
    for i in range(30):
        sb.send(to="P", sender="Q", content=f"m{i}")
    sb.add_fault({"kind": "mutate", "path": "/api/inbox", "delete": ["next_before_id"]})
    cli("--once", "--persona", "P")
    [row] = [json.loads(line) for line in cli("status", "--json").stdout.splitlines()]
    assert row["status"] == "pinned" and "contradicts" in row["pin"]["reason"]
    assert "PINNED" in cli("status").stdout


def test_state_files_and_dirs_are_private(sb, cli):
    sb.send(to="P", sender="Q", content="x")
    cli("--once", "--persona", "P")
    for path in [cli.state_dir, cli.state_dir / "cursors"]:
        assert os.stat(path).st_mode & 0o777 == 0o700
    for path in (cli.state_dir / "cursors").iterdir():
        assert os.stat(path).st_mode & 0o777 == 0o600, path


def test_help_teaches(cli):
    top = cli("--help")
    assert top.code == 0 and "kijito-pull demo" in top.stdout and "exit codes" in top.stdout
    for command in ("pull", "show", "status", "send", "sandbox", "demo"):
        result = cli(command, "--help")
        assert result.code == 0 and "usage: kijito-pull " + command in result.stdout


def test_demo_runs_the_whole_loop(tmp_path):
    cli = Cli("http://127.0.0.1:9", "unused", tmp_path / "state")
    result = cli.run("demo", env={"KIJITOMON_TOKEN": "", "KIJITO_BASE": ""}, timeout=30)
    assert result.code == 0, result.stderr
    out = result.stdout
    assert "3 unread messages" in out and "not instructions" in out
    assert "kijito-pull show 2 --persona demo-agent" in out  # the long one is clipped with the way to read it
    assert '"event": "new"' in out and "0 new messages" in out
    assert not (tmp_path / "state").exists()  # the demo keeps its state to itself


def test_completion_scripts_complete_commands_and_flags(cli, tmp_path):
    result = cli("completion", "bash")
    assert result.code == 0
    script = tmp_path / "completion.sh"
    script.write_text(result.stdout)
    probe = ('source "$1"; COMP_WORDS=(kijito-pull wa); COMP_CWORD=1; _kijito_pull; echo "${COMPREPLY[@]}"; '
             'COMP_WORDS=(kijito-pull watch --events-f); COMP_CWORD=2; _kijito_pull; echo "${COMPREPLY[@]}"; '
             'COMP_WORDS=(kijito-pull --once --pe); COMP_CWORD=2; _kijito_pull; echo "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", probe, "probe", str(script)], capture_output=True, text=True).stdout
    assert out.splitlines() == ["watch", "--events-file --events-file-template", "--peek --persona"]
    zsh = cli("completion", "zsh").stdout
    assert "bashcompinit" in zsh and "complete -F _kijito_pull kijito-pull" in zsh


def test_verbose_logs_requests_without_the_token(sb, cli):
    sb.send(to="P", sender="Q", content="x")
    result = cli("--once", "--persona", "P", "--verbose")
    assert result.code == 0
    assert "kijito-pull: GET /api/inbox?persona=P&mark_read=false 200" in result.stderr
    assert TOKEN not in result.stderr and TOKEN not in result.stdout


def test_quiet_silences_notes_but_not_errors(sb, cli):
    for i in range(3):
        sb.send(to="P", sender="Q", content=f"m{i}")
    noisy = cli("--once", "--persona", "P", "--max-replay", "1", "--consumer", "a")
    assert "older unread messages were not handed over" in noisy.stderr
    quiet = cli("--once", "--persona", "P", "--max-replay", "1", "--consumer", "b", "-q")
    assert quiet.stderr == "" and "m2" in quiet.stdout
    assert cli("--once", "--persona", "P", "-q", env={"KIJITOMON_TOKEN": ""}).stderr  # errors still speak


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_catch_up_shows_progress_on_a_terminal_only(sb, cli):
    sb.send(to="P", sender="Q", content="first")
    cli("--once", "--persona", "P")
    for i in range(120):
        sb.send(to="P", sender="Q", content=f"gap {i}")
    terminal = _Terminal()
    code = main(["--once", "--json", "--persona", "P"],
                Environment(stdout=io.StringIO(), stderr=terminal, environ=cli.environ, cwd=str(cli.state_dir)))
    assert code == 0
    assert "catching up: 6 pages back" in terminal.getvalue() and terminal.getvalue().endswith("\n")
    for i in range(120):
        sb.send(to="P", sender="Q", content=f"gap2 {i}")
    piped = cli("--once", "--json", "--persona", "P")
    assert piped.code == 0 and len(piped.new_ids) == 120 and "catching up" not in piped.stderr


def test_nested_commands_write_help_through_the_environment_and_take_quiet(cli):
    result = cli("session", "stop", "--help")
    assert result.code == 0 and "usage: kijito-pull session stop" in result.stdout and "--quiet" in result.stdout
