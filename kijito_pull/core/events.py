"""Events: the records every consumer sees, in the form kijito-inbox-monitor's stream already uses.

Consumers of the existing watcher (grep filters, wake ledgers, exec hooks) must keep working when they
are pointed at kijito-pull, so the keys, identities and serialisation here match that stream. Nothing
in this module does I/O beyond reading clocks and randomness: sinks decide where an event goes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import string
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from kijito_pull.core import config
from kijito_pull.core.models import Message

SOURCE = "kijito-inbox"

NEW = "new"
ARMED = "armed"
ALERT = "alert"
RECOVERED = "recovered"
HEARTBEAT = "heartbeat"
STATE_CORRUPT = "state_corrupt"
BASELINE_SKIPPED = "baseline_skipped"
SEED_AHEAD = "seed_ahead"
REPLAY_CAPPED = "replay_capped"
PERSONA_ADDED = "persona_added"

KINDS = frozenset({NEW, ARMED, ALERT, RECOVERED, HEARTBEAT, STATE_CORRUPT, BASELINE_SKIPPED,
                   SEED_AHEAD, REPLAY_CAPPED, PERSONA_ADDED})

WAKE_MAIL = "mail"
WAKE_DIAGNOSTIC = "diagnostic"
WAKE_LIVENESS = "liveness"

# Closed on purpose: anything placed here stops waking anyone, so membership is pinned by a test.
LIVENESS_KINDS = frozenset({HEARTBEAT, ARMED})

_BASE62 = string.ascii_lowercase + string.ascii_uppercase + string.digits
_NONCE_LENGTH = 11
_RUN_ID = re.compile(r"\A[0-9a-f]{16}\Z")

# Keys the factory owns. A caller's extra field must not silently replace one, or an event could
# claim another event's identity or a wrong class.
_STAMPED_KEYS = frozenset({"event", "source", "ts", "persona", "event_id", "nonce", "emitted",
                           "wake_class"})
_NEW_KEYS = _STAMPED_KEYS | {"id", "from", "created", "content", "urgent"}


def wake_class(kind: str) -> str:
    """Classify a kind so consumers can filter structurally instead of by a list of names.

    An unknown kind is a diagnostic (it wakes): a kind someone forgot to classify should be noticed,
    not silently muted.
    """
    if kind == NEW:
        return WAKE_MAIL
    if kind in LIVENESS_KINDS:
        return WAKE_LIVENESS
    return WAKE_DIAGNOSTIC


def nonce(event_id: str) -> str:
    """The 11-char base62 wake nonce, derived from the event id so it is stable exactly where the id is.

    Derived rather than random: a re-delivered message must carry the same nonce, or a consumer's
    ledger would count it as a second, lost wake. It is a label, not a secret.
    """
    digest = hashlib.sha256(event_id.encode("utf-8", "replace")).digest()
    value = int.from_bytes(digest, "big")
    digits = []
    for _ in range(_NONCE_LENGTH):
        value, digit = divmod(value, 62)
        digits.append(_BASE62[digit])
    return "".join(digits)


def safe_text(text: str) -> str:
    """Make text writable to a UTF-8 file and to an environment value, whatever a message contained.

    A NUL cannot be in an environment value and a lone surrogate cannot be encoded; either would turn
    one odd message into a permanent delivery failure, so both are neutralised instead.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", "")


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def _clock_sources() -> dict[str, tuple[str, int]]:
    """Map the two clock meanings onto this platform's constants: {key: (constant name, constant)}.

    `monotonic` stops while the machine is not executing; `boottime` keeps counting. On Linux those
    are CLOCK_MONOTONIC and CLOCK_BOOTTIME. macOS names them differently (its CLOCK_MONOTONIC
    includes sleep and follows NTP steps), so there the raw pair CLOCK_UPTIME_RAW /
    CLOCK_MONOTONIC_RAW is used. CLOCK_UPTIME_RAW's presence is what identifies macOS: on Linux
    CLOCK_MONOTONIC_RAW excludes suspend and would be the wrong boottime.
    """
    sources: dict[str, tuple[str, int]] = {}
    darwin = hasattr(time, "CLOCK_UPTIME_RAW")
    if darwin:
        sources["monotonic"] = ("CLOCK_UPTIME_RAW", time.CLOCK_UPTIME_RAW)
    elif hasattr(time, "CLOCK_MONOTONIC"):
        sources["monotonic"] = ("CLOCK_MONOTONIC", time.CLOCK_MONOTONIC)
    if hasattr(time, "CLOCK_BOOTTIME"):
        sources["boottime"] = ("CLOCK_BOOTTIME", time.CLOCK_BOOTTIME)
    elif darwin and hasattr(time, "CLOCK_MONOTONIC_RAW"):
        sources["boottime"] = ("CLOCK_MONOTONIC_RAW", time.CLOCK_MONOTONIC_RAW)
    return sources


def _drop_inverted_boottime(stamps: dict[str, Any], src: dict[str, str]) -> None:
    """boottime below monotonic means the clock mapping is wrong: report it rather than publish it."""
    if "monotonic" in stamps and "boottime" in stamps and stamps["boottime"] < stamps["monotonic"]:
        stamps["clock_defect"] = {
            "kind": "boottime_below_monotonic",
            "boottime": stamps.pop("boottime"),
            "boottime_src": src.pop("boottime", None),
            "monotonic": stamps["monotonic"],
        }


def emitted_clocks() -> dict[str, Any]:
    """Wall, monotonic and boottime read together, so consumers can tell queueing from a frozen host.

    A clock this platform cannot read is omitted, never faked: a made-up value would look exactly like
    a real reading of "no freeze", which is what these fields exist to detect.
    """
    stamps: dict[str, Any] = {"wall": _now_iso()}
    src: dict[str, str] = {}
    clock_gettime = getattr(time, "clock_gettime", None)
    if clock_gettime is not None:
        for key, (name, const) in _clock_sources().items():
            try:
                stamps[key] = round(clock_gettime(const), 6)
            except OSError:
                continue
            src[key] = name
    _drop_inverted_boottime(stamps, src)
    if src:
        stamps["src"] = src
    return stamps


def _merge_fields(event: dict[str, Any], fields: Mapping[str, Any], reserved: frozenset) -> None:
    clash = sorted(set(fields) & reserved)
    if clash:
        raise ValueError("fields reserved for the event itself: {}".format(", ".join(clash)))
    event.update(fields)


def _clip(content: str, content_chars: int | None) -> str:
    if content_chars is None:
        return content
    if content_chars < 0:
        raise ValueError("content_chars must be >= 0")
    return content[:content_chars]


class EventFactory:
    """Builds complete events. Make one per process: its run id keeps signal ids unique across restarts.

    A bare counter would restart at 1 and hand out ids a consumer has already seen (and would then
    drop); prefixing it with 64 random bits per process makes reuse practically impossible.
    """

    def __init__(self, run_id: str | None = None) -> None:
        if run_id is None:
            run_id = os.urandom(8).hex()
        if not _RUN_ID.match(run_id):
            raise ValueError("run_id must be 16 lowercase hex digits")
        self.run_id = run_id
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def new(self, persona: str, message: Message, content_chars: int | None = None,
            no_content: bool = False, **extra: Any) -> dict[str, Any]:
        """A `new` event for one message; its id is the message's, so re-deliveries dedupe downstream."""
        if isinstance(message.id, bool) or not isinstance(message.id, int):
            raise TypeError("message.id must be an int")
        event: dict[str, Any] = {
            "event": NEW, "source": SOURCE, "ts": _now_iso(),
            "id": message.id, "from": message.sender, "created": message.created, "persona": persona,
        }
        if message.urgent is not None:
            event["urgent"] = message.urgent
        if not no_content:
            event["content"] = _clip(message.content, content_chars)
        _merge_fields(event, extra, _NEW_KEYS)
        return self._stamp(event, f"{persona or '_'}:{NEW}:{message.id}")

    def signal(self, kind: str, persona: str, **fields: Any) -> dict[str, Any]:
        """Any non-mail event; each emission gets its own id, since a second outage is a second thing."""
        if not kind or kind == NEW:
            raise ValueError("signal() needs a non-mail kind; use new() for mail")
        event: dict[str, Any] = {"event": kind, "source": SOURCE, "ts": _now_iso()}
        _merge_fields(event, fields, _STAMPED_KEYS)
        event["persona"] = persona
        with self._lock:
            seq = next(self._counter)
        return self._stamp(event, f"{persona or '_'}:{kind}:{self.run_id}-{seq}")

    @staticmethod
    def _stamp(event: dict[str, Any], event_id: str) -> dict[str, Any]:
        # The id is made representable before the nonce is derived, so anyone can recompute the nonce
        # from the event_id exactly as it appears on the serialised line.
        event["event_id"] = safe_text(event_id)
        event["nonce"] = nonce(event["event_id"])
        event["emitted"] = emitted_clocks()
        event["wake_class"] = wake_class(event["event"])
        return event


def to_ndjson(event: Mapping[str, Any]) -> str:
    """One NDJSON line, byte-compatible with kijito-inbox-monitor's stream.

    Sanitised at the serialised line so every field (content, sender, an alarm reason quoting the
    server) is covered at once. json.dumps escapes control characters and newlines, so the line is
    always exactly one line.
    """
    return safe_text(json.dumps(event, ensure_ascii=False)) + "\n"


# Event field -> exec variable suffix, the exec contract consumers of the existing watcher rely on.
_ENV_FIELDS = (
    ("event", "EVENT"), ("source", "SOURCE"), ("ts", "TS"), ("event_id", "EVENT_ID"),
    ("nonce", "NONCE"), ("persona", "PERSONA"), ("id", "ID"), ("from", "FROM"),
    ("content", "CONTENT"), ("created", "CREATED"), ("cursor", "CURSOR"), ("api_base", "API_BASE"),
    ("reason", "REASON"), ("consecutive_failures", "FAILURES"), ("seconds", "SECONDS"),
    ("floor_seconds", "FLOOR_SECONDS"), ("seeded", "SEEDED"), ("current_max", "CURRENT_MAX"),
    ("capped_to", "CAPPED_TO"), ("dropped", "DROPPED"), ("stranded_inboxes", "STRANDED"),
    ("dormant_inboxes", "DORMANT"), ("ids", "IDS"), ("oldest_age_seconds", "OLDEST_AGE"),
    ("urgent", "URGENT"),
)
_ALWAYS_SET = frozenset({"event", "source", "ts", "event_id", "nonce"})
ENV_PREFIX = "KIJITOMON_"


def _env_value(value: Any) -> str:
    # Lists are comma-joined because a Python repr is useless to a shell; booleans use the JSON
    # spelling so the exec and NDJSON channels say the same word.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_env_value(item) for item in value)
    return str(value)


def _is_secret_variable(name: str) -> bool:
    return name.upper().endswith("_TOKEN") or name in config.SECRET_ENVS


def exec_environment(event: Mapping[str, Any], base_env: Mapping[str, str]) -> dict[str, str]:
    """The environment for an exec consumer: base_env plus the event as KIJITOMON_* variables.

    Token variables and the Redis password are removed: an exec hook is arbitrary code that has no business
    holding the API token or the fleet's password. Event variables inherited from base_env are cleared
    first, so a field this event lacks cannot show a value left over from some outer process.
    """
    event_vars = {ENV_PREFIX + suffix for _, suffix in _ENV_FIELDS}
    env = {name: value for name, value in base_env.items()
           if not _is_secret_variable(name) and name not in event_vars}
    for key, suffix in _ENV_FIELDS:
        value = event.get(key)
        if value is None:
            if key not in _ALWAYS_SET:
                continue
            value = ""
        env[ENV_PREFIX + suffix] = safe_text(_env_value(value))
    return env
