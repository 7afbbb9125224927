"""The composition root (kijito_pull/context.py): settings resolved once, flags over environment over
the config file, and the client, stores and engines every entry point gets from it."""

from __future__ import annotations

import pytest

from kijito_pull.context import Context, Flags, Settings
from kijito_pull.core.config import DEFAULT_API_BASE, DEFAULT_CONSUMER, ConfigError
from kijito_pull.core.paths import Paths

TOKEN = "tok-CONTEXT-5e0a7c31"


@pytest.fixture
def environ(tmp_path):
    conf = tmp_path / "config.toml"
    conf.write_text("")  # $KIJITO_PULL_CONFIG must name a file that exists
    return {"KIJITO_PULL_CONFIG": str(conf), "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}


def write_config(environ, text):
    with open(environ["KIJITO_PULL_CONFIG"], "w") as handle:
        handle.write(text)


def test_flags_win_over_environment_over_config_file(environ, tmp_path):
    write_config(environ, 'api_base = "https://file.example"\npersona = "from-file"\nconsumer = "file-c"\n'
                          'auth_header = "X-File"\n')
    assert Settings(environ).api_base == "https://file.example"
    assert Settings(environ).personas == ["from-file"]
    assert Settings(environ).consumer == "file-c"
    assert Settings(environ).auth_header == "X-File"
    env2 = {**environ, "KIJITO_BASE": "https://env.example", "KIJITO_PERSONA": "from-env"}
    assert Settings(env2).api_base == "https://env.example"
    assert Settings(env2).personas == ["from-env"]
    flags = Flags(api_base="https://flag.example", personas=("a", "b", "a"), consumer="flag-c", auth_header="X-Flag")
    s = Settings(env2, flags)
    assert (s.api_base, s.personas, s.consumer, s.auth_header) == (
        "https://flag.example", ["a", "b"], "flag-c", "X-Flag")


def test_defaults_when_nothing_is_said(environ):
    s = Settings(environ)
    assert s.api_base == DEFAULT_API_BASE
    assert s.consumer == DEFAULT_CONSUMER
    assert s.auth_header is None
    with pytest.raises(ConfigError, match="no persona"):
        _ = s.personas
    with pytest.raises(ConfigError, match="no Kijito token"):
        _ = s.token


def test_token_from_flag_file_then_environment(environ, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("tok-from-file\n")
    token_file.chmod(0o600)
    assert Settings({**environ, "KIJITOMON_TOKEN": TOKEN}).token == TOKEN
    assert Settings({**environ, "KIJITOMON_TOKEN": TOKEN}, Flags(token_file=str(token_file))).token == "tok-from-file"
    write_config(environ, f'token_file = "{token_file}"\n')
    assert Settings(environ).token == "tok-from-file"
    assert TOKEN not in repr(Settings({**environ, "KIJITOMON_TOKEN": TOKEN}).connection())


def test_each_setting_is_resolved_once(environ):
    """Once read, a setting does not change under the command's feet, even if the file does."""
    write_config(environ, 'persona = "first"\n')
    s = Settings(environ)
    assert s.personas == ["first"]
    write_config(environ, 'persona = "second"\nconsumer = "later"\n')
    assert s.personas == ["first"]
    assert s.consumer == DEFAULT_CONSUMER  # the file was read once, before the rewrite
    assert Settings(environ).personas == ["second"]


def test_bad_values_fail_when_first_asked_for(environ):
    s = Settings(environ, Flags(api_base="http://example.com", consumer="", personas=("no spaces",)))
    with pytest.raises(ConfigError, match="loopback"):
        _ = s.api_base
    with pytest.raises(ConfigError, match="consumer"):
        _ = s.consumer
    with pytest.raises(ConfigError, match="persona"):
        _ = s.personas
    write_config(environ, "api_base = 3\n")
    with pytest.raises(ConfigError, match="quoted string"):
        _ = Settings(environ).file


def test_context_builds_store_and_engine_at_the_cursor_files_paths_names(environ, sb):
    s = Settings({**environ, "KIJITOMON_TOKEN": sb.token, "KIJITO_BASE": sb.url}, Flags(consumer="scripts"))
    with Context(s) as ctx:
        engine = ctx.engine("river", max_replay=7)
        state_file, lock_file = Paths(s.environ).cursor_files(sb.url, "river", "scripts")
        assert (engine.store.path, engine.store.lock_path) == (state_file, lock_file)
        assert engine.store.identity == {"api_base": sb.url, "persona": "river", "consumer": "scripts"}
        assert (engine.persona, engine.consumer, engine.max_replay) == ("river", "scripts", 7)
        assert engine.client is ctx.client and ctx.engine("loom").client is ctx.client  # one client per command
        sb.send("river", "loom", "hello")
        with engine.open() as pull:
            assert [m.content for m in pull.pending] == ["hello"]


def test_context_closes_every_client_it_made(environ):
    made = []

    class FakeClient:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs, self.closed = args, kwargs, False
            made.append(self)

        def close(self):
            self.closed = True

    s = Settings({**environ, "KIJITOMON_TOKEN": TOKEN}, Flags(timeout=2.5))
    with Context(s, attempts=2, deadline=4.0, client_factory=FakeClient) as ctx:
        _ = ctx.client, ctx.new_client()
        assert ctx.client is made[0]
    assert [c.closed for c in made] == [True, True]
    assert made[0].args == (DEFAULT_API_BASE, TOKEN)
    assert made[0].kwargs == {"auth_header": None, "timeout": 2.5, "attempts": 2, "deadline": 4.0}
