"""The relay variant of `install daemon` run for real: the rendered unit's own command (%h expanded, as
systemd starts it) against the sandbox and a real redis-server that requires a password, with a real
notify socket (tests/harnesses/daemon/test_relay_variant.py has the installer's side)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys

from kijito_pull.harnesses.daemon import supervision
from tests.clirunner import REPO
from tests.notifysocket import NotifySocket
from tests.waiting import until


def exec_start(text: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    return shlex.split(line.split("=", 1)[1])


def test_the_rendered_relay_runs_under_notify_with_its_password_from_a_file(tmp_path, sb, redis_server):
    """The unit's own command (%h expanded), as systemd would start it: READY=1, the watchdog, mail in the
    stream of a Redis that requires a password, and the password in no argv and no unit."""
    secret = "pw-" + "x7" * 8
    redis_server.client().config_set("requirepass", secret)
    home = tmp_path / "home"
    token = home / ".config" / "kijito-pull" / "token"
    token.parent.mkdir(parents=True)
    token.write_text(sb.token + "\n")
    token.chmod(0o600)
    password = tmp_path / "redis-password"
    password.write_text(secret + "\n")
    password.chmod(0o600)
    command = [sys.executable, "-m", "kijito_pull"]
    unit = supervision.render_systemd_relay(command, redis_server.url, ["river"], str(password))
    argv = [w.replace("%h", str(home)) for w in exec_start(unit)]
    assert argv == supervision.rendered_relay_argv(command, redis_server.url, ["river"], str(home), str(password))
    assert secret not in unit and secret not in " ".join(argv)
    sb.send("river", "argus", "first")
    sb.send("river", "argus", "second")
    notify = NotifySocket(str(tmp_path / "notify.sock"))
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "KIJITO_BASE": sb.url,
           "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "KIJITO_PULL_CONFIG": os.devnull,
           "NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "400000"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / "relay.err").open("w"))
    try:
        import redis

        client = redis.Redis(port=redis_server.port, password=secret, decode_responses=True)
        assert until(lambda: client.xlen("kijito:{river}:mail") == 2, timeout=30), (tmp_path / "relay.err").read_text()
        assert until(lambda: sum("WATCHDOG=1" in d for d in notify.read()) >= 2, timeout=10)
        assert sum("READY=1" in d for d in notify.read()) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(20)
        notify.close()
    assert code == 0
    assert secret not in (tmp_path / "relay.err").read_text()
