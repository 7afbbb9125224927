"""What a new user trips over first (issue 23): the messages of `pull`, `send`, `completion` and a
Ctrl-C, run in-process and as real subprocesses against the sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.clirunner import REPO
from tests.waiting import until

TOKEN = "tok-FIRST-STEPS-8e21"


def test_a_persona_known_only_in_another_case_is_named_by_the_pull(sb, cli):
    sb.add_persona("river", memory_count=1)
    sb.send(to="river", sender="loom", content="for river")
    wrong = cli("--once", "--persona", "River")
    assert wrong.code == 0
    assert wrong.stdout == "No new mail for River.\n"
    assert ("kijito-pull: warning: River is not in the account's directory, but river is: inbox names are "
            "case-sensitive, so mail for river never reaches River; use --persona river") in wrong.stderr
    again = cli("--once", "--json", "--persona", "River")  # still nothing delivered: still said
    assert "but river is" in again.stderr
    right = cli("--once", "--json", "--persona", "river")
    assert [e["content"] for e in right.of_kind("new")] == ["for river"] and right.stderr == ""


def test_the_directory_is_asked_only_while_a_cursor_has_delivered_nothing(sb, cli):
    sb.add_persona("river", memory_count=1)
    sb.send(to="river", sender="loom", content="one")
    assert cli("--once", "--persona", "river").code == 0  # delivers: no directory read needed
    assert cli("--once", "--persona", "river").stdout == "No new mail for river.\n"
    assert [r for r in sb.requests if r["path"] == "/api/personas"] == []
    assert "nobody is not in the account's directory" in cli("--once", "--persona", "nobody").stderr
    assert len([r for r in sb.requests if r["path"] == "/api/personas"]) == 1


def test_send_quiet_prints_nothing_but_json_still_answers(sb, cli):
    quiet = cli("send", "-q", "--to", "river", "--from", "loom", "hello")
    assert (quiet.code, quiet.stdout, quiet.stderr) == (0, "", "")
    loud = cli("send", "--to", "river", "--from", "loom", "again")
    assert loud.stdout.startswith("sent message ") and loud.stdout.endswith(" to river\n")
    data = cli("send", "-q", "--json", "--to", "river", "--from", "loom", "third")
    assert data.events[0]["to"] == "river"
    assert [e["content"] for e in cli("--once", "--json", "--persona", "river").of_kind("new")] == [
        "hello", "again", "third"]


def test_verbose_is_offered_only_by_commands_that_send_requests(cli):
    completion = cli("completion", "-v", "bash")
    assert completion.code == 2 and "unrecognized arguments: -v" in completion.stderr
    assert "HTTP" not in cli("completion", "--help").stdout
    assert "HTTP" not in cli("status", "--help").stdout
    assert "-q, --quiet" in cli("completion", "--help").stdout
    assert "also log each HTTP request" in cli("pull", "--help").stdout
    assert "also log each HTTP request" in cli("send", "--help").stdout


def test_the_self_test_counts_one_persona_in_the_singular(sb, cli):
    one = cli("watch", "--persona", "P", "--self-test")
    assert one.code == 0 and f"self-test passed (1 persona, {sb.url})" in one.stderr
    two = cli("watch", "--persona", "P", "--persona", "Q", "--self-test")
    assert f"self-test passed (2 personas, {sb.url})" in two.stderr


# A Ctrl-C in the middle of the start-up imports, made exact: an import hook sends the process SIGINT
# when the named module is about to be imported (main's own imports, then a command's, in build_parser).
_INTERRUPT_AT = """\
import os, signal, sys
sys.argv = ["/opt/bin/kijito-pull", *sys.argv[2:]]
class Trip:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            os.kill(os.getpid(), signal.{signal})
        return None
sys.meta_path.insert(0, Trip())
from kijito_pull.cli.main import console
sys.exit(console())
"""


@pytest.mark.parametrize("module,argv", [("kijito_pull.core.config", ["status"]),
                                         ("kijito_pull.cli.status_cmd", ["status"]),
                                         ("requests", ["--once", "--persona", "river"])])
def test_ctrl_c_during_start_up_is_one_line_and_130_not_a_traceback(cli, module, argv):
    environ = {**cli.environ, "PYTHONPATH": str(REPO)}
    ran = subprocess.run([sys.executable, "-c", _INTERRUPT_AT.format(module=module, signal="SIGINT"), "-", *argv],
                         env=environ, capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stderr, ran.stdout) == (130, "kijito-pull: interrupted\n", "")


@pytest.mark.parametrize("module,argv", [("kijito_pull.cli.relay_cmd", ["relay", "--redis", "redis://127.0.0.1:1/0"]),
                                         ("kijito_pull.sources.redis_streams", ["relay", "--redis", "redis://x/0"]),
                                         ("kijito_pull.watch.loop", ["watch", "--persona", "river"]),
                                         ("kijito_pull.sandbox", ["sandbox"])])
def test_sigterm_during_the_start_up_of_a_long_running_command_is_a_clean_stop(cli, module, argv):
    """A supervisor's SIGTERM may come before the command's own handler is in: still one line and 0."""
    environ = {**cli.environ, "PYTHONPATH": str(REPO)}
    ran = subprocess.run([sys.executable, "-c", _INTERRUPT_AT.format(module=module, signal="SIGTERM"), "-", *argv],
                         env=environ, capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stderr, ran.stdout) == (0, "kijito-pull: stopped before it started\n", "")


@pytest.mark.parametrize("persona", ["river", "watch"])
def test_sigterm_during_the_start_up_of_a_one_shot_command_still_ends_it(cli, persona):
    """`--once` is not a long-running command: SIGTERM keeps its default meaning (the process ends by it),
    also for a persona that is named like one (only the command word counts)."""
    environ = {**cli.environ, "PYTHONPATH": str(REPO)}
    code = _INTERRUPT_AT.format(module="requests", signal="SIGTERM")
    ran = subprocess.run([sys.executable, "-c", code, "-", "--once", "--persona", persona], env=environ,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == -signal.SIGTERM, ran.stderr


def test_once_the_command_runs_ctrl_c_is_a_keyboard_interrupt_again(cli):
    """The start-up handler is only for start-up: a running command unwinds through its own handlers."""
    script = ("import signal, sys\nsys.argv = ['/opt/bin/kijito-pull', 'status']\n"
              "import kijito_pull.cli.main as m\n"
              "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
              "m.main(['status'])\n"
              "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n")
    ran = subprocess.run([sys.executable, "-c", script], env={**cli.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=60)
    lines = ran.stdout.splitlines()
    assert (lines[0], lines[-1]) == ("False", "True"), ran.stderr


def test_once_says_when_urgent_mail_is_among_what_it_shows(sb, cli):
    sb.send(to="river", sender="loom", content="fyi")
    sb.send(to="river", sender="loom", content="build is red", urgent=True)
    shown = cli("--once", "--persona", "river")
    assert shown.stdout.splitlines()[1] == ("Urgent mail is among these messages: a sender marked one of the 2 "
                                            "urgent (the server does not say which).")
    sb.send(to="river", sender="loom", content="calm again")  # the old urgent one still counts as unread
    calm = cli("--once", "--persona", "river")
    assert "urgent" not in calm.stdout.lower() and "calm again" in calm.stdout
    assert cli("--once", "--persona", "river").stdout == "No new mail for river.\n"


def test_status_names_the_process_that_holds_a_lock_its_locker_left_to_a_child(sb, cli, tmp_path):
    """An flock belongs to the open file: a child that inherited it holds it after the pid written in the
    lock file exited. status names the live holder, not the dead pid."""
    sb.send(to="P", sender="Q", content="x")
    assert cli("--once", "--persona", "P").code == 0
    [state_file] = cli.state_files()
    lock = state_file.with_suffix(".lock")
    locker = ("import fcntl, os, subprocess, sys\n"
              "fd = os.open(sys.argv[1], os.O_RDWR)\n"
              "fcntl.flock(fd, fcntl.LOCK_EX)\n"
              "os.ftruncate(fd, 0); os.write(fd, str(os.getpid()).encode())\n"
              "child = subprocess.Popen(['sleep', '60'], pass_fds=(fd,), stdin=subprocess.DEVNULL,\n"
              "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
              "print(os.getpid(), child.pid, flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", locker, str(lock)], stdout=subprocess.PIPE, text=True)
    parent, child = map(int, proc.stdout.readline().split())
    proc.wait(10)
    try:
        [row] = [json.loads(line) for line in cli("status", "--json").stdout.splitlines()]
        assert row["lock"] == {"held_by_pid": child, "holder": f"pid {child} (inherited; pid {parent} exited)"}
        assert f"lock held by pid {child} (inherited; pid {parent} exited)" in cli("status").stdout
    finally:
        os.kill(child, signal.SIGKILL)
    assert until(lambda: json.loads(cli("status", "--json").stdout)["lock"] == "free")
