"""Does Gemini CLI trust a folder? Read, and recorded only when asked, the way Gemini CLI itself does it.

Gemini CLI refuses to run headless in a folder it does not trust (`gemini -p` exits 55: "Gemini CLI is not
running in a trusted directory"), and asks in its TUI (measured on 0.61.0, docs/gemini.md); so hooks in
such a folder never run. Its rules, read from its own code (0.61.0, `checkPathTrust`, `isPathTrusted`):

- `GEMINI_RESTRICTED_MODE=true` or `GEMINI_CLI_TRUST_WORKSPACE=false`: not trusted;
  `GEMINI_CLI_TRUST_WORKSPACE=true`: trusted;
- folder trust switched off (`security.folderTrust.enabled: false` in settings.json): trusted;
- else the rules of `trustedFolders.json` (`$GEMINI_CLI_TRUSTED_FOLDERS_PATH`, else `~/.gemini/`, where
  `$GEMINI_CLI_HOME` stands for `~`): `{"<abs dir>": "TRUST_FOLDER" | "TRUST_PARENT" | "DO_NOT_TRUST"}`;
  the longest rule whose folder (its parent for TRUST_PARENT) holds the folder decides, symlinks
  resolved; no rule: not trusted (Gemini asks).

    verdict(environ, folder)   what Gemini would decide, and why
    plan(environ, folder)      the trustedFolders.json that trusts `folder` (bytes before and after), the
                               entry Gemini's own trust dialog writes (`"<folder>": "TRUST_FOLDER"`, two-space
                               JSON, the file private), every other entry kept byte for byte
    record(plan)               write it (`kijito-pull install gemini --trust` only: never silently)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kijito_pull.harnesses import installkit as common

TRUST_ENV = "GEMINI_CLI_TRUST_WORKSPACE"
RESTRICTED_ENV = "GEMINI_RESTRICTED_MODE"
FOLDERS_ENV = "GEMINI_CLI_TRUSTED_FOLDERS_PATH"
HOME_ENV = "GEMINI_CLI_HOME"
TRUST_FOLDER = "TRUST_FOLDER"
TRUST_PARENT = "TRUST_PARENT"
DO_NOT_TRUST = "DO_NOT_TRUST"
LEVELS = (TRUST_FOLDER, TRUST_PARENT, DO_NOT_TRUST)


def gemini_dir(environ: Mapping[str, str]) -> Path:
    """Gemini CLI's own folder: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`."""
    raw = environ.get(HOME_ENV, "").strip()
    base = common.expand(raw, environ) if raw else common.home(environ)
    return base / ".gemini"


def folders_path(environ: Mapping[str, str]) -> Path:
    raw = environ.get(FOLDERS_ENV, "").strip()
    return common.expand(raw, environ) if raw else gemini_dir(environ) / "trustedFolders.json"


@dataclass(frozen=True)
class Verdict:
    """What Gemini CLI decides for a folder: trusted or not, and the sentence that says why."""

    trusted: bool
    why: str


def _folder_trust_enabled(environ: Mapping[str, str]) -> bool:
    data, _problem = common.read_for_wiring(gemini_dir(environ) / "settings.json")
    security = data.get("security") if isinstance(data, dict) else None
    folder_trust = security.get("folderTrust") if isinstance(security, dict) else None
    enabled = folder_trust.get("enabled") if isinstance(folder_trust, dict) else None
    return enabled is not False


def _real(path: str) -> str:
    return os.path.realpath(path) if os.path.exists(path) else os.path.abspath(path)


def _holds(parent: str, child: str) -> bool:
    rel = os.path.relpath(child, parent)
    return rel == "." or not (rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel))


def rules(environ: Mapping[str, str]) -> dict[str, str]:
    """The rules of trustedFolders.json (folder -> level); raises InstallError when it cannot be read
    (Gemini CLI itself then stops: "Please fix the configuration file")."""
    found = common.read_json(folders_path(environ))
    return {str(k): v for k, v in found.data.items()}


def verdict(environ: Mapping[str, str], folder: os.PathLike | str) -> Verdict:
    place = str(folder)
    if environ.get(RESTRICTED_ENV) == "true" or environ.get(TRUST_ENV) == "false":
        which = RESTRICTED_ENV if environ.get(RESTRICTED_ENV) == "true" else TRUST_ENV
        return Verdict(False, f"${which} says not to trust any folder")
    if environ.get(TRUST_ENV) == "true":
        return Verdict(True, f"${TRUST_ENV}=true trusts every folder")
    if not _folder_trust_enabled(environ):
        return Verdict(True, "folder trust is switched off in Gemini's settings (security.folderTrust.enabled)")
    path = folders_path(environ)
    try:
        found = rules(environ)
    except common.InstallError as exc:
        return Verdict(False, f"{exc}; Gemini CLI stops until it is fixed")
    bad = [k for k, v in found.items() if v not in LEVELS]
    if bad:
        return Verdict(False, f"{path} has an invalid trust level for {bad[0]!r}; Gemini CLI stops until it is "
                              f"fixed")
    here = _real(place)
    best: tuple[int, str, str] | None = None
    for rule, level in found.items():
        effective = os.path.dirname(rule) if level == TRUST_PARENT else rule
        if _holds(_real(effective), here) and (best is None or len(rule) > best[0]):
            best = (len(rule), rule, level)
    if best is None:
        return Verdict(False, f"no rule in {path} covers {place}")
    _, rule, level = best
    if level == DO_NOT_TRUST:
        return Verdict(False, f"{path} says DO_NOT_TRUST for {rule}")
    return Verdict(True, f"{path} says {level} for {rule}")


@dataclass
class Plan:
    """The trustedFolders.json that trusts one folder: its path, bytes now (None: absent) and after."""

    path: Path
    folder: str
    before: bytes | None
    after: bytes

    @property
    def changes(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return common.diff(self.path, self.before, self.after)


def plan(environ: Mapping[str, str], folder: os.PathLike | str) -> Plan:
    """Raises InstallError when the file cannot be parsed (it is never rewritten then)."""
    path = folders_path(environ)
    file = common.read_json(path)
    key = _real(str(folder))  # Gemini's dialog records process.cwd(), the folder with symlinks resolved
    data: dict[str, Any] = dict(file.data)
    if data.get(key) == TRUST_FOLDER:
        return Plan(path, key, file.raw, file.raw if file.raw is not None else b"")
    data[key] = TRUST_FOLDER
    after = json.dumps(data, indent=2).encode("utf-8") if file.raw is None else file.edited(data)
    return Plan(path, key, file.raw, after)


def record(planned: Plan) -> None:
    if planned.changes:
        common.write_bytes(planned.path, planned.after, 0o600)  # private, as Gemini CLI makes it


__all__ = ["Plan", "Verdict", "folders_path", "gemini_dir", "plan", "record", "rules", "verdict"]
