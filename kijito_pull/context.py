"""The composition root: settings resolved once, then the client, stores and engines built from them.

Every entry point that reads an inbox (pull, watch, show, send, the harness hooks, demo, doctor) gets
what it needs here and nowhere else:

- `Settings(environ, Flags(...))` resolves each setting once, on first use, flags over the
  environment over the config file (docs/configuration.md). A setting that is wrong raises
  `ConfigError` (exit 2) when it is first asked for, before any request is sent.
- `Context(settings)` builds the API client, each persona's cursor store and engine from them, so no
  command wires a `KijitoClient`, `StateStore` or `Engine` by hand.

With a Redis source (`--source redis://...`, $KIJITO_PULL_SOURCE, config `source`), `engine()` builds
the Redis Streams source instead (kijito_pull/sources/redis_streams.py, docs/fleets.md), and no request
is sent to Kijito. Imports only the core and the sources (docs/architecture.md).
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from kijito_pull.core import config, receipts
from kijito_pull.core.api import DEFAULT_TIMEOUT, KijitoClient
from kijito_pull.core.engine import DEFAULT_MAX_ATTEMPTS, REPLAY, RESET_POLICIES, Engine
from kijito_pull.core.events import EventFactory
from kijito_pull.core.paths import Paths
from kijito_pull.core.pending import DEFAULT_TTL
from kijito_pull.core.state import StateStore


@dataclass(frozen=True)
class Flags:
    """What the command line said; None (or empty) means "not given", so the next source decides."""

    api_base: str | None = None
    token_file: str | None = None
    auth_header: str | None = None
    personas: tuple[str, ...] = ()
    consumer: str | None = None
    timeout: float | None = None
    on_reset: str | None = None
    max_attempts: int | None = None
    mark_read: bool | None = None
    source: str | None = None
    claim_after: float | None = None
    redis_password_file: str | None = None


SOURCE_ENV = "KIJITO_PULL_SOURCE"
CONSUMER_ENV = "KIJITO_PULL_CONSUMER"  # a hook's `--consumer` (harnesses/hookgate.py), the pi extension's
REDIS_PASSWORD_ENV = config.REDIS_PASSWORD_ENV
REDIS_PASSWORD_WAYS = (f"${REDIS_PASSWORD_ENV}, --redis-password-file FILE (mode 0600), or redis_password_file "
                       f"in the config file")


def refuse_password_in_argv(url: str, flag: str) -> None:
    """ConfigError when a Redis URL given on the command line carries a password: every user of the
    machine can read a process's argv (ps). The error names the ways that keep it private, never it."""
    if urllib.parse.urlsplit(url).password is not None:
        raise config.ConfigError(f"{flag}: a password in the Redis URL would be readable by every user (ps); "
                                 f"leave it out and give it by {REDIS_PASSWORD_WAYS}")


class Settings:
    """Flags over the environment over the config file, each resolved once, when first asked for."""

    def __init__(self, environ: Mapping[str, str], flags: Flags = Flags()):
        self.environ = environ
        self.flags = flags
        self.paths = Paths(environ)

    @functools.cached_property
    def file(self) -> dict[str, Any]:
        """The config file's settings ({} when there is none); ConfigError when it cannot be read."""
        return config.load_config_file(self.environ)

    @functools.cached_property
    def api_base(self) -> str:
        return config.resolve_api_base(self.flags.api_base, self.environ, self.file.get("api_base"))

    @functools.cached_property
    def token(self) -> str:
        return config.resolve_token(self.flags.token_file, self.environ, self.file.get("token_file"))

    @functools.cached_property
    def auth_header(self) -> str | None:
        return config.validate_auth_header(self.flags.auth_header or self.file.get("auth_header"))

    @functools.cached_property
    def consumer(self) -> str:
        # An explicit --consumer "" (say, from an unset shell variable) is an error, not the agent's cursor.
        name = self.flags.consumer if self.flags.consumer is not None else (
            self.environ.get(CONSUMER_ENV, "").strip() or self.file.get("consumer") or config.DEFAULT_CONSUMER)
        return config.validate_consumer(str(name))

    @functools.cached_property
    def personas(self) -> list[str]:
        """--persona (repeatable), else $KIJITO_PERSONA, else the config file's persona; validated, deduped."""
        given: Iterable[str] = self.flags.personas
        if not given:
            fallback = self.environ.get(config.PERSONA_ENV, "").strip() or self.file.get("persona")
            if not fallback:
                raise config.ConfigError(f"no persona: pass --persona NAME or set {config.PERSONA_ENV}")
            given = [fallback]
        out: list[str] = []
        for name in given:
            config.validate_persona(name)
            if name not in out:
                out.append(name)
        return out

    @functools.cached_property
    def on_reset(self) -> str:
        """What a pull does when the server's ids start over below the cursor (--on-reset, else the config
        file's on_reset, else replay): docs/delivery.md, "Server resets"."""
        value = self.flags.on_reset or self.file.get("on_reset") or REPLAY
        if value not in RESET_POLICIES:
            raise config.ConfigError(f"on_reset must be one of {', '.join(RESET_POLICIES)}, not {str(value)[:20]!r}")
        return value

    @functools.cached_property
    def max_attempts(self) -> int:
        """Refusals of one message before it is parked (--max-attempts, else the config file's
        max_attempts, else 10); 0 holds the cursor on it forever."""
        value = self.flags.max_attempts if self.flags.max_attempts is not None else self.file.get("max_attempts")
        if value is None:
            return DEFAULT_MAX_ATTEMPTS
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
            raise config.ConfigError(f"max_attempts must be a whole number from 0 to 1000, not {str(value)[:20]!r}")
        return value

    def mark_read(self, persona: str) -> bool:
        """Mark `persona`'s confirmed mail read on the server: `mark_read_origin`'s answer."""
        return self.mark_read_origin(persona)[0]

    def mark_read_origin(self, persona: str) -> tuple[bool, str]:
        """(whether `persona`'s confirmed mail is marked read on the server, what said so): --mark-read, else
        $KIJITO_PULL_MARK_READ, else the config file's `[personas.PERSONA] mark_read`, else its `mark_read`,
        else off (core/receipts.py; docs/delivery.md, "Read receipts")."""
        if self.flags.mark_read is not None:
            return self.flags.mark_read, "--mark-read"
        raw = self.environ.get(receipts.ENV, "").strip().lower()
        if raw:
            if raw not in ("1", "true", "yes", "0", "false", "no"):
                raise config.ConfigError(f"${receipts.ENV} must be 1/true/yes or 0/false/no, not {raw[:20]!r}")
            return raw in ("1", "true", "yes"), f"${receipts.ENV}"
        own = config.persona_setting(self.file, persona, "mark_read")
        if own is not None:
            return own, f"the config file's [personas.{persona}] mark_read"
        value = self.file.get("mark_read")
        if value is None:
            return False, "the default (no mark_read setting)"
        if not isinstance(value, bool):
            raise config.ConfigError(f"mark_read must be true or false, not {str(value)[:20]!r}")
        return value, "the config file's mark_read"

    @property
    def source_asked(self) -> tuple[str, str | None]:
        """(the Redis source as given, where from: "--source", "$KIJITO_PULL_SOURCE" or "the config file's
        source"), or ("", None) when none is asked for. Not checked: `source` does that."""
        if self.flags.source:
            return self.flags.source, "--source"
        if value := self.environ.get(SOURCE_ENV, "").strip():
            return value, f"${SOURCE_ENV}"
        if value := self.file.get("source"):
            return str(value), "the config file's source"
        return "", None

    @functools.cached_property
    def source(self) -> str | None:
        """A Redis source URL (--source, else $KIJITO_PULL_SOURCE, else the config file's source), or None:
        the embedded Kijito engine. Any other scheme is a ConfigError."""
        if self.flags.source:
            refuse_password_in_argv(self.flags.source, "--source")
        value, origin = self.source_asked
        if origin is None:
            return None
        from kijito_pull.sources import redis_streams

        try:
            return redis_streams.check_url(str(value))
        except ValueError as exc:
            raise config.ConfigError(f"source: {exc}") from None

    def redis_url(self, url: str) -> str:
        """`url` with the Redis password in it, for the client only (never shown: redis_streams.safe_url):
        the URL's own (from the environment or config file), else $KIJITO_PULL_REDIS_PASSWORD, else
        --redis-password-file, else the config file's redis_password_file (a 0600 file, as for the token)."""
        parts = urllib.parse.urlsplit(url)
        if parts.password is not None:
            return url
        password = self.environ.get(REDIS_PASSWORD_ENV, "")
        if not password:
            path = self.flags.redis_password_file or self.file.get("redis_password_file")
            source = "--redis-password-file" if self.flags.redis_password_file else "config file redis_password_file"
            password = config.read_token_file(str(path), source) if path else ""
        if not password:
            return url
        user = urllib.parse.quote(parts.username or "", safe="")
        netloc = f"{user}:{urllib.parse.quote(password, safe='')}@{parts.netloc.rpartition('@')[2]}"
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))

    @functools.cached_property
    def claim_after(self) -> float:
        """Seconds a Redis hand-over stays with its holder before another member claims it back."""
        value = self.flags.claim_after if self.flags.claim_after is not None else self.file.get("claim_after")
        if value is None:
            return DEFAULT_TTL
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise config.ConfigError(f"claim_after must be a number of seconds, not {str(value)[:20]!r}")
        return float(value)

    @property
    def timeout(self) -> float:
        return self.flags.timeout or DEFAULT_TIMEOUT

    def connection(self) -> config.Connection:
        return config.Connection(self.api_base, self.token, self.auth_header)


ClientFactory = Callable[..., Any]


class Context:
    """One command's wiring, built once: the API client, the event factory, a store and engine per persona.

    `attempts` and `deadline` bound the client's retries (the hooks keep theirs short); `client_factory`
    replaces `KijitoClient` (tests, the doctor's fakes). Use as a context manager, or call `close()`.
    """

    def __init__(self, settings: Settings, *, attempts: int | None = None, deadline: float | None = None,
                 client_factory: ClientFactory | None = None):
        self.settings = settings
        self.factory = EventFactory()
        self._limits = {k: v for k, v in (("attempts", attempts), ("deadline", deadline)) if v is not None}
        self._client_factory = client_factory or KijitoClient
        self._clients: list[Any] = []
        self._redis: Any = None

    def new_client(self) -> Any:
        """A client of its own (the watch loop's long-poll holds one while the other reads inboxes)."""
        s = self.settings
        client = self._client_factory(s.api_base, s.token, auth_header=s.auth_header, timeout=s.timeout,
                                      **self._limits)
        self._clients.append(client)
        return client

    @functools.cached_property
    def client(self) -> Any:
        return self.new_client()

    def store(self, persona: str) -> StateStore:
        s = self.settings
        return StateStore(*s.paths.cursor_files(s.api_base, persona, s.consumer), root=s.paths.state_dir,
                          identity={"api_base": s.api_base, "persona": persona, "consumer": s.consumer})

    def engine(self, persona: str, *, reads_for_model: bool = True,
               **options: Any) -> Engine | receipts.ReadReceipts | Any:
        """`options` are the Engine's own (max_replay, page_budget, lock_timeout, progress, ...).
        With a Redis source, that source instead (its own options: consumer, claim_after, max_attempts).
        With read receipts on for `persona`, the engine marks confirmed mail read (core/receipts.py), unless
        `reads_for_model` is False: the relay, whose taking is no model's (its receipt is the group's XACK)."""
        config.validate_persona(persona)
        if self.settings.source is not None:
            return self.redis_source(persona)
        options.setdefault("on_reset", self.settings.on_reset)
        options.setdefault("max_attempts", self.settings.max_attempts)
        options.setdefault("notify_client", self.new_client)  # the wake's long-poll holds its own connection
        engine = Engine(self.client, self.store(persona), self.factory, persona=persona,
                        consumer=self.settings.consumer, **options)
        if not reads_for_model:
            return engine
        if self.settings.mark_read(persona):
            return receipts.ReadReceipts(engine, self.client)
        receipts.withdraw(engine.store.path)  # a receipts marker left from when they were on is taken back
        return engine

    def redis_source(self, persona: str) -> Any:
        from kijito_pull.sources import redis_streams

        s = self.settings
        if self._redis is None:
            self._redis = redis_streams.connect(s.redis_url(s.source), timeout=s.timeout)
            self._clients.append(self._redis)
        return redis_streams.RedisSource(self._redis, self.factory, persona=persona, consumer=s.consumer,
                                         where=redis_streams.safe_url(s.source), claim_after=s.claim_after,
                                         max_attempts=s.max_attempts)

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
