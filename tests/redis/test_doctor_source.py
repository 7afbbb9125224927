"""`kijito-pull doctor` with a Redis source (kijito_pull/doctor/source_checks.py): a real redis-server (AOF
always, everysec, off; a password required; nothing listening), the real CLI, and a sandbox whose request
log shows the doctor sent Kijito nothing."""

from __future__ import annotations

import io
import json

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.environment import Environment
from kijito_pull.core.events import EventFactory
from kijito_pull.core.models import Message
from kijito_pull.core.sink import Sink
from kijito_pull.sources import redis_streams
from tests.redisserver import RedisServer, binary, free_port

PERSONA = "testbot"
SOURCE_IDS = ["source", "source.redis", "source.stream", "source.persistence", "source.group"]


class Refuses(Sink):
    parks = True

    def deliver(self, event, message):
        return False


@pytest.fixture
def home(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    (root / "config.toml").write_text("")  # $KIJITO_PULL_CONFIG must name a file that exists
    return {"HOME": str(root), "PATH": "/nonexistent", "KIJITO_PULL_CONFIG": str(root / "config.toml"),
            "KIJITO_PULL_STATE_DIR": str(root / "state"), "XDG_CACHE_HOME": str(root / ".cache")}


def doctor(environ, *argv) -> tuple[int, dict[str, dict], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["doctor", "--json", *argv], Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                                         environ=environ, cwd=environ["HOME"]))
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    return code, {r["check"]: r for r in rows}, [r["check"] for r in rows]


def fill(url: str, ids=(1, 2, 3)) -> None:
    appender = redis_streams.Appender(redis_streams.connect(url), "t")
    for i in ids:
        appender.append(PERSONA, Message(i, "river", f"m{i}", "2026-12-02T10:00:00Z", False))


def group(url: str, name: str, **options) -> redis_streams.RedisSource:
    return redis_streams.RedisSource(redis_streams.connect(url), EventFactory(), persona=PERSONA, consumer=name,
                                     **options)


def test_a_healthy_source_is_checked_without_a_single_kijito_request(redis_server, home, sandbox):
    fill(redis_server.url)
    for _ in range(2):  # message 1 parked in group ci; 2 and 3 stay pending with their reader
        pull_through(group(redis_server.url, "ci", max_attempts=2), EventFactory(), Refuses())
    sandbox.clear_requests()
    environ = {**home, "KIJITOMON_TOKEN": sandbox.token, "KIJITO_BASE": sandbox.url}
    code, got, order = doctor(environ, "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
    assert sandbox.requests == []  # consumers of a Redis source ask Kijito nothing; neither does their doctor
    assert code == 0, got
    assert order[order.index("persona") + 1:order.index("persona") + 6] == SOURCE_IDS
    assert got["reachability"]["verdict"] == "ok" and "the source is Redis" in got["reachability"]["detail"]
    assert got["source.redis"]["verdict"] == "ok" and "answered PING" in got["source.redis"]["detail"]
    assert got["source.stream"]["verdict"] == "ok"
    assert "holds 3 entries; group ci exists" in got["source.stream"]["detail"]
    assert got["source.persistence"]["verdict"] == "ok"
    assert "appendfsync always" in got["source.persistence"]["detail"]
    assert got["source.group"]["verdict"] == "warn", got["source.group"]
    assert ("group ci: lag 0 (entries not yet read), 2 pending (given back, for the next pull: 2), 1 parked: "
            "message 1 was refused too often") in got["source.group"]["detail"]
    assert f"kijito-pull parked --source {redis_server.url} --persona {PERSONA} --consumer ci" \
        in got["source.group"]["fix"]


def test_a_group_not_created_yet_is_fine_and_a_missing_stream_is_a_warning(redis_server, home):
    code, got, _ = doctor(home, "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
    assert code == 0
    assert got["token"]["verdict"] == "ok" and "not needed" in got["token"]["detail"]  # no token: none needed
    assert got["source.stream"]["verdict"] == "warn" and "nothing was relayed" in got["source.stream"]["detail"]
    assert "kijito-pull relay --redis" in got["source.stream"]["fix"]
    fill(redis_server.url)
    group(redis_server.url, "audit").ensure_group()
    code, got, _ = doctor(home, "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
    assert code == 0
    assert got["source.stream"]["verdict"] == "ok"
    assert "group ci does not exist yet: the first read creates it" in got["source.stream"]["detail"]
    assert "(groups now: audit)" in got["source.stream"]["detail"]
    assert got["source.group"]["verdict"] == "ok" and "does not exist yet" in got["source.group"]["detail"]
    # the doctor created nothing: the group is still missing
    assert [g["name"] for g in redis_server.client().xinfo_groups("kijito:{testbot}:mail")] == ["audit"]


def test_lag_and_pending_are_counted(redis_server, home):
    fill(redis_server.url)
    group(redis_server.url, "ci").ensure_group()

    class Takes(Sink):
        def deliver(self, event, message):
            return True

    pull_through(group(redis_server.url, "ci"), EventFactory(), Takes())
    fill(redis_server.url, (4, 5))
    code, got, _ = doctor(home, "--persona", PERSONA, "--source", redis_server.url, "--consumer", "ci")
    assert got["source.group"]["verdict"] == "ok"
    assert got["source.group"]["detail"] == "group ci: lag 2 (entries not yet read), 0 pending, 0 parked"


def test_an_unreachable_redis_fails_with_the_fix(home):
    url = f"redis://127.0.0.1:{free_port()}/0"
    code, got, order = doctor(home, "--persona", PERSONA, "--source", url)
    assert code == 1
    assert got["source.redis"]["verdict"] == "fail"
    assert "did not answer PING" in got["source.redis"]["detail"] and "redis-cli" in got["source.redis"]["fix"]
    for check in SOURCE_IDS[2:]:
        assert got[check]["verdict"] == "warn" and "not checked" in got[check]["detail"]


def test_auth_refused_and_auth_missing_fail_and_never_show_the_password(redis_server, home, tmp_path):
    secret = "pw-" + "q9" * 8
    redis_server.client().config_set("requirepass", secret)
    code, got, _ = doctor(home, "--persona", PERSONA, "--source", redis_server.url)
    assert code == 1 and got["source.redis"]["verdict"] == "fail"
    assert "requires a password" in got["source.redis"]["detail"] or "refused" in got["source.redis"]["detail"]
    wrong = {**home, "KIJITO_PULL_REDIS_PASSWORD": "not-" + secret}
    code, got, _ = doctor(wrong, "--persona", PERSONA, "--source", redis_server.url)
    assert code == 1 and "refused the password" in got["source.redis"]["detail"]
    assert "KIJITO_PULL_REDIS_PASSWORD" in got["source.redis"]["fix"]
    assert secret not in json.dumps(got)
    right = tmp_path / "pw"
    right.write_text(secret + "\n")
    right.chmod(0o600)
    code, got, _ = doctor(home, "--persona", PERSONA, "--source", redis_server.url, "--redis-password-file",
                          str(right))
    assert code == 0 and got["source.redis"]["verdict"] == "ok", got["source.redis"]
    assert secret not in json.dumps(got)


@pytest.mark.parametrize("appendfsync, appendonly, verdict, said", [
    ("everysec", True, "ok", "appendfsync everysec: a crash can lose about the last second"),
    ("always", False, "warn", "AOF is off"),
    ("no", True, "warn", "appendfsync no"),
])
def test_persistence_says_which_setting_and_how_to_fix_it(tmp_path, home, appendfsync, appendonly, verdict, said):
    server = RedisServer(binary(), tmp_path / "redis", appendfsync).start(appendonly=appendonly)
    try:
        code, got, _ = doctor(home, "--persona", PERSONA, "--source", server.url)
    finally:
        server.stop()
    found = got["source.persistence"]
    assert code == 0 and found["verdict"] == verdict and said in found["detail"], found
    if verdict == "warn":
        assert "CONFIG SET appendonly yes" in found["fix"] and "CONFIG SET appendfsync always" in found["fix"]


def test_the_environment_and_the_config_file_name_the_source_too(redis_server, home):
    code, got, _ = doctor({**home, "KIJITO_PULL_SOURCE": redis_server.url}, "--persona", PERSONA)
    assert "from $KIJITO_PULL_SOURCE" in got["source"]["detail"] and got["source.redis"]["verdict"] == "ok"
    with open(home["KIJITO_PULL_CONFIG"], "w") as f:
        f.write(f'source = "{redis_server.url}"\nconsumer = "workers"\n')
    code, got, _ = doctor(home, "--persona", PERSONA)
    assert "from the config file's source" in got["source"]["detail"]
    assert "consumer group workers" in got["source"]["detail"]


def test_a_source_that_is_not_redis_fails(home):
    code, got, _ = doctor(home, "--persona", PERSONA, "--source", "http://127.0.0.1:1/0")
    assert code == 1 and got["source"]["verdict"] == "fail" and "redis://" in got["source"]["fix"]
    code, got, _ = doctor(home, "--persona", PERSONA, "--source", "redis://:pw@127.0.0.1:1/0")
    assert code == 1 and "a password in the Redis URL" in got["source"]["detail"] and "pw@" not in json.dumps(got)


def test_a_user_the_server_lets_read_less_gets_warnings_not_a_traceback(redis_server, home):
    """An ACL user that may PING and look at the stream but not XINFO/XPENDING/XRANGE: each check that
    needs those says so and names the fix; none breaks the doctor."""
    fill(redis_server.url)
    secret = "pw-" + "r7" * 8
    redis_server.client().execute_command("ACL", "SETUSER", "narrow", "on", f">{secret}", "~*", "&*", "+ping",
                                          "+info", "+config|get", "+exists", "+xlen", "+client", "+hello", "+auth")
    url = redis_server.url.replace("redis://", "redis://narrow@")
    code, got, _ = doctor({**home, "KIJITO_PULL_REDIS_PASSWORD": secret}, "--persona", PERSONA, "--source", url,
                          "--consumer", "ci")
    assert got["source.redis"]["verdict"] == "ok", got["source.redis"]
    assert got["source.stream"]["verdict"] == "warn" and "could not be read" in got["source.stream"]["detail"]
    assert "ACL" in got["source.stream"]["fix"]
    assert got["source.group"]["verdict"] == "warn" and "ACL" in got["source.group"]["fix"]
    assert secret not in json.dumps(got)
