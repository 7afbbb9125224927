"""`kijito-pull install copilot`: SessionStart, Stop and SessionEnd hooks for GitHub Copilot CLI in a hooks file
of kijito-pull's own, its extension (the way new mail gets in while a session is open), and, when asked,
Copilot's trust in the repository.

    --user      $COPILOT_HOME/hooks/kijito-pull.json (default ~/.copilot/hooks/kijito-pull.json), and the
                extension in $COPILOT_HOME/extensions/kijito-pull/extension.mjs
    --project   <repository>/.github/hooks/kijito-pull.json
    --trust     with --project: record that Copilot CLI trusts the repository (trustedFolders in
                ~/.copilot/config.json), as its own folder dialog does: without it `copilot -p` skips a
                repository's hooks without a word

Copilot CLI reads every `*.json` in those folders (measured on 1.0.102), so kijito-pull's file is its own and
touches none of yours; it is in Claude Code's format, which Copilot reads too and which gives the hooks
snake_case input. The edit and the install sequence are the kit's (kijito_pull.harnesses.settingshooks, a file
that holds only our hooks): a file of that name holding anyone else's hooks is refused, uninstall removes the
file and the folders the install made. What is Copilot's own: the extension (user scope only: Copilot does
not load a project's extensions in `-p`, and asks before it runs one in its terminal UI), which Copilot loads
only with `--experimental` (kept as "experimental": true in ~/.copilot/settings.json; the install says so
and never sets it), and the trust step (copilot/trust.py). Uninstall takes out exactly what install added.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses import plugin_files
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.copilot import HARNESS, trust
from kijito_pull.harnesses.copilot.session import copilot_home, experimental, extension_path, push_possible
from kijito_pull.harnesses.installkit import PROJECT, USER, Outcome
from kijito_pull.harnesses.settingshooks import SettingsHooks

FILE = "kijito-pull.json"
INSTALLED = ("copilot-session-start", "copilot-stop", "copilot-session-end")  # copilot-watch: started by a hook
EXTENSION_MARK = b"// kijito-pull for GitHub Copilot CLI"


def hooks_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return (copilot_home(environ) if scope == USER else project / ".github") / "hooks" / FILE


def _folders(scope: str, environ: Mapping[str, str], project: Path) -> list[Path]:
    hooks = hooks_path(scope, environ, project).parent
    return [hooks] if scope == USER else [hooks, hooks.parent]


#: Copilot's own ways to turn its experimental features on for good (measured on 1.0.102: each writes
#: "experimental": true to $COPILOT_HOME/settings.json, which `experimental()` reads; `--no-experimental` writes false).
TURN_ON = "run `copilot config experimental on` once (or start `copilot --experimental` once; both keep the setting)"
EXPERIMENTAL_NOTE = ("push is off for you: Copilot CLI loads the extension (new mail while a session is open) only "
                     f"with its experimental features, and they are off; to turn push on, {TURN_ON}. kijito-pull "
                     "does not set it. Without it the hooks still hand mail over at session start and before a stop")
EXPERIMENTAL_ON = ("push is on for you: Copilot CLI's experimental features are on, so it loads the extension "
                   "(new mail while a session is open)")
PROJECT_PUSH_NOTE = ("new mail while a session is open (push) needs kijito-pull's extension, which Copilot CLI loads "
                     "from your user folder only: run `kijito-pull install copilot --user` for it")


def _folder(request: InstallRequest) -> Path:
    return request.project if request.project is not None else common.default_project(True, request.cwd)


def _trust_argument(parser: Any) -> None:
    parser.add_argument("--trust", action="store_true",
                        help="Copilot CLI, with --project: record that it trusts the repository (trustedFolders in "
                             "~/.copilot/config.json), as its folder dialog does; without trust `copilot -p` skips "
                             "a repository's hooks")


def _extension(request: InstallRequest, outcome: Outcome) -> None:
    path = extension_path(request.environ)
    new = plugin_files.copilot_extension().read_bytes()
    old = common.read_bytes(path)
    if old == new:
        return
    if old is not None and not old.startswith(EXTENSION_MARK):
        outcome.notes.append(f"{path} is not kijito-pull's extension; it is left as it is (no push)")
        return
    if request.dry_run:
        outcome.diffs.append(common.diff(path, old, new))
        return
    common.write_bytes(path, new, 0o644)
    outcome.notes.append(f"the extension is in {path}")
    outcome.result = common.Result.INSTALLED


def _trust(request: InstallRequest, outcome: Outcome) -> None:
    folder = _folder(request)
    seen = trust.verdict(request.environ, folder)
    if seen.trusted:
        outcome.notes.append(f"Copilot CLI trusts {folder} ({seen.why})")
    elif not request.option("trust"):
        outcome.notes.append(f"Copilot CLI does not trust {folder} ({seen.why}), so `copilot -p` skips its "
                             f".github/hooks without a word: run `kijito-pull install copilot --project --trust`, "
                             f"trust it in Copilot, or install with --user")
    elif request.dry_run:
        config, new = trust.plan(request.environ, folder)
        outcome.diffs.append(common.diff(config.path, config.raw, new))
    else:
        path = trust.record(request.environ, folder)
        outcome.notes.append(f"Copilot CLI now trusts {folder} (recorded in {path}, as its folder dialog does)")
        outcome.changed.append(f"trust recorded in {path}")


def _own_steps(request: InstallRequest, outcome: Outcome) -> None:
    if request.scope == USER:
        _extension(request, outcome)
        outcome.notes.append(EXPERIMENTAL_ON if experimental(request.environ) else EXPERIMENTAL_NOTE)
    else:
        _trust(request, outcome)
        if not push_possible(request.environ):
            outcome.notes.append(PROJECT_PUSH_NOTE if not extension_path(request.environ).is_file()
                                 else EXPERIMENTAL_NOTE)


def _check(request: InstallRequest, outcome: Outcome) -> None:
    if request.dry_run:
        _own_steps(request, outcome)
    elif request.scope == PROJECT and request.option("trust"):
        trust.plan(request.environ, _folder(request))  # a config.json that cannot be parsed stops the install first


def _undo(request: InstallRequest, outcome: Outcome) -> None:
    if request.scope == USER:
        path = extension_path(request.environ)
        old = common.read_bytes(path)
        if old is None or not old.startswith(EXTENSION_MARK):
            return
        outcome.diffs.append(common.diff(path, old, None))
        if request.dry_run:
            return
        path.unlink()
        for folder in (path.parent, path.parent.parent):
            try:
                folder.rmdir()  # only when empty
            except OSError:
                break
        outcome.notes.append(f"{path} removed")
        outcome.result = common.Result.UNINSTALLED
        return
    undone = trust.forget(request.environ, dry_run=request.dry_run)
    if undone is not None:
        path, before, after = undone
        outcome.diffs.append(common.diff(path, before, after))
        if not request.dry_run:
            outcome.notes.append(f"the trust kijito-pull recorded is taken out of {path}")
            outcome.result = common.Result.UNINSTALLED


KIT = SettingsHooks(HARNESS, hooks_path, hooks=INSTALLED, timeouts={"SessionEnd": 5}, own_file=True,
                    folders_of=_folders, check=_check, after=_own_steps, already=_own_steps, undo=_undo,
                    extra_arguments=_trust_argument)
EVENTS = KIT.events  # Copilot event -> the hook of ours that answers it
install, uninstall, wiring, add_arguments = KIT.install, KIT.uninstall, KIT.wiring, KIT.add_arguments

__all__ = ["hooks_path", "install", "uninstall", "wiring"]
