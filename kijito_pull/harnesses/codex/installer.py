"""`kijito-pull install codex`: SessionStart, Stop and SessionEnd hooks in Codex's hooks.json, and,
when asked, Codex's trust in exactly those hooks.

    --user           $CODEX_HOME/hooks.json (default ~/.codex/hooks.json)
    --project        <project>/.codex/hooks.json
    --trust          record Codex's trust for the hooks written (config.toml, by `codex app-server`)
    --trust-project  record the project itself as trusted (Codex reads a project's hooks only then)

Codex reads Claude Code's hook vocabulary there:

    {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "... hook codex-session-start",
                                            "timeout": 15}]}],
               "Stop":         [{"hooks": [{"type": "command", "command": "... hook codex-stop", "timeout": 15}]}],
               "SessionEnd":   [{"hooks": [{"type": "command", "command": "... hook codex-session-end",
                                            "timeout": 5}]}]}}

The command is this installation's kijito-pull by absolute path (a Codex started from a desktop
launcher may not have your shell's PATH); `--command kijito-pull` writes the bare name instead, e.g.
for a hooks file committed to a shared repository. Nothing else in the file is touched.

Codex runs only hooks the user trusted (codex.trust): every install asks Codex how it sees the hooks
and says what it will skip; `--trust` records trust for exactly the hooks written (no one else's), and a
re-install that changed a hook says its trust must be renewed. Without `codex` on PATH the install
refuses (the hooks could be neither checked nor trusted) unless `--no-codex` says to write them anyway.
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
from kijito_pull.harnesses.codex import HARNESS
from kijito_pull.harnesses.installkit import PROJECT, USER, InstallError, Outcome, Result, Wiring

NAME = HARNESS.name
#: The hooks hooks.json runs (the watcher, `codex-watch`, is started by codex-session-start instead).
INSTALLED = ("codex-session-start", "codex-stop", "codex-session-end")
#: Codex event -> the hook of ours that answers it (from the Harness's hook entries).
EVENTS = {hook.event: hook.name for hook in HARNESS.hooks if hook.name in INSTALLED}
TIMEOUT = 15  # seconds; the hooks give up within their own 8 s budget
#: SessionEnd's own bound: settling reads no network, and Codex waits for it while the session closes
#: (Codex's default for SessionEnd is 1 s, too tight for an interpreter start on a busy machine).
TIMEOUTS = {"SessionEnd": 5}
_OURS = re.compile(r"(?:^|[\s/'\"])(?:kijito-pull|kijito_pull)['\"]?\s+hook\s+(" + "|".join(INSTALLED) + r")\b")


def codex_home(environ: Mapping[str, str]) -> Path:
    raw = environ.get("CODEX_HOME", "").strip()
    return common.expand(raw, environ) if raw else common.home(environ) / ".codex"


def hooks_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return codex_home(environ) / "hooks.json" if scope == USER else project / ".codex" / "hooks.json"


def hook_name(command: Any) -> str | None:
    """"codex-session-start" / "codex-stop" when `command` runs one of our hooks, else None."""
    if not isinstance(command, str):
        return None
    match = _OURS.search(command)
    return match.group(1) if match else None


def command_line(prefix: Sequence[str], hook: str) -> str:
    return shlex.join([*prefix, "hook", hook])


def our_handlers(data: Any) -> dict[str, list[dict[str, Any]]]:
    """Event -> our handler objects found in a hooks.json object."""
    out: dict[str, list[dict[str, Any]]] = {}
    events = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(events, dict):
        return out
    for event, groups in events.items():
        if not isinstance(groups, list):
            continue
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler in handlers if isinstance(handlers, list) else []:
                if isinstance(handler, dict) and hook_name(handler.get("command")):
                    out.setdefault(event, []).append(handler)
    return out


def with_ours(data: dict[str, Any], prefix: Sequence[str]) -> dict[str, Any]:
    """`data` with exactly one handler of ours per event, running `prefix`: an existing one is updated
    in place (e.g. a kijito-pull that moved), a missing one is added as its own group at the end."""
    out = json.loads(json.dumps(data))
    events = out.get("hooks")
    if not isinstance(events, dict):
        events = out["hooks"] = {}
    for event, hook in EVENTS.items():
        groups = events.get(event)
        if not isinstance(groups, list):
            groups = events[event] = []
        want = {"type": "command", "command": command_line(prefix, hook), "timeout": TIMEOUTS.get(event, TIMEOUT)}
        found = False
        emptied = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            kept = []
            for handler in handlers:
                if isinstance(handler, dict) and hook_name(handler.get("command")) == hook:
                    if found:
                        continue  # a second copy of our hook: Codex would run both
                    handler = {**handler, "command": want["command"]}
                    found = True
                kept.append(handler)
            if handlers and not kept:
                emptied.append(id(group))
            group["hooks"] = kept
        if not found:
            groups.append({"hooks": [want]})
        events[event] = [g for g in groups if id(g) not in emptied]
    return out


def without_ours(data: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    events = out.get("hooks")
    if not isinstance(events, dict):
        return out
    for event, groups in list(events.items()):
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(handlers, list):
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
    project = common.project_root(cwd)
    out = []
    for scope in (PROJECT, USER):
        path = hooks_path(scope, environ, project)
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
        missing = [e for e, hook in EVENTS.items() if not any(hook_name(h.get("command")) == hook
                                                               for h in found.get(e, []))]
        if missing:
            details.append(f"no kijito-pull hook on {', '.join(missing)}"
                           + (f" (an older install: run `kijito-pull install codex --{scope}` again)"
                              if missing == ["SessionEnd"] else ""))
        misplaced = [e for e, hs in found.items() for h in hs
                     if e not in EVENTS or EVENTS[e] != hook_name(h.get("command"))]
        if misplaced:
            details.append(f"a kijito-pull hook is on the wrong event ({', '.join(sorted(set(misplaced)))})")
        if not exists:
            details.append(f"`{command}` does not exist: run `kijito-pull install codex --{scope}` again")
        # SessionEnd only settles sooner what a deadline would settle anyway: without it (installs from
        # before it existed) the hooks still deliver, so they count as wired.
        wired = not [e for e in missing if e != "SessionEnd"]
        out.append(Wiring(NAME, scope, wired, str(path), command, exists, "; ".join(details)))
    return out


# -- install / uninstall -----------------------------------------------------------------------------------


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


def add_arguments(parser: Any, action: str) -> None:
    if action == "install":
        parser.add_argument("--command", metavar="CMD",
                            help="the kijito-pull command the hooks run (default: this installation, by absolute path)")
        parser.add_argument("--trust", action="store_true",
                            help="Codex: record trust for exactly the hooks written (Codex skips untrusted hooks)")
        parser.add_argument("--trust-project", action="store_true",
                            help="Codex, with --project: record the project itself as trusted (Codex reads a "
                                 "project's .codex/hooks.json only in a trusted project)")
        parser.add_argument("--no-codex", action="store_true",
                            help="Codex: write the hooks even though `codex` is not on PATH (they cannot be "
                                 "checked or trusted until it is)")


def codex_path(environ: Mapping[str, str]) -> str | None:
    """The `codex` install and doctor ask: $KIJITO_PULL_CODEX, else `codex` on PATH."""
    forced = environ.get("KIJITO_PULL_CODEX", "").strip()
    return common.which(forced or "codex", environ)


def _scope_flag(scope: str) -> str:
    return "--user" if scope == USER else "--project"


def _trust_step(request: InstallRequest, outcome: Outcome, codex: str, path: Path) -> None:
    """Ask Codex how it sees the hooks just written; record trust when asked; say what Codex will skip."""
    from kijito_pull.harnesses.codex import trust

    project = common.project_root(request.cwd) if request.scope == USER else request.project
    flag = _scope_flag(request.scope)
    try:
        if request.option("trust_project"):
            trust.trust_project(codex, project, request.environ)
            outcome.notes.append(f"Codex now trusts the project {project}")
        if request.option("trust"):
            found = trust.trust(codex, str(project), request.environ, [path], is_ours=is_ours)
            if found.ok:
                outcome.notes.append(f"Codex trusts kijito-pull's {len(found.ours)} hooks in {path}")
        else:
            found = trust.look(codex, str(project), request.environ, [path], is_ours=is_ours)
    except trust.AppServerError as exc:
        outcome.notes.append(f"could not ask Codex whether it trusts the hooks ({exc}); check with `kijito-pull "
                             f"doctor`")
        return
    problem = found.problem()
    if problem:
        outcome.notes.append(f"{problem}: {found.fix(flag)}")


def is_ours(command: str) -> bool:
    return hook_name(command) is not None


def install(request: InstallRequest) -> Outcome:
    outcome, file = common.begin(request, hooks_path)
    environ, path = request.environ, outcome.path
    prefix = _prefix(request.option("command"))
    if is_installed(file.data, prefix):
        outcome.result = Result.ALREADY_INSTALLED
        codex = codex_path(environ)
        if codex is not None and not request.dry_run:
            _trust_step(request, outcome, codex, path)  # e.g. `install codex --trust` after the install
        return outcome
    new_data = with_ours(file.data, prefix)
    new = file.edited(new_data)
    outcome.diffs.append(common.diff(path, file.raw, new))
    exe, exists = common.command_executable(shlex.join(prefix), environ)
    if not exists:
        outcome.notes.append(f"`{exe}` is not an executable on this PATH: the hooks would fail until it is")
    codex = codex_path(environ)
    if codex is None and not request.option("no_codex"):
        raise InstallError("the `codex` command is not on PATH, so the hooks could be neither checked nor trusted: "
                           "install Codex first (npm install -g @openai/codex), set $KIJITO_PULL_CODEX to it, or "
                           "pass --no-codex to write them anyway", ExitCode.USAGE)
    if request.dry_run:
        outcome.result = Result.WOULD_INSTALL
        return outcome
    bak = common.back_up_before_install(path, file.raw, ours_already=bool(our_handlers(file.data)))
    if bak:
        outcome.backups.append(bak)
    common.write_bytes(path, new)
    outcome.result = Result.INSTALLED
    if codex is None:
        outcome.notes.append("`codex` is not on PATH: run `kijito-pull install codex "
                             f"{_scope_flag(request.scope)} --trust` once it is (Codex skips untrusted hooks)")
    else:
        _trust_step(request, outcome, codex, path)
    return outcome


def uninstall(request: InstallRequest) -> Outcome:
    outcome, file = common.begin(request, hooks_path)
    path = outcome.path
    if not our_handlers(file.data):
        outcome.result = Result.NOT_INSTALLED
        return outcome
    new, how = common.restore_after_uninstall(file, without_ours(file.data), dry_run=request.dry_run)
    outcome.diffs.append(common.diff(path, file.raw, new))
    if request.dry_run:
        outcome.result = Result.WOULD_UNINSTALL
        return outcome
    common.note_restored(outcome, how, "hooks")
    outcome.result = Result.UNINSTALLED
    return outcome
