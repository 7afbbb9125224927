"""Where kijito-pull keeps things. One module, so no other code guesses at a path (the pipx model).

State (cursors, locks, leases, stop markers) lives under the user *state* dir, never the cache dir:
losing a cursor because a cache cleaner ran would re-deliver or, worse, re-baseline mail.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

import platformdirs

APP = "kijito-pull"
STATE_DIR_ENV = "KIJITO_PULL_STATE_DIR"


def state_dir(environ: Mapping[str, str]) -> Path:
    override = environ.get(STATE_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_state_dir(APP))


def config_file(environ: Mapping[str, str]) -> Path:
    override = environ.get("KIJITO_PULL_CONFIG", "").strip()
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir(APP)) / "config.toml"


def cursor_stem(api_base: str, persona: str, consumer: str) -> str:
    """A file-name stem unique to one cursor identity.

    The hash carries the identity (so names can never traverse or collide, whatever the persona is);
    the readable prefix is only for people listing the directory.
    """
    digest = hashlib.sha256("\0".join((api_base, persona, consumer)).encode("utf-8")).hexdigest()[:20]
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", f"{persona}.{consumer}")[:48]
    return f"{readable}.{digest}"


def cursor_paths(environ: Mapping[str, str], api_base: str, persona: str, consumer: str) -> tuple[Path, Path]:
    """(state file, lock file) for one (API base, persona, consumer)."""
    base = state_dir(environ) / "cursors"
    stem = cursor_stem(api_base, persona, consumer)
    return base / f"{stem}.json", base / f"{stem}.lock"
