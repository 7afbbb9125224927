"""`kijito-pull install copilot`: SessionStart, Stop and SessionEnd hooks for GitHub Copilot CLI, in a hooks
file of kijito-pull's own.

    --user      $COPILOT_HOME/hooks/kijito-pull.json (default ~/.copilot/hooks/kijito-pull.json)
    --project   <repository>/.github/hooks/kijito-pull.json

Copilot CLI reads every `*.json` in those folders (measured on 1.0.102), so kijito-pull writes a file of
its own there and touches none of yours. It is in Claude Code's format, which Copilot reads too and which
gives the hooks snake_case input:

    {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "... hook copilot-session-start",
                                            "timeout": 15}]}],
               "Stop":         [... "hook copilot-stop" ...],
               "SessionEnd":   [... "hook copilot-session-end", "timeout": 5 ...]}}

Uninstall removes the file (and the `hooks/` folder when the install made it and nothing else is in it).
A file of that name that holds hooks other than kijito-pull's is never overwritten or removed.

User hooks run in every folder; Copilot CLI runs a repository's `.github/hooks` in `copilot -p` only in a
trusted folder (`--trust-folder`, `COPILOT_ALLOW_ALL=true`, or `trustedFolders` in ~/.copilot/config.json),
and skips them without a word otherwise: the install says so.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses import sourceflags
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.copilot import HARNESS
from kijito_pull.harnesses.copilot.hooks import copilot_home
from kijito_pull.harnesses.installkit import PROJECT, USER, InstallError, Outcome, Result, Wiring
from kijito_pull.harnesses.settingshooks import SettingsHooks

NAME = HARNESS.name
FILE = "kijito-pull.json"
EVENTS = {hook.event: hook.name for hook in HARNESS.hooks}
TIMEOUT = 15
TIMEOUTS = {"SessionEnd": 5}
_OURS = re.compile(r"(?:^|[\s/'\"])(?:kijito-pull|kijito_pull)['\"]?\s+hook\s+("
                   + "|".join(map(re.escape, EVENTS.values())) + r")\b")


def hooks_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return (copilot_home(environ) if scope == USER else project / ".github") / "hooks" / FILE


def hook_name(command: Any) -> str | None:
    match = _OURS.search(command) if isinstance(command, str) else None
    return match.group(1) if match else None


def content(prefix: Sequence[str], tail: Sequence[str] = ()) -> dict[str, Any]:
    return {"hooks": {event: [{"hooks": [{"type": "command", "command": shlex.join([*prefix, "hook", hook, *tail]),
                                          "timeout": TIMEOUTS.get(event, TIMEOUT)}]}]
                      for event, hook in EVENTS.items()}}


def commands(data: Any) -> list[Any]:
    """Every handler command in a hooks file (anything that is not a handler object counts as someone's)."""
    out: list[Any] = []
    events = data.get("hooks") if isinstance(data, dict) else None
    for groups in events.values() if isinstance(events, dict) else [None]:
        for group in groups if isinstance(groups, list) else [None]:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler in handlers if isinstance(handlers, list) else [None]:
                out.append(handler.get("command") if isinstance(handler, dict) else None)
    return out


def only_ours(data: Any) -> bool:
    found = commands(data)
    return bool(found) and all(hook_name(c) for c in found)


def _read(path: Path) -> common.JsonFile:
    file = common.read_json(path)
    if file.exists and not only_ours(file.data):
        raise InstallError(f"{path} holds hooks that are not kijito-pull's; it is left as it is (move it, or "
                           f"rename it, then run this again)", ExitCode.USAGE)
    return file


def wiring(environ: Mapping[str, str], cwd: str) -> list[Wiring]:
    project = common.project_root(cwd)
    out = []
    for scope in (PROJECT, USER):
        path = hooks_path(scope, environ, project)
        data, problem = common.read_for_wiring(path)
        if problem is not None:
            out.append(Wiring(NAME, scope, False, str(path), None, False, problem))
            continue
        found = [c for c in commands(data) if hook_name(c)] if path.exists() else []
        if not found:
            continue
        command, exists = common.command_executable(found[0], environ)
        missing = sorted(set(EVENTS.values()) - {hook_name(c) for c in found})
        details = [f"no {', '.join(missing)}: run `kijito-pull install copilot --{scope}` again"] if missing else []
        if scope == PROJECT:
            details.append("`copilot -p` runs a repository's hooks only in a trusted folder")
        if not exists:
            details.append(f"`{command}` does not exist: run `kijito-pull install copilot --{scope}` again")
        out.append(Wiring(NAME, scope, "copilot-session-start" not in missing and "copilot-stop" not in missing,
                          str(path), command, exists, "; ".join(details)))
    return out


def add_arguments(parser: Any, action: str) -> None:
    if action == "install":
        SettingsHooks.add_command_argument(parser)


def install(request: InstallRequest) -> Outcome:
    path = hooks_path(request.scope, request.environ, request.project)
    outcome = Outcome(request.harness, request.scope, request.action, path=path)
    file = _read(path)
    prefix = SettingsHooks.prefix(request.option("command"))
    new = common.dump(content(prefix, sourceflags.source_flags(request)))
    if file.raw == new:
        outcome.result = Result.ALREADY_INSTALLED
        return outcome
    outcome.diffs.append(common.diff(path, file.raw, new))
    exe, exists = common.command_executable(shlex.join(prefix), request.environ)
    if not exists:
        outcome.notes.append(f"`{exe}` is not an executable on this PATH: the hooks would fail until it is")
    if request.scope == PROJECT:
        outcome.notes.append("Copilot CLI runs a repository's .github/hooks in `copilot -p` only in a trusted folder "
                             "(--trust-folder, COPILOT_ALLOW_ALL=true, or trustedFolders in ~/.copilot/config.json), "
                             "and skips them without a word otherwise; --user hooks run everywhere")
    if request.dry_run:
        outcome.result = Result.WOULD_INSTALL
        return outcome
    common.write_bytes(path, new)
    outcome.result = Result.INSTALLED
    return outcome


def uninstall(request: InstallRequest) -> Outcome:
    path = hooks_path(request.scope, request.environ, request.project)
    outcome = Outcome(request.harness, request.scope, request.action, path=path)
    file = _read(path)
    if not file.exists:
        outcome.result = Result.NOT_INSTALLED
        return outcome
    outcome.diffs.append(common.diff(path, file.raw, None))
    if request.dry_run:
        outcome.result = Result.WOULD_UNINSTALL
        return outcome
    path.unlink()
    for folder in (path.parent, path.parent.parent) if request.scope == PROJECT else (path.parent,):
        try:
            folder.rmdir()  # only when empty
        except OSError:
            break
    outcome.notes.append(f"{path} removed")
    outcome.result = Result.UNINSTALLED
    return outcome


__all__ = ["content", "hooks_path", "install", "uninstall", "wiring"]
