"""Wiring kijito-pull into the harnesses: `kijito-pull install | uninstall claude | pi | codex | daemon`.

One module per target (claude, pi, codex, daemon), each with `install`, `uninstall` and a read-only
`wiring` look. `wiring()` below is what `kijito-pull doctor` asks: for one harness, every place
(scope) where kijito-pull is or could be wired, whether it is, and whether the command its hooks run
exists. It reads files only: no harness command runs, nothing is written.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

HARNESSES = ("claude", "pi", "codex", "daemon")


@dataclass(frozen=True)
class Wiring:
    """One place where a harness is (or could be) wired to kijito-pull.

    harness         "claude", "pi", "codex" or "daemon"
    scope           "user", "project" ("local" for Claude Code's settings.local.json)
    installed       kijito-pull is wired here
    path            the settings / hooks / unit file (or the extension file) looked at
    command         the kijito-pull executable the hooks run, resolved to an absolute path where it
                    can be (else the word as written)
    command_exists  that executable exists (False: the hooks fail with "not found")
    detail          anything else worth saying, plain text ("" when nothing)
    """

    harness: str
    scope: str
    installed: bool
    path: str | None
    command: str | None
    command_exists: bool
    detail: str = ""


def wiring(harness: str, environ: Mapping[str, str] | None = None, cwd: str | None = None) -> list[Wiring]:
    """Where `harness` is wired (or has a settings file that could be): one row per place, read-only.

    `environ` (default: this process's) supplies HOME, PATH and the harnesses' own overrides
    (CLAUDE_CONFIG_DIR, PI_CODING_AGENT_DIR, CODEX_HOME, XDG_CONFIG_HOME); `cwd` (default: the current
    directory) selects the project, i.e. the repository root above it. Raises ValueError for an
    unknown harness."""
    if harness not in HARNESSES:
        raise ValueError(f"unknown harness {harness!r}; expected one of {', '.join(HARNESSES)}")
    module = importlib.import_module(f"kijito_pull.harnesses.{harness}.installer")
    return list(module.wiring(dict(os.environ) if environ is None else environ, cwd or os.getcwd()))


__all__ = ["HARNESSES", "Wiring", "wiring"]
