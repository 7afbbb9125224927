"""The registry: harness name -> the package that defines it (its `HARNESS`, a base.Harness).

`kijito-pull install | uninstall`, `doctor` and `hook` read this and nothing else to learn which
harnesses exist; the order here is the order they are listed and checked in. Adding a harness is one
folder under kijito_pull/harnesses/ plus one line here (docs/architecture.md).

Standard library only, and cheap: the hook fast gate asks `find_hook` in every project, and only the
package of the hook's own harness is imported (a hook's name starts with its harness's name).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from kijito_pull.harnesses.base import Harness, Hook

HARNESSES = {
    "claude": "kijito_pull.harnesses.claude",
    "pi": "kijito_pull.harnesses.pi",
    "codex": "kijito_pull.harnesses.codex",
    "gemini": "kijito_pull.harnesses.gemini",
    "copilot": "kijito_pull.harnesses.copilot",
    "opencode": "kijito_pull.harnesses.opencode",
    "kilo": "kijito_pull.harnesses.kilo",
    "kimi": "kijito_pull.harnesses.kimi",
    "qwen": "kijito_pull.harnesses.qwen",
    "daemon": "kijito_pull.harnesses.daemon",
}


def names() -> tuple[str, ...]:
    return tuple(HARNESSES)


def get(name: str) -> Harness:
    """The harness called `name`; KeyError for an unknown one."""
    package = HARNESSES[name]
    __import__(package)
    return sys.modules[package].HARNESS


def all_harnesses() -> list[Harness]:
    return [get(name) for name in HARNESSES]


def find_hook(name: str) -> tuple[Harness, Hook] | None:
    """The harness and hook entry a `kijito-pull hook NAME` runs, or None (imports only that harness)."""
    owner = name.split("-", 1)[0]
    if owner not in HARNESSES:
        return None
    harness = get(owner)
    hook = harness.hook(name)
    return (harness, hook) if hook is not None else None


def hook_names() -> tuple[str, ...]:
    return tuple(hook.name for harness in all_harnesses() for hook in harness.hooks)


def wiring(harness: str, environ: Mapping[str, str] | None = None, cwd: str | None = None) -> list[Any]:
    """Where `harness` is wired (or has a settings file that could be): `installkit.Wiring` rows, read-only.

    `environ` (default: this process's) supplies HOME, PATH and the harnesses' own overrides; `cwd`
    (default: the current directory) selects the project. Raises ValueError for an unknown harness."""
    import os

    if harness not in HARNESSES:
        raise ValueError(f"unknown harness {harness!r}; expected one of {', '.join(HARNESSES)}")
    return get(harness).wiring(dict(os.environ) if environ is None else environ, cwd or os.getcwd())


__all__ = ["HARNESSES", "all_harnesses", "find_hook", "get", "hook_names", "names", "wiring"]
