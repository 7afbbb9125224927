"""Unit tests of configuration (kijito_pull/core/config.py) and file locations (kijito_pull/core/paths.py).

Everything here is decided before a request is sent: where the token may go, which token is used,
which names are safe to put in a file name, and where cursors live.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

from kijito_pull.core import config, paths
from kijito_pull.core.config import (
    DEFAULT_API_BASE,
    ConfigError,
    normalize_api_base,
    read_token_file,
    resolve_api_base,
    resolve_token,
    validate_auth_header,
    validate_consumer,
    validate_persona,
)

TOKEN = "tok-CONFIG-4b9d2e71"


# -- API base ---------------------------------------------------------------------------------------

def test_default_api_base():
    assert DEFAULT_API_BASE == "https://api.kijito.ai"
    assert resolve_api_base(None, {}) == DEFAULT_API_BASE
    assert resolve_api_base(None, {}, None) == DEFAULT_API_BASE


def test_resolution_order_flag_env_file_default():
    env = {"KIJITO_BASE": "https://env.example"}
    assert resolve_api_base("https://flag.example", env, "https://file.example") == "https://flag.example"
    assert resolve_api_base(None, env, "https://file.example") == "https://env.example"
    assert resolve_api_base(None, {}, "https://file.example") == "https://file.example"
    assert resolve_api_base("", {"KIJITO_BASE": "  "}, "https://file.example") == "https://file.example"
    assert resolve_api_base(None, {"KIJITO_BASE": ""}, None) == DEFAULT_API_BASE


def test_the_chosen_source_is_validated_and_named_in_the_error():
    with pytest.raises(ConfigError, match="--api-base"):
        resolve_api_base("http://example.com", {"KIJITO_BASE": "https://ok.example"})
    with pytest.raises(ConfigError, match="KIJITO_BASE"):
        resolve_api_base(None, {"KIJITO_BASE": "http://example.com"}, "https://ok.example")
    with pytest.raises(ConfigError, match="config file"):
        resolve_api_base(None, {}, "http://example.com")


def test_a_higher_source_shadows_a_broken_lower_one():
    assert resolve_api_base("https://ok.example", {"KIJITO_BASE": "nonsense"}, "ftp://x") == "https://ok.example"


@pytest.mark.parametrize("raw, expected", [
    ("https://api.kijito.ai/", "https://api.kijito.ai"),
    ("  https://api.kijito.ai  ", "https://api.kijito.ai"),
    ("https://api.kijito.ai///", "https://api.kijito.ai"),
    ("https://host.example:8443/kijito/", "https://host.example:8443/kijito"),
    ("HTTPS://api.kijito.ai", "https://api.kijito.ai"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
])
def test_normalisation(raw, expected):
    assert normalize_api_base(raw, "--api-base") == expected


@pytest.mark.parametrize("url", [
    "http://127.0.0.1", "http://127.0.0.1:8080", "http://127.5.5.5:9", "http://[::1]:8080", "http://[::1]",
    "http://localhost", "http://localhost:3000/api", "http://LOCALHOST:1",
])
def test_plain_http_is_allowed_to_loopback(url):
    assert normalize_api_base(url, "--api-base").startswith("http://")


@pytest.mark.parametrize("url", [
    "http://10.0.0.1", "http://example.com", "http://api.kijito.ai", "http://192.168.1.5:8080",
    "http://0.0.0.0:8080", "http://[::2]:8080", "http://localhost.evil.example", "http://127.0.0.1.nip.io",
    "http://128.0.0.1",
])
def test_plain_http_is_refused_elsewhere(url):
    with pytest.raises(ConfigError, match="https://"):
        normalize_api_base(url, "--api-base")


@pytest.mark.parametrize("url", ["https://10.0.0.1", "https://example.com", "https://[2001:db8::1]:443"])
def test_https_is_allowed_anywhere(url):
    assert normalize_api_base(url, "--api-base") == url


@pytest.mark.parametrize("url", [
    "https://api.kijito.ai/?persona=x", "https://api.kijito.ai/#frag",
    f"https://user:{TOKEN}@api.kijito.ai", "https://user@api.kijito.ai",
    "http://127.0.0.1@example.com", f"http://user:{TOKEN}@127.0.0.1:8080",
])
def test_no_query_fragment_or_credentials(url):
    with pytest.raises(ConfigError) as info:
        normalize_api_base(url, "--api-base")
    assert TOKEN not in str(info.value)


@pytest.mark.parametrize("url", [
    "ftp://api.kijito.ai", "api.kijito.ai", "//api.kijito.ai", "https://", "", "   ", "file:///etc/passwd",
    "https://api.kijito.ai:notaport", "https://api.kijito.ai:99999",
])
def test_not_an_http_url(url):
    with pytest.raises(ConfigError):
        normalize_api_base(url, "--api-base")


def test_errors_are_one_line():
    for bad in ("http://example.com", "ftp://x", "https://a.example/?q=1", "https://a.example:x"):
        with pytest.raises(ConfigError) as info:
            normalize_api_base(bad, "--api-base")
        assert "\n" not in str(info.value)


# -- token -----------------------------------------------------------------------------------------

def token_file(tmp_path: Path, text: str = TOKEN, mode: int = 0o600, name: str = "token") -> Path:
    p = tmp_path / name
    p.write_text(text)
    os.chmod(p, mode)
    return p


def test_env_token_is_used_and_trimmed():
    assert resolve_token(None, {"KIJITOMON_TOKEN": f"  {TOKEN}\n"}) == TOKEN
    assert config.TOKEN_ENV == "KIJITOMON_TOKEN"


def test_token_file_wins_over_env(tmp_path):
    p = token_file(tmp_path, "from-file")
    assert resolve_token(str(p), {"KIJITOMON_TOKEN": "from-env"}) == "from-file"


def test_token_file_is_trimmed(tmp_path):
    p = token_file(tmp_path, f"\n\t {TOKEN} \r\n\n")
    assert read_token_file(str(p)) == TOKEN


def test_token_file_path_expands_user(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    token_file(tmp_path)
    assert read_token_file("~/token") == TOKEN


@pytest.mark.parametrize("value", ["", "   ", "\n\t\n"], ids=repr)
def test_empty_env_token_is_an_error_with_the_sandbox_hint(value):
    with pytest.raises(ConfigError) as info:
        resolve_token(None, {"KIJITOMON_TOKEN": value})
    assert "KIJITOMON_TOKEN" in str(info.value) and "--token-file" in str(info.value)
    assert "sandbox" in str(info.value) or "demo" in str(info.value)


def test_missing_token_is_an_error():
    with pytest.raises(ConfigError, match="no Kijito token"):
        resolve_token(None, {})


@pytest.mark.parametrize("text", ["", "   \n", "\n\n\t"], ids=repr)
def test_empty_token_file_is_an_error_not_a_fallback_to_env(tmp_path, text):
    p = token_file(tmp_path, text)
    with pytest.raises(ConfigError, match="empty"):
        resolve_token(str(p), {"KIJITOMON_TOKEN": "from-env"})


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o666, 0o610, 0o601, 0o620, 0o602])
def test_group_or_world_accessible_token_file_is_refused_with_the_chmod_hint(tmp_path, mode):
    p = token_file(tmp_path, mode=mode)
    with pytest.raises(ConfigError) as info:
        resolve_token(str(p), {})
    message = str(info.value)
    assert f"chmod 600 {p}" in message
    assert f"{mode:04o}" in message
    assert TOKEN not in message


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_private_token_file_is_accepted(tmp_path, mode):
    assert read_token_file(str(token_file(tmp_path, mode=mode))) == TOKEN


def test_symlinked_token_file_is_refused(tmp_path):
    real = token_file(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ConfigError) as info:
        read_token_file(str(link))
    assert TOKEN not in str(info.value)


def test_directory_token_file_is_refused(tmp_path):
    d = tmp_path / "dir"
    d.mkdir(mode=0o700)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_token_file(str(d))


def test_fifo_token_file_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    # O_NONBLOCK makes opening a writer-less FIFO return at once; without it this test would hang,
    # so the refusal is checked in a child with a deadline.
    import subprocess
    import sys
    code = ("import sys; from kijito_pull.core.config import read_token_file, ConfigError\n"
            "try:\n    read_token_file(sys.argv[1])\nexcept ConfigError as e:\n    print('refused', e)\n")
    done = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=10)
    assert done.stdout.startswith("refused") and "not a regular file" in done.stdout, done.stderr


def test_missing_token_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot open"):
        resolve_token(str(tmp_path / "nope"), {"KIJITOMON_TOKEN": "from-env"})


def test_oversized_token_file_is_refused(tmp_path):
    p = token_file(tmp_path, "x" * (config.MAX_TOKEN_BYTES + 1))
    with pytest.raises(ConfigError, match="too large"):
        read_token_file(str(p))


def test_non_utf8_token_file_is_refused(tmp_path):
    p = tmp_path / "token"
    p.write_bytes(b"\xff\xfe\x00tok")
    os.chmod(p, 0o600)
    with pytest.raises(ConfigError, match="UTF-8"):
        read_token_file(str(p))


@pytest.mark.parametrize("bad", [f"{TOKEN} extra", f"{TOKEN}\x00", "a\tb", f"{TOKEN}\x7f", "two\nlines"],
                         ids=repr)
def test_token_with_inner_whitespace_or_controls_is_refused_without_echoing_it(tmp_path, bad):
    with pytest.raises(ConfigError) as info:
        resolve_token(None, {"KIJITOMON_TOKEN": bad})
    assert TOKEN not in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        resolve_token(str(token_file(tmp_path, bad)), {})
    assert TOKEN not in str(info.value)


def test_connection_repr_hides_the_token():
    conn = config.Connection("https://api.kijito.ai", TOKEN, "X-Key")
    assert TOKEN not in repr(conn) and TOKEN not in str(conn)


@pytest.mark.parametrize("name", ["X-Api-Key", "Authorization", "x_key"])
def test_auth_header_names(name):
    assert validate_auth_header(name) == name
    assert validate_auth_header(None) is None


@pytest.mark.parametrize("name", ["", "X Key", "X:Key", "X-Key\r\nEvil: 1", "é", "x" * 65])
def test_bad_auth_header_names(name):
    with pytest.raises(ConfigError):
        validate_auth_header(name)


# -- persona and consumer --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["Claude-chat", "river", "a.b_c@d+e", "Loom", "x", "0day", "a" * 128,
                                  "testbot", "a..b"])
def test_normal_persona_names_are_accepted(name):
    assert validate_persona(name) == name


@pytest.mark.parametrize("name", [
    "a/b", "../etc", "a\\b", "..", ".", "a\x00b", "x" * 500, "a" * 129, "", ".hidden", "a b", " river",
    "river ", "river\n", "tab\there", "-flag", "_x", "café", "a:b", "a*b",
])
def test_bad_persona_names_are_refused(name):
    with pytest.raises(ConfigError) as info:
        validate_persona(name)
    message = str(info.value)
    assert "\n" not in message and "\x00" not in message
    assert len(message) < 300  # a 500-char name is not echoed whole


@pytest.mark.parametrize("name", [None, 5, ["river"]], ids=repr)
def test_non_string_persona_is_a_config_error(name):
    with pytest.raises(ConfigError):
        validate_persona(name)


@pytest.mark.parametrize("name", ["agent", "my-script", "a.b_c", "X1", "c" * 64])
def test_normal_consumer_names_are_accepted(name):
    assert validate_consumer(name) == name
    assert config.DEFAULT_CONSUMER == "agent"
    assert validate_consumer(config.DEFAULT_CONSUMER) == "agent"


@pytest.mark.parametrize("name", ["", "a/b", "..", ".x", "a b", "a@b", "a\x00b", "c" * 65, "-x", "a\nb"])
def test_bad_consumer_names_are_refused(name):
    with pytest.raises(ConfigError) as info:
        validate_consumer(name)
    assert "\n" not in str(info.value)


# -- config file ------------------------------------------------------------------------------------

def test_config_file_is_parsed(tmp_path):
    f = tmp_path / "config.toml"
    f.write_text('api_base = "https://file.example"\npersona = "river"\nconsumer = "agent"\n')
    data = config.load_config_file({"KIJITO_PULL_CONFIG": str(f)})
    assert data["api_base"] == "https://file.example" and data["persona"] == "river"
    assert resolve_api_base(None, {}, data.get("api_base")) == "https://file.example"


def test_a_missing_config_file_the_variable_names_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        config.load_config_file({"KIJITO_PULL_CONFIG": str(tmp_path / "absent.toml")})


@pytest.mark.parametrize("text", ['api_base = "unterminated', "= 1", "[table\nx=1", "a = 1\na = 2",
                                  "persona = river"])
def test_broken_config_file_is_a_config_error(tmp_path, text):
    f = tmp_path / "config.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        config.load_config_file({"KIJITO_PULL_CONFIG": str(f)})
    assert str(f) in str(info.value)


def test_non_utf8_config_file_is_a_config_error(tmp_path):
    f = tmp_path / "config.toml"
    f.write_bytes(b'persona = "\xff"\n')
    with pytest.raises(ConfigError):
        config.load_config_file({"KIJITO_PULL_CONFIG": str(f)})


def test_unreadable_config_path_is_a_config_error(tmp_path):
    d = tmp_path / "config.toml"
    d.mkdir()
    with pytest.raises(ConfigError):
        config.load_config_file({"KIJITO_PULL_CONFIG": str(d)})


@pytest.mark.parametrize("text", ["api_base = 5", "token_file = true", "auth_header = [1]", "persona = 3",
                                  "consumer = {a = 1}", "api_base = 2024-01-01"])
def test_config_file_setting_of_the_wrong_type_is_a_config_error(tmp_path, text):
    f = tmp_path / "config.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError) as info:
        config.load_config_file({"KIJITO_PULL_CONFIG": str(f)})
    assert text.split(" ")[0] in str(info.value)


def test_default_config_file_location(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    expected = Path(platformdirs.user_config_dir("kijito-pull")) / "config.toml"
    assert paths.config_file({}) == expected
    assert str(tmp_path / "xdg-config") in str(expected)


# -- paths ------------------------------------------------------------------------------------------

def test_state_dir_honours_the_override(tmp_path):
    assert paths.state_dir({"KIJITO_PULL_STATE_DIR": str(tmp_path / "s")}) == tmp_path / "s"
    assert paths.STATE_DIR_ENV == "KIJITO_PULL_STATE_DIR"


def test_state_dir_override_expands_user(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert paths.state_dir({"KIJITO_PULL_STATE_DIR": "~/st"}) == tmp_path / "st"


def test_state_dir_defaults_to_the_user_state_dir_never_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))
    got = paths.state_dir({})
    assert got == Path(platformdirs.user_state_dir("kijito-pull"))
    assert got.is_relative_to(tmp_path / "state-home")
    cache = Path(platformdirs.user_cache_dir("kijito-pull"))
    assert not got.is_relative_to(cache.parent)
    # a blank override is no override
    assert paths.state_dir({"KIJITO_PULL_STATE_DIR": "  "}) == got


def test_cursor_paths_live_under_the_state_dir(tmp_path):
    env = {"KIJITO_PULL_STATE_DIR": str(tmp_path)}
    state, lock = paths.cursor_paths(env, "https://api.kijito.ai", "river", "agent")
    assert state.parent == lock.parent == tmp_path / "cursors"
    assert state.suffix == ".json" and lock.suffix == ".lock"
    assert state.stem == lock.stem == paths.cursor_stem("https://api.kijito.ai", "river", "agent")


@pytest.mark.parametrize("persona", ["../../etc/passwd", "a/b", "..", "/abs", "a\\b", "a\x00b", "x" * 500])
def test_cursor_stem_cannot_traverse(tmp_path, persona):
    stem = paths.cursor_stem("https://api.kijito.ai", persona, "agent")
    assert "/" not in stem and "\\" not in stem and "\x00" not in stem
    assert stem not in (".", "..")
    assert len(stem) <= 100
    state, _ = paths.cursor_paths({"KIJITO_PULL_STATE_DIR": str(tmp_path)}, "https://api.kijito.ai",
                                  persona, "../x")
    assert state.resolve().parent == (tmp_path / "cursors").resolve()


def test_cursor_stem_differs_per_identity():
    base = ("https://api.kijito.ai", "river", "agent")
    variants = [
        base,
        ("http://127.0.0.1:8080", "river", "agent"),
        ("https://api.kijito.ai", "River", "agent"),  # the inbox namespace is case-sensitive
        ("https://api.kijito.ai", "river", "script"),
        ("https://api.kijito.ai", "river.agent", ""),  # same readable prefix, different identity
        ("https://api.kijito.ai", "river_x", "agent"),
        ("https://api.kijito.ai", "river/x", "agent"),  # sanitises to the same prefix as river_x
    ]
    stems = [paths.cursor_stem(*v) for v in variants]
    assert len(set(stems)) == len(stems)
    assert paths.cursor_stem(*base) == paths.cursor_stem(*base)  # stable


def test_token_precedence_is_flag_then_environment_then_config_file(tmp_path):
    flag_file, config_file = tmp_path / "flag", tmp_path / "conf"
    for path, text in ((flag_file, "from-flag"), (config_file, "from-config")):
        path.write_text(text)
        path.chmod(0o600)
    env = {"KIJITOMON_TOKEN": "from-env"}
    assert config.resolve_token(str(flag_file), env, str(config_file)) == "from-flag"
    assert config.resolve_token(None, env, str(config_file)) == "from-env"
    assert config.resolve_token(None, {}, str(config_file)) == "from-config"
    with pytest.raises(config.ConfigError, match="no Kijito token"):
        config.resolve_token(None, {}, None)


def test_a_config_token_file_is_named_as_the_config_file_key_not_as_the_flag(tmp_path):
    config_file = token_file(tmp_path, mode=0o644)
    with pytest.raises(ConfigError) as info:
        resolve_token(None, {}, str(config_file))
    message = str(info.value)
    assert message.startswith(f"config file token_file {config_file}: readable by other users (mode 0644)")
    assert "--token-file" not in message
    with pytest.raises(ConfigError, match=r"^--token-file "):  # the flag's file is still named as the flag
        resolve_token(str(config_file), {})
