"""Will Codex run kijito-pull's hooks? Asked of Codex itself (codex.appserver), for `install` and `doctor`.

Codex skips a hook the user has not trusted without a word (in `codex exec` too), marks a trusted hook
"modified" (skipped again) once its definition changes, e.g. when `install` points it at a kijito-pull
that moved, and reads a project's `.codex/hooks.json` only in a trusted project (measured on 0.171.0:
docs/codex.md). So:

    look(...)      our hooks as Codex lists them for a folder, each with its trust status, and the
                   hooks files of ours that Codex does not read at all (an untrusted project)
    trust(...)     record trust for exactly our hooks (their current hashes), only when the user asks
                   (`install codex --trust`); hooks of anyone else are never touched
    trust_project  record a project as trusted (`install codex --project --trust-project`)

`Look.problem` is one sentence for a person, `Look.fix` the command that mends it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kijito_pull.harnesses.codex import appserver
from kijito_pull.harnesses.codex.appserver import AppServerError, CodexHook


@dataclass
class Look:
    """What one look at Codex's hooks found: ours that Codex lists, and our hooks files it does not read."""

    ours: list[CodexHook] = field(default_factory=list)  # our hooks Codex lists
    unread: list[Path] = field(default_factory=list)  # hooks files of ours Codex does not read (untrusted project)
    recorded: int = 0  # hooks `trust()` recorded trust for (0: it found them trusted already)

    @property
    def untrusted(self) -> list[CodexHook]:
        return [h for h in self.ours if h.trust != appserver.TRUSTED]

    @property
    def ok(self) -> bool:
        return bool(self.ours) and not self.untrusted and not self.unread

    def problem(self) -> str | None:
        parts = []
        for path in self.unread:
            parts.append(f"Codex does not read {path}: the project {path.parent.parent} is not trusted")
        modified = [h for h in self.untrusted if h.trust == "modified"]
        others = [h for h in self.untrusted if h.trust != "modified"]
        if modified:
            parts.append(f"{_events(modified)} changed since you trusted {'it' if len(modified) == 1 else 'them'} "
                         f"(Codex skips a modified hook until it is trusted again)")
        if others:
            parts.append(f"{_events(others)} {'is' if len(others) == 1 else 'are'} not trusted "
                         f"(Codex skips untrusted hooks without a word)")
        return "; ".join(parts) or None

    def fix(self, scope_flag: str) -> str:
        if self.unread:
            return (f"trust the project in Codex (open it in `codex` once and accept), or run "
                    f"`kijito-pull install codex {scope_flag} --trust-project --trust`")
        return f"run `kijito-pull install codex {scope_flag} --trust`, or trust them in Codex's /hooks"


def _events(hooks: Sequence[CodexHook]) -> str:
    names = sorted({h.event for h in hooks})
    return f"kijito-pull's {', '.join(names)} hook{'s' if len(hooks) != 1 else ''}"


def _same_file(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return Path(a) == b


def look(codex: str, cwd: str, environ: Mapping[str, str], files: Sequence[Path], *,
         is_ours: Callable[[str], bool]) -> Look:
    """Our hooks (commands `is_ours` accepts, in one of `files`) as Codex sees them for a session in `cwd`."""
    listed = appserver.hooks(codex, cwd, environ)
    found = Look()
    for path in files:
        mine = [h for h in listed.hooks if _same_file(h.source_path, path) and is_ours(h.command)]
        if mine:
            found.ours += mine
        elif not any(_same_file(h.source_path, path) for h in listed.hooks):
            found.unread.append(path)
    return found


def trust(codex: str, cwd: str, environ: Mapping[str, str], files: Sequence[Path], *,
          is_ours: Callable[[str], bool]) -> Look:
    """Record trust for our hooks in `files` that are not trusted yet; the look after it."""
    before = look(codex, cwd, environ, files, is_ours=is_ours)
    if not before.untrusted:
        return before
    appserver.trust(codex, cwd, before.untrusted, environ)
    after = look(codex, cwd, environ, files, is_ours=is_ours)
    after.recorded = len(before.untrusted)
    return after


def trust_project(codex: str, project: Path, environ: Mapping[str, str]) -> None:
    appserver.write_config(codex, str(project), environ, "projects",
                           {str(project): {"trust_level": "trusted"}})


__all__ = ["AppServerError", "Look", "look", "trust", "trust_project"]
