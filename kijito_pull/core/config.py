"""Resolving and validating user configuration: API base, token, persona and consumer names.

Everything here is checked before a single request is sent, so a mistake costs nothing and the
token never leaves the machine towards a place it should not go.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kijito_pull.core import paths
from kijito_pull.core.errors import UsageError

DEFAULT_API_BASE = "https://api.kijito.ai"
TOKEN_ENV = "KIJITOMON_TOKEN"
BASE_ENV = "KIJITO_BASE"
PERSONA_ENV = "KIJITO_PERSONA"
REDIS_PASSWORD_ENV = "KIJITO_PULL_REDIS_PASSWORD"
#: The environment variables that carry a secret of ours: never passed to a program kijito-pull starts.
SECRET_ENVS = (TOKEN_ENV, REDIS_PASSWORD_ENV)
DEFAULT_CONSUMER = "agent"
RELAY_CONSUMER = "relay"  # the Kijito cursor of `kijito-pull relay` (cli/relay_cmd.py)
MAX_TOKEN_BYTES = 8192

_PERSONA_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")
_CONSUMER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_HEADER_RE = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")

# Settings the file may carry, all strings: a wrong type is reported here, not as a crash where it is used.
_STRING_SETTINGS = ("api_base", "token_file", "auth_header", "persona", "consumer", "on_reset", "source",
                    "redis_password_file")
#: Every key the config file may carry (docs/configuration.md's table; tests/test_docs.py compares them).
#: The one list: `FileSettings` refuses to read a key not in it, so a setting cannot be read by the code
#: and called unknown by `doctor` (which names the others as ignored).
KNOWN_KEYS = (*_STRING_SETTINGS, "max_stop_blocks", "max_attempts", "mark_read", "claim_after", "personas")
#: What a persona's own table may set (`[personas.river]`): choices an operator makes once per persona,
#: honoured by every entry point of that persona on this machine (docs/delivery.md, "Read receipts").
PERSONA_KEYS = ("mark_read",)

CONFIG_TOKEN_SOURCE = "config file token_file"  # how errors name a token file the config file gave

SANDBOX_HINT = "to try kijito-pull without an account, run `kijito-pull demo` or `kijito-pull sandbox`"


class ConfigError(UsageError):
    """A usage or configuration mistake (exit 2); the message is one line a person can act on."""


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_api_base(raw: str, source: str) -> str:
    """Validate an API base URL; plain http is allowed only to loopback, so the token never travels in clear."""
    text = raw.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{source}: {raw!r} is not an http(s) URL like https://api.kijito.ai")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(f"{source}: the API base must not carry a query, fragment or credentials")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ConfigError(
            f"{source}: plain http:// is only allowed to loopback (127.0.0.1, ::1, localhost); "
            f"use https:// for {parts.hostname}"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def resolve_api_base(flag: str | None, environ: Mapping[str, str], file_value: str | None = None) -> str:
    if flag:
        return normalize_api_base(flag, "--api-base")
    if environ.get(BASE_ENV, "").strip():
        return normalize_api_base(environ[BASE_ENV], BASE_ENV)
    if file_value:
        return normalize_api_base(file_value, "config file api_base")
    return DEFAULT_API_BASE


def read_token_file(path: str, source: str = "--token-file") -> str:
    """Read a token file, refusing one that other users could read (the token is a credential).

    `source` names where the path came from in every error (the flag, or the config file's key)."""
    p = Path(path).expanduser()
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"{source} {path}: cannot open it ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{source} {path}: not a regular file")
        if st.st_mode & 0o077:
            raise ConfigError(
                f"{source} {path}: readable by other users (mode {stat.S_IMODE(st.st_mode):04o}); "
                f"run `chmod 600 {path}`"
            )
        data = os.read(fd, MAX_TOKEN_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_BYTES:
        raise ConfigError(f"{source} {path}: too large to be a token")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"{source} {path}: not UTF-8 text") from None
    if not token:
        raise ConfigError(f"{source} {path}: the file is empty")
    return token


def resolve_token(token_file: str | None, environ: Mapping[str, str], config_token_file: str | None = None) -> str:
    """The token: --token-file, else $KIJITOMON_TOKEN, else the config file's token_file (flags, then the
    environment, then the config file, as for every setting)."""
    if token_file:
        token = read_token_file(token_file)
    elif environ.get(TOKEN_ENV, "").strip():
        token = environ[TOKEN_ENV].strip()
    elif config_token_file:
        token = read_token_file(config_token_file, CONFIG_TOKEN_SOURCE)
    else:
        raise ConfigError(f"no Kijito token: set {TOKEN_ENV} or pass --token-file FILE; {SANDBOX_HINT}")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in token):
        raise ConfigError("the token contains spaces or control characters; check the token file or variable")
    return token


def validate_persona(name: str) -> str:
    if not isinstance(name, str) or not _PERSONA_RE.fullmatch(name):
        shown = repr(name[:40] + ("..." if len(name) > 40 else "")) if isinstance(name, str) else repr(name)
        raise ConfigError(
            f"invalid persona name {shown}: use 1-128 letters, digits and . _ @ + - (starting with a letter or digit)"
        )
    return name


def validate_consumer(name: str) -> str:
    if not _CONSUMER_RE.fullmatch(name or ""):
        raise ConfigError(f"invalid consumer name {name[:40]!r}: use 1-64 letters, digits and . _ -")
    return name


def validate_auth_header(name: str | None) -> str | None:
    if name is None:
        return None
    if not _HEADER_RE.fullmatch(name):
        raise ConfigError(f"--auth-header {name[:40]!r} is not a valid HTTP header name")
    return name


class FileSettings(dict):  # type: ignore[type-arg]
    """The config file's settings. Reading a key that `KNOWN_KEYS` does not declare is a programming error
    (KeyError at once, in every test that reaches it), so the keys the code reads and the keys `doctor`
    knows are one list."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(declared(key), default)

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(declared(key))


def declared(key: str) -> str:
    """`key`, when it is a config file key; KeyError naming the list to add it to otherwise."""
    if key not in KNOWN_KEYS:
        raise KeyError(f"config file key {key!r} is read but not declared in core/config.py KNOWN_KEYS")
    return key


def load_config_file(environ: Mapping[str, str]) -> FileSettings:
    """The TOML config file; flags and environment win over it. The default file is optional; a file
    $KIJITO_PULL_CONFIG names must exist (`/dev/null` for none), since a typo there would otherwise pass
    as "no settings"."""
    path = paths.Paths(environ).config_file
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if environ.get(paths.CONFIG_ENV, "").strip():
            raise ConfigError(f"${paths.CONFIG_ENV} names {path}, which does not exist; create it, point the "
                              f"variable at your config file, or set it to /dev/null for none") from None
        return FileSettings()
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on older Pythons only
        import tomli as tomllib
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    for key in _STRING_SETTINGS:
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"config file {path}: {key} must be a quoted string, e.g. {key} = \"...\"")
    _check_persona_tables(path, data.get("personas"))
    return FileSettings(data)


def _check_persona_tables(path: Path, tables: Any) -> None:
    """`[personas.NAME]` tables: each a table of PERSONA_KEYS with the right types, named by a valid persona."""
    if tables is None:
        return
    if not isinstance(tables, dict):
        raise ConfigError(f"config file {path}: personas must be tables, e.g. [personas.river] then mark_read = true")
    for name, table in tables.items():
        validate_persona(name)
        if not isinstance(table, dict):
            raise ConfigError(f"config file {path}: [personas.{name}] must be a table, e.g. mark_read = true")
        for key, value in table.items():
            if key not in PERSONA_KEYS:
                raise ConfigError(f"config file {path}: [personas.{name}] {key[:40]!r} is not a per-persona "
                                  f"setting (known: {', '.join(PERSONA_KEYS)})")
            if key == "mark_read" and not isinstance(value, bool):
                raise ConfigError(f"config file {path}: [personas.{name}] mark_read must be true or false")


def persona_setting(data: Mapping[str, Any], persona: str, key: str) -> Any:
    """The config file's `[personas.PERSONA]` value of `key` (None when the persona's table does not set it)."""
    table = (data.get("personas") or {}).get(persona)
    return table.get(key) if isinstance(table, dict) else None


@dataclass(frozen=True)
class Connection:
    """Everything needed to talk to one Kijito API. `repr` never shows the token."""

    api_base: str
    token: str
    auth_header: str | None = None

    def __repr__(self) -> str:
        return f"Connection(api_base={self.api_base!r}, auth_header={self.auth_header!r}, token=<redacted>)"


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the Kijito token and the Redis password (SECRET_ENVS): the environment of a program
    kijito-pull starts for the user (`exec`'s command, Codex's app server). Every other setting stays, the
    program's own credentials included."""
    return {k: v for k, v in environ.items() if k not in SECRET_ENVS}
