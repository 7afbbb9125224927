"""Where kijito-pull keeps things: one `Paths` object, so no other code guesses at a path (the pipx model).

`Paths(environ)` answers every location from the environment it is given (tests pass their own):
state (cursors, session leases, stop markers, host facts), the config file, the user data folder
that holds the plugin copies the harnesses load, and the backups the installers leave beside a file.
State lives under the user *state* dir, never the cache dir: losing a cursor because a cache cleaner
ran would re-deliver or, worse, re-baseline mail.

Standard library only at import time (`platformdirs` is imported when a default is first needed):
the hook fast gate reaches the session files through here.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path

APP = "kijito-pull"
STATE_DIR_ENV = "KIJITO_PULL_STATE_DIR"
CONFIG_ENV = "KIJITO_PULL_CONFIG"
DATA_DIR_ENV = "KIJITO_PULL_DATA_DIR"
BACKUP_SUFFIX = ".kijito-pull.bak"


def cursor_stem(api_base: str, persona: str, consumer: str) -> str:
    """A file-name stem unique to one cursor identity.

    The hash carries the identity (so names can never traverse or collide, whatever the persona is);
    the readable prefix is only for people listing the directory.
    """
    digest = hashlib.sha256("\0".join((api_base, persona, consumer)).encode("utf-8")).hexdigest()[:20]
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", f"{persona}.{consumer}")[:48]
    return f"{readable}.{digest}"


def platform_state_dir() -> Path:
    """The platform's default state folder (what `state_dir` is without $KIJITO_PULL_STATE_DIR)."""
    import platformdirs

    return Path(platformdirs.user_state_dir(APP))


class Paths:
    """Every location kijito-pull reads or writes, computed from one environment."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ

    def _env(self, name: str) -> str:
        return self.environ.get(name, "").strip()

    # -- the user's folders ------------------------------------------------------------------------------

    @property
    def home(self) -> Path:
        raw = self._env("HOME")
        return Path(raw) if raw else Path.home()

    def expand(self, path: str) -> Path:
        """`~` and `~/...` against this environment's HOME (not the process's)."""
        if path == "~" or path.startswith("~/"):
            return self.home / path[2:]
        return Path(path)

    @property
    def config_home(self) -> Path:
        """$XDG_CONFIG_HOME when absolute, else ~/.config (where systemd user units live too)."""
        xdg = self._env("XDG_CONFIG_HOME")
        return Path(xdg) if xdg and os.path.isabs(xdg) else self.home / ".config"

    # -- kijito-pull's own -------------------------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        override = self._env(STATE_DIR_ENV)
        return Path(override).expanduser() if override else platform_state_dir()

    @property
    def cursors_dir(self) -> Path:
        return self.state_dir / "cursors"

    def cursor_files(self, api_base: str, persona: str, consumer: str) -> tuple[Path, Path]:
        """(state file, lock file) for one (API base, persona, consumer)."""
        stem = cursor_stem(api_base, persona, consumer)
        return self.cursors_dir / f"{stem}.json", self.cursors_dir / f"{stem}.lock"

    @property
    def sessions_dir(self) -> Path:
        """Per-session leases and counters of the harness sessions (one waker per session)."""
        return self.state_dir / "sessions"

    @property
    def crashes_dir(self) -> Path:
        """The reports of unexpected errors (core/crashreport.py): the traceback a person sends, 0600."""
        return self.state_dir / "crashes"

    @property
    def stops_dir(self) -> Path:
        """Durable stop markers (`kijito-pull session stop`), per project and persona."""
        return self.state_dir / "stops"

    def host_facts(self, harness: str) -> Path:
        """What a harness learnt about its executables (e.g. which Claude Code supports asyncRewake)."""
        return self.state_dir / f"{harness}-hosts.json"

    @property
    def config_file(self) -> Path:
        override = self._env(CONFIG_ENV)
        if override:
            return Path(override).expanduser()
        import platformdirs

        return Path(platformdirs.user_config_dir(APP)) / "config.toml"

    @property
    def data_dir(self) -> Path:
        """The user data folder (platformdirs' user_data_dir, computed from this environment): where the
        installers keep the copies of the plugin files the harnesses load."""
        override = self._env(DATA_DIR_ENV)
        if override:
            return self.expand(override)
        if sys.platform == "darwin":
            return self.home / "Library" / "Application Support" / APP
        xdg = self._env("XDG_DATA_HOME")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else self.home / ".local" / "share"
        return base / APP

    def plugin_copy(self, bundle: str) -> Path:
        """Where the installed copy of one shipped bundle ("claude-plugin", "pi") lives."""
        return self.data_dir / bundle

    # -- backups beside the files the installers edit ----------------------------------------------------

    @staticmethod
    def backup(path: Path) -> Path:
        """`FILE.kijito-pull.bak`: the file as it was before kijito-pull was first added to it."""
        return path.with_name(path.name + BACKUP_SUFFIX)

    @staticmethod
    def timestamped_backup(path: Path) -> Path:
        return path.with_name(f"{path.name}.kijito-pull-{time.strftime('%Y%m%dT%H%M%S')}.bak")


# The module-level spellings older callers use; each is one Paths look-up.


def state_dir(environ: Mapping[str, str]) -> Path:
    return Paths(environ).state_dir


def config_file(environ: Mapping[str, str]) -> Path:
    return Paths(environ).config_file


def cursor_paths(environ: Mapping[str, str], api_base: str, persona: str, consumer: str) -> tuple[Path, Path]:
    return Paths(environ).cursor_files(api_base, persona, consumer)
