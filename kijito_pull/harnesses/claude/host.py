"""What the running Claude Code can do, detected at run time rather than assumed from a version.

The waker needs `asyncRewake` (a background hook whose exit code 2 wakes the model; measured on
2.1.197). A Claude Code without it would run the waker as a plain background hook whose exit code is
ignored, so the session would never be woken and the model would not know. We therefore look for
the feature in the executable that runs this hook (the first non-shell ancestor process): the string
`asyncRewake` is part of its hook schema. The answer is cached per executable (path, size, mtime)
in the state dir, so the ~0.15 s scan of a 245 MB binary happens once per Claude Code version.

`KIJITO_PULL_CLAUDE_WAKER` overrides the detection: `rewake` (arm the hook waker), `monitor` (no
waker; the session-start context gives the model the Monitor tool call instead) or `off` (neither).
Standard library only.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Mapping

from kijito_pull.core.paths import Paths
from kijito_pull.harnesses.claude import HARNESS
from kijito_pull.harnesses.session import lifecycle

WAKER_ENV = "KIJITO_PULL_CLAUDE_WAKER"
REWAKE = "rewake"
MONITOR = "monitor"
OFF = "off"
FEATURE = b"asyncRewake"
_SCRIPT_RUNTIMES = ("node", "nodejs", "bun", "deno")


def host_executable(start_pid: int | None = None) -> str | None:
    """The file that holds the Claude Code code serving this hook (the binary, or the script run by node)."""
    host = lifecycle.host_process(start_pid)
    if host is None:
        return None
    try:
        exe = os.readlink(f"/proc/{host.pid}/exe")
    except OSError:
        return None
    if os.path.basename(exe).split(".")[0] not in _SCRIPT_RUNTIMES:
        return exe
    try:
        with open(f"/proc/{host.pid}/cmdline", "rb") as handle:
            args = handle.read().split(b"\0")
    except OSError:
        return None
    for arg in args[1:]:
        text = arg.decode("utf-8", "surrogateescape")
        if text.endswith((".js", ".mjs", ".cjs")) and os.path.isfile(text):
            return os.path.realpath(text)
    return None


def has_feature(path: str, feature: bytes = FEATURE) -> bool | None:
    """Whether the file contains `feature`; None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return False
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                return view.find(feature) != -1
    except (OSError, ValueError):
        return None


def _cache_path(environ: Mapping[str, str]) -> str:
    return str(Paths(environ).host_facts(HARNESS.name))


def supports_rewake(path: str, environ: Mapping[str, str]) -> bool | None:
    from pathlib import Path

    try:
        st = os.stat(path)
    except OSError:
        return None
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    cache_file = Path(_cache_path(environ))
    cache = lifecycle.read_json(cache_file) or {}
    known = cache.get(key)
    if isinstance(known, bool):
        return known
    found = has_feature(path)
    if found is not None:
        cache = {k: v for k, v in cache.items() if not k.startswith(f"{path}|")}
        cache[key] = found
        with contextlib.suppress(lifecycle.LifecycleError):
            lifecycle.write_json(cache_file, cache)
    return found


def waker_choice(environ: Mapping[str, str], start_pid: int | None = None) -> tuple[str, str]:
    """(choice, why): how this session can be woken by new mail."""
    raw = environ.get(WAKER_ENV, "").strip().lower()
    if raw in (REWAKE, MONITOR, OFF):
        return raw, f"{WAKER_ENV}={raw}"
    exe = host_executable(start_pid)
    if exe is None:
        return REWAKE, "the Claude Code executable was not found; assuming asyncRewake (measured on 2.1.197)"
    found = supports_rewake(exe, environ)
    if found is None:
        return REWAKE, f"{exe} could not be read; assuming asyncRewake"
    if found:
        return REWAKE, f"{exe} supports asyncRewake"
    return MONITOR, f"{exe} has no asyncRewake hooks"
