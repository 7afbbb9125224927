"""The harness kit for a harness whose hooks live in a JSON settings file (Codex's hooks.json, and any
harness that reads Claude Code's hook vocabulary): the settings edit and the install sequence, once.

    {"hooks": {"<Event>": [{"hooks": [{"type": "command", "command": "<launcher> hook <name>",
                                       "timeout": 15}]}], ...}}

`SettingsHooks(harness, path_of)` gives such a harness its whole installer contract
(kijito_pull.harnesses.base): `install`, `uninstall`, `wiring` and `add_arguments` (`--command`), so a
harness's installer module is its settings path and one line binding these. What it does:

- the edit (`named`: handlers also carry our hook's name; `timeout`/`timeouts`: in the harness's unit):
  `our_handlers` (event -> our handler objects), `with_ours` (exactly one handler of ours per
  event, an existing one updated in place, a missing one added as its own group), `without_ours` (ours
  removed, a group that held only ours with them), `is_installed`; nothing else in the file is touched;
- the sequence: read (InstallError for a file that does not parse), already installed?, plan and diff,
  the harness's own `check(request, outcome)` (it may refuse with InstallError, or add notes and, in a
  dry run, the diffs of its own steps: also when the hooks are installed already), dry run stops here,
  back up, write, the harness's `after(request, outcome)`; uninstall gives the file back byte for byte
  from the install's backup when nothing else changed (installkit.restore_after_uninstall);
- the read-only wiring look `doctor` asks: where ours are, whether their command exists, events missing
  or misplaced (an `optional` event missing still counts as wired: an install older than that event);
- a file of kijito-pull's own (`own_file`: Copilot CLI reads every `*.json` in its hooks folders, so ours
  is a file apart): a file of that name that holds anyone else's handler is refused, never rewritten or
  removed, and once uninstall removed the file, `folders_of(scope, environ, project)` names the folders
  the install may have made, removed in that order while empty; `undo(request, outcome)` is the harness's
  own uninstall step (run whether or not the hooks were still there);
- `theirs`: top-level keys the harness writes into any settings file itself (Qwen Code's `$version`): a file
  the install created that holds nothing else once ours are out is removed all the same.

Which events: each `Hook` of the harness with `installed=True` (default: every hook), its event the
settings key. Our handlers are told by their command (`... kijito-pull hook <one of our names>`, or
`.../kijito-pull-launch hook ...`), so a kijito-pull that moved is found and updated. The command is
`--command` when given, else the launcher in kijito-pull's data folder (bin/kijito-pull-launch: the
installing kijito-pull first, then PATH's if its version fits, then `uvx`; see harnesses/launcher.py).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installflow as flow
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses import plugin_files, sourceflags
from kijito_pull.harnesses.installkit import PROJECT, USER, InstallError, Outcome, Result, Wiring

#: A harness step run by the install sequence: (the request, the outcome so far).
Step = Callable[[Any, Outcome], None]


class SettingsHooks:
    """One harness's hooks in one JSON settings file per scope (see the module docstring)."""

    def __init__(self, harness: Any, path_of: Callable[[str, Mapping[str, str], Path], Path], *,
                 hooks: Sequence[str] | None = None, timeout: int = 15, timeouts: Mapping[str, int] | None = None,
                 optional: Sequence[str] = (), check: Step | None = None, after: Step | None = None,
                 already: Step | None = None, named: bool = False,
                 extra_arguments: Callable[[Any], None] | None = None, own_file: bool = False,
                 folders_of: Callable[[str, Mapping[str, str], Path], Sequence[Path]] | None = None,
                 undo: Step | None = None, theirs: Sequence[str] = ()):
        self.name = harness.name
        self.repository = harness.project == "repository"  # where --project and the wiring look (base.REPOSITORY)
        self.named = named  # each handler of ours also carries `"name": <our hook>` (Gemini CLI shows it)
        self.extra_arguments = extra_arguments
        self.path_of = path_of
        names = tuple(hooks) if hooks is not None else tuple(h.name for h in harness.hooks)
        #: settings event -> the hook of ours that answers it
        self.events = {h.event: h.name for h in harness.hooks if h.name in names}
        if len(self.events) != len(names):
            raise ValueError(f"harness {self.name!r}: each settings event takes one hook of ours (pass hooks=...)")
        self.timeout = timeout
        self.timeouts = dict(timeouts or {})
        self.optional = tuple(optional)
        self.check, self.after, self.already = check, after, already
        self.own_file, self.folders_of, self.undo = own_file, folders_of, undo
        self.theirs = tuple(theirs)  # top-level keys the harness writes into any settings file itself
        self._ours = re.compile(r"(?:^|[\s/'\"])(?:kijito-pull|kijito_pull)(?:-launch)?['\"]?\s+hook\s+("
                                + "|".join(map(re.escape, self.events.values())) + r")\b")

    # -- the edit -------------------------------------------------------------------------------------------

    def hook_name(self, command: Any) -> str | None:
        """Our hook's name when `command` runs one of our hooks, else None."""
        match = self._ours.search(command) if isinstance(command, str) else None
        return match.group(1) if match else None

    def is_ours(self, command: str) -> bool:
        return self.hook_name(command) is not None

    @staticmethod
    def command_line(prefix: Sequence[str], hook: str, tail: Sequence[str] = ()) -> str:
        return shlex.join([*prefix, "hook", hook, *tail])

    def our_handlers(self, data: Any) -> dict[str, list[dict[str, Any]]]:
        """Event -> our handler objects found in a settings object."""
        out: dict[str, list[dict[str, Any]]] = {}
        events = data.get("hooks") if isinstance(data, dict) else None
        for event, groups in events.items() if isinstance(events, dict) else ():
            for group in groups if isinstance(groups, list) else ():
                handlers = group.get("hooks") if isinstance(group, dict) else None
                for handler in handlers if isinstance(handlers, list) else ():
                    if isinstance(handler, dict) and self.hook_name(handler.get("command")):
                        out.setdefault(event, []).append(handler)
        return out

    @staticmethod
    def handler_commands(data: Any) -> list[Any]:
        """Every handler's command in a settings object (anything that is not a handler object counts as
        someone's: None)."""
        out: list[Any] = []
        events = data.get("hooks") if isinstance(data, dict) else None
        for groups in events.values() if isinstance(events, dict) else [None]:
            for group in groups if isinstance(groups, list) else [None]:
                handlers = group.get("hooks") if isinstance(group, dict) else None
                for handler in handlers if isinstance(handlers, list) else [None]:
                    out.append(handler.get("command") if isinstance(handler, dict) else None)
        return out

    def refuse_foreign(self, file: common.JsonFile) -> None:
        """With `own_file`: InstallError for a file of our name that holds anything but our handlers."""
        if not self.own_file or not file.exists:
            return
        found = self.handler_commands(file.data)
        if not found or not all(self.hook_name(c) for c in found) or set(file.data) - {"hooks", "version"}:
            raise InstallError(f"{file.path} holds hooks that are not kijito-pull's; it is left as it is (move it, "
                               f"or rename it, then run this again)", ExitCode.USAGE)

    def with_ours(self, data: dict[str, Any], prefix: Sequence[str], tail: Sequence[str] = ()) -> dict[str, Any]:
        """`data` with exactly one handler of ours per event, running `prefix`: an existing one is updated
        in place (e.g. a kijito-pull that moved), a missing one is added as its own group at the end."""
        out = json.loads(json.dumps(data))
        events = out.get("hooks")
        if not isinstance(events, dict):
            events = out["hooks"] = {}
        for event, hook in self.events.items():
            groups = events.get(event)
            if not isinstance(groups, list):
                groups = events[event] = []
            want = {"type": "command", **({"name": hook} if self.named else {}),
                    "command": self.command_line(prefix, hook, tail), "timeout": self.timeouts.get(event, self.timeout)}
            found = False
            emptied = []
            for group in groups:
                handlers = group.get("hooks") if isinstance(group, dict) else None
                if not isinstance(handlers, list):
                    continue
                kept = []
                for handler in handlers:
                    if isinstance(handler, dict) and self.hook_name(handler.get("command")) == hook:
                        if found:
                            continue  # a second copy of our hook: the harness would run both
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

    def without_ours(self, data: dict[str, Any]) -> dict[str, Any]:
        out = json.loads(json.dumps(data))
        events = out.get("hooks")
        for event, groups in list(events.items()) if isinstance(events, dict) else ():
            if not isinstance(groups, list):
                continue
            kept = []
            for group in groups:
                handlers = group.get("hooks") if isinstance(group, dict) else None
                if isinstance(handlers, list):
                    left = [h for h in handlers if not (isinstance(h, dict) and self.hook_name(h.get("command")))]
                    if not left and handlers:
                        continue  # a group that only held our hook goes with it
                    group = {**group, "hooks": left}
                kept.append(group)
            events[event] = kept
        return out

    def is_installed(self, data: Any, prefix: Sequence[str] | None = None, tail: Sequence[str] = ()) -> bool:
        found = self.our_handlers(data)
        for event, hook in self.events.items():
            handlers = [h for h in found.get(event, []) if self.hook_name(h.get("command")) == hook]
            if len(handlers) != 1:
                return False
            if prefix is not None and handlers[0].get("command") != self.command_line(prefix, hook, tail):
                return False
        return True

    # -- wiring (read-only, for doctor) ---------------------------------------------------------------------

    def wiring(self, environ: Mapping[str, str], cwd: str) -> list[Wiring]:
        project = common.default_project(self.repository, cwd)
        out = []
        for scope in (PROJECT, USER):
            path = self.path_of(scope, environ, project)
            data, problem = common.read_for_wiring(path)
            if problem is not None:
                out.append(Wiring(self.name, scope, False, str(path), None, False, problem))
                continue
            found = self.our_handlers(data)
            if not found:
                if path.exists():
                    out.append(Wiring(self.name, scope, False, str(path), None, False, "no kijito-pull hooks here"))
                continue
            commands = [h.get("command") for hs in found.values() for h in hs]
            command, exists, how = plugin_files.hooks_command(commands[0], environ)
            again = f"run `kijito-pull install {self.name} --{scope}` again"
            details = []
            missing = [e for e, hook in self.events.items()
                       if not any(self.hook_name(h.get("command")) == hook for h in found.get(e, []))]
            if missing:
                details.append(f"no kijito-pull hook on {', '.join(missing)}"
                               + (f" (an older install: {again})" if set(missing) <= set(self.optional) else ""))
            misplaced = [e for e, hs in found.items() for h in hs
                         if e not in self.events or self.events[e] != self.hook_name(h.get("command"))]
            if misplaced:
                details.append(f"a kijito-pull hook is on the wrong event ({', '.join(sorted(set(misplaced)))})")
            if how is not None:
                details.append(f"hooks find kijito-pull {how}")
            elif not exists:
                details.append(f"`{command}` does not exist: {again}")
            wired = not [e for e in missing if e not in self.optional]
            out.append(Wiring(self.name, scope, wired, str(path), command, exists, "; ".join(details)))
        return out

    # -- install / uninstall ------------------------------------------------------------------------------------

    @staticmethod
    def add_command_argument(parser: Any) -> None:
        flow.add_command_argument(parser)
        sourceflags.add_source_arguments(parser)  # --source, --consumer: after each hook's name

    def add_arguments(self, parser: Any, action: str) -> None:
        if action == "install":
            self.add_command_argument(parser)
            if self.extra_arguments is not None:
                self.extra_arguments(parser)

    #: The argv words the hooks run with `--command` (without it: plugin_files.launcher_command).
    prefix = staticmethod(flow.command_prefix)

    def install(self, request: Any) -> Outcome:
        outcome, file = common.begin(request, self.path_of)
        self.refuse_foreign(file)
        path = outcome.path
        given = request.option("command")
        # --command as given; else the launcher (this installation first, then PATH, then uvx)
        prefix = self.prefix(given) if given else plugin_files.launcher_command(request.environ, request.dry_run)
        tail = sourceflags.source_flags(request)  # --source / --consumer, on each hook's command line
        if self.is_installed(file.data, prefix, tail):
            outcome.result = Result.ALREADY_INSTALLED
            if request.dry_run and self.check is not None:
                self.check(request, outcome)  # the harness's own steps may still have something to show
                if outcome.diffs:
                    outcome.result = Result.WOULD_INSTALL
            elif self.already is not None and not request.dry_run:
                self.already(request, outcome)
            return outcome

        def plan() -> None:
            if given:
                flow.note_command(outcome, prefix, request.environ)
            if self.check is not None:
                self.check(request, outcome)

        ours_already = bool(self.our_handlers(file.data))
        flow.install_tail(outcome, request.dry_run, file.raw, file.edited(self.with_ours(file.data, prefix, tail)),
                          plan=plan, back_up=lambda: common.back_up_before_install(path, file.raw, ours_already))
        if self.after is not None and not request.dry_run:
            self.after(request, outcome)
        return outcome

    def uninstall(self, request: Any) -> Outcome:
        outcome, file = common.begin(request, self.path_of)
        self.refuse_foreign(file)
        if not self.our_handlers(file.data):
            outcome.result = Result.NOT_INSTALLED
        else:
            new, how = common.restore_after_uninstall(file, self.without_ours(file.data), dry_run=request.dry_run,
                                                      theirs=self.theirs)
            outcome.diffs.append(common.diff(outcome.path, file.raw, new))

            def undo() -> None:
                common.note_restored(outcome, how, "hooks")
                if how.how == "removed" and self.folders_of is not None:
                    for folder in self.folders_of(request.scope, request.environ, request.project):
                        try:
                            folder.rmdir()  # only when empty
                        except OSError:
                            break

            flow.uninstall_tail(outcome, request.dry_run, undo)
        if self.undo is not None:
            self.undo(request, outcome)
        return outcome
