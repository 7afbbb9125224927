"""`kijito-pull install gemini`: SessionStart, AfterAgent and SessionEnd hooks in Gemini CLI's settings.json,
and, when asked, Gemini's trust in the project folder.

    --user      $GEMINI_CLI_HOME/.gemini/settings.json (default ~/.gemini/settings.json)
    --project   <folder>/.gemini/settings.json (Gemini reads the one of the folder it is started in)
    --trust     record that Gemini CLI trusts the project folder (trustedFolders.json), as its own trust
                dialog does: without it `gemini -p` refuses to start there (exit 55) and no hook runs

Gemini CLI reads Claude Code's hook vocabulary there, with its timeouts in milliseconds:

    {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "name": "gemini-session-start",
                                            "command": "... hook gemini-session-start", "timeout": 15000}]}],
               "AfterAgent":   [... "hook gemini-after-agent" ...],
               "SessionEnd":   [... "hook gemini-session-end", "timeout": 5000 ...]}}

The command is this installation's kijito-pull by absolute path; `--command kijito-pull` writes the bare name
instead. Nothing else in the file is touched (its other settings, its formatting); uninstall gives it back
byte for byte when nothing else changed meanwhile (installkit.restore_after_uninstall). The folder trust is
Gemini's record of the user's own decision, so uninstall leaves it; every install says whether Gemini
trusts the folder, and trust is written only with `--trust`, never silently.

The settings edit below is the one every settings-file hook harness needs (Codex's hooks.json has its own
copy bound to its events); it is meant to move onto the shared harness kit (installkit) once that gives
one edit for every such harness.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.gemini import HARNESS, trust
from kijito_pull.harnesses.installkit import PROJECT, USER, InstallError, Outcome, Result, Wiring

NAME = HARNESS.name
#: Gemini event -> the hook of ours that answers it.
EVENTS = {hook.event: hook.name for hook in HARNESS.hooks}
TIMEOUT_MS = 15000  # the hooks give up within their own 8 s budget
#: SessionEnd reads no network; Gemini waits for it while the session closes.
TIMEOUTS_MS = {"SessionEnd": 5000}
_OURS = re.compile(r"(?:^|[\s/'\"])(?:kijito-pull|kijito_pull)['\"]?\s+hook\s+("
                   + "|".join(map(re.escape, EVENTS.values())) + r")\b")


def settings_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return trust.gemini_dir(environ) / "settings.json" if scope == USER else project / ".gemini" / "settings.json"


# -- the settings edit -----------------------------------------------------------------------------------


def hook_name(command: Any) -> str | None:
    """"gemini-session-start" / ... when `command` runs one of our hooks, else None."""
    match = _OURS.search(command) if isinstance(command, str) else None
    return match.group(1) if match else None


def is_ours(command: str) -> bool:
    return hook_name(command) is not None


def command_line(prefix: Sequence[str], hook: str) -> str:
    return shlex.join([*prefix, "hook", hook])


def _handlers(group: Any) -> list[Any] | None:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return handlers if isinstance(handlers, list) else None


def our_handlers(data: Any) -> dict[str, list[dict[str, Any]]]:
    """Event -> our handler objects found in a settings object."""
    out: dict[str, list[dict[str, Any]]] = {}
    events = data.get("hooks") if isinstance(data, dict) else None
    for event, groups in events.items() if isinstance(events, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for handler in _handlers(group) or ():
                if isinstance(handler, dict) and hook_name(handler.get("command")):
                    out.setdefault(event, []).append(handler)
    return out


def with_ours(data: dict[str, Any], prefix: Sequence[str]) -> dict[str, Any]:
    """`data` with exactly one handler of ours per event, running `prefix`: an existing one is updated in
    place (a kijito-pull that moved), a missing one is added as its own group at the end."""
    out = json.loads(json.dumps(data))
    events = out.get("hooks")
    if not isinstance(events, dict):
        events = out["hooks"] = {}
    for event, hook in EVENTS.items():
        groups = events.get(event)
        if not isinstance(groups, list):
            groups = events[event] = []
        command = command_line(prefix, hook)
        found = False
        emptied = []
        for group in groups:
            handlers = _handlers(group)
            if handlers is None:
                continue
            kept = []
            for handler in handlers:
                if isinstance(handler, dict) and hook_name(handler.get("command")) == hook:
                    if found:
                        continue  # a second copy of our hook: Gemini would run both
                    handler = {**handler, "command": command}
                    found = True
                kept.append(handler)
            if handlers and not kept:
                emptied.append(id(group))
            group["hooks"] = kept
        if not found:
            groups.append({"hooks": [{"type": "command", "name": hook, "command": command,
                                      "timeout": TIMEOUTS_MS.get(event, TIMEOUT_MS)}]})
        events[event] = [g for g in groups if id(g) not in emptied]
    return out


def without_ours(data: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    events = out.get("hooks")
    for event, groups in list(events.items()) if isinstance(events, dict) else ():
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            handlers = _handlers(group)
            if handlers is not None:
                left = [h for h in handlers if not (isinstance(h, dict) and hook_name(h.get("command")))]
                if not left and handlers:
                    continue  # a group that only held our hook goes with it
                group = {**group, "hooks": left}
            kept.append(group)
        events[event] = kept
    return out


def is_installed(data: Any, prefix: Sequence[str] | None = None) -> bool:
    found = our_handlers(data)
    for event, hook in EVENTS.items():
        handlers = [h for h in found.get(event, []) if hook_name(h.get("command")) == hook]
        if len(handlers) != 1:
            return False
        if prefix is not None and handlers[0].get("command") != command_line(prefix, hook):
            return False
    return True


# -- wiring (read-only, for doctor) -----------------------------------------------------------------------


def wiring(environ: Mapping[str, str], cwd: str) -> list[Wiring]:
    project = common.default_project(False, cwd)
    out = []
    for scope in (PROJECT, USER):
        path = settings_path(scope, environ, project)
        data, problem = common.read_for_wiring(path)
        if problem is not None:
            out.append(Wiring(NAME, scope, False, str(path), None, False, problem))
            continue
        found = our_handlers(data)
        if not found:
            if path.exists():
                out.append(Wiring(NAME, scope, False, str(path), None, False, "no kijito-pull hooks here"))
            continue
        commands = [h.get("command") for hs in found.values() for h in hs]
        command, exists = common.command_executable(commands[0], environ)
        details = []
        missing = [e for e, hook in EVENTS.items()
                   if not any(hook_name(h.get("command")) == hook for h in found.get(e, []))]
        if missing:
            details.append(f"no kijito-pull hook on {', '.join(missing)}: run `kijito-pull install gemini "
                           f"--{scope}` again")
        misplaced = sorted({e for e, hs in found.items() for h in hs if EVENTS.get(e) != hook_name(h.get("command"))})
        if misplaced:
            details.append(f"a kijito-pull hook is on the wrong event ({', '.join(misplaced)})")
        if not exists:
            details.append(f"`{command}` does not exist: run `kijito-pull install gemini --{scope}` again")
        wired = not [e for e in missing if e != "SessionEnd"]  # SessionEnd only settles sooner
        out.append(Wiring(NAME, scope, wired, str(path), command, exists, "; ".join(details)))
    return out


# -- install / uninstall -----------------------------------------------------------------------------------


def add_arguments(parser: Any, action: str) -> None:
    if action == "install":
        parser.add_argument("--command", metavar="CMD",
                            help="the kijito-pull command the hooks run (default: this installation, by absolute path)")
        parser.add_argument("--trust", action="store_true",
                            help="Gemini CLI: record that it trusts the project folder (trustedFolders.json), as its "
                                 "own trust dialog does; without trust `gemini -p` refuses to start there")


def _prefix(command: str | None) -> list[str]:
    if command:
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise InstallError(f"--command: {exc}", ExitCode.USAGE) from None
        if not words:
            raise InstallError("--command is empty", ExitCode.USAGE)
        return words
    return common.this_command()


class _TrustStep:
    """Whether Gemini trusts the project folder, and with --trust the trustedFolders.json that would make it
    so: planned before anything is written (a file that cannot be parsed stops the install first), written
    after the hooks, shown in a dry run's diff."""

    def __init__(self, request: InstallRequest):
        self.request = request
        self.folder = request.project if request.project is not None else common.default_project(False, request.cwd)
        self.seen = trust.verdict(request.environ, self.folder)
        self.planned = trust.plan(request.environ, self.folder) if request.option("trust") and not self.seen.trusted \
            else None

    def apply(self, outcome: Outcome) -> None:
        folder, seen, planned = self.folder, self.seen, self.planned
        if seen.trusted:
            outcome.notes.append(f"Gemini CLI trusts {folder} ({seen.why})")
        elif planned is None:
            flag = "--user" if self.request.scope == USER else "--project"
            outcome.notes.append(f"Gemini CLI does not trust {folder} ({seen.why}), so it runs no hook there "
                                 f"(`gemini -p` exits 55): run `kijito-pull install gemini {flag} --trust`, or trust "
                                 f"it in Gemini")
        elif self.request.dry_run:
            outcome.diffs.append(planned.diff())
        else:
            trust.record(planned)
            after = trust.verdict(self.request.environ, folder)
            outcome.notes.append(f"Gemini CLI now trusts {planned.folder} (recorded in {planned.path}, as its trust "
                                 f"dialog does)" if after.trusted else
                                 f"recorded trust for {planned.folder} in {planned.path}, but Gemini CLI still does "
                                 f"not trust {folder}: {after.why}")


def install(request: InstallRequest) -> Outcome:
    outcome, file = common.begin(request, settings_path)
    path = outcome.path
    prefix = _prefix(request.option("command"))
    step = _TrustStep(request)
    if is_installed(file.data, prefix):
        outcome.result = Result.ALREADY_INSTALLED
        step.apply(outcome)  # e.g. `install gemini --trust` after the install
        return outcome
    new = file.edited(with_ours(file.data, prefix))
    outcome.diffs.append(common.diff(path, file.raw, new))
    exe, exists = common.command_executable(shlex.join(prefix), request.environ)
    if not exists:
        outcome.notes.append(f"`{exe}` is not an executable on this PATH: the hooks would fail until it is")
    if request.dry_run:
        step.apply(outcome)
        outcome.result = Result.WOULD_INSTALL
        return outcome
    bak = common.back_up_before_install(path, file.raw, ours_already=bool(our_handlers(file.data)))
    if bak:
        outcome.backups.append(bak)
    common.write_bytes(path, new)
    outcome.result = Result.INSTALLED
    step.apply(outcome)
    return outcome


def uninstall(request: InstallRequest) -> Outcome:
    outcome, file = common.begin(request, settings_path)
    if not our_handlers(file.data):
        outcome.result = Result.NOT_INSTALLED
        return outcome
    new, how = common.restore_after_uninstall(file, without_ours(file.data), dry_run=request.dry_run)
    outcome.diffs.append(common.diff(outcome.path, file.raw, new))
    if request.dry_run:
        outcome.result = Result.WOULD_UNINSTALL
        return outcome
    if how.how == "removed" and request.scope == PROJECT:
        _remove_empty(outcome.path.parent)  # the project's .gemini/ that the install made
    common.note_restored(outcome, how, "hooks")
    outcome.result = Result.UNINSTALLED
    return outcome


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()  # only when empty: anything of Gemini's own in it stays
    except OSError:
        pass
