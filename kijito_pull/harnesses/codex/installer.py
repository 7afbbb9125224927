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

The command is kijito-pull's launcher in its data folder, which runs this installation's kijito-pull by
absolute path (a Codex started from a desktop launcher may not have your shell's PATH); `--command
kijito-pull` writes the bare name instead, e.g.
for a hooks file committed to a shared repository. Nothing else in the file is touched.

Codex runs only hooks the user trusted (codex.trust): every install asks Codex how it sees the hooks
and says what it will skip; `--trust` records trust for exactly the hooks written (no one else's), and a
re-install that changed a hook says its trust must be renewed. Without `codex` on PATH the install
refuses (the hooks could be neither checked nor trusted) unless `--no-codex` says to write them anyway;
a dry run says so and exits 0, like Claude Code's and pi's ("the real install would stop here").

The settings edit and the install sequence are the kit's (kijito_pull.harnesses.settingshooks); this
module adds what is Codex's own: its paths, the `codex` check before writing and the trust step after.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.codex import HARNESS
from kijito_pull.harnesses.installkit import USER, InstallError, Outcome
from kijito_pull.harnesses.settingshooks import SettingsHooks

NAME = HARNESS.name
#: The hooks hooks.json runs (the watcher, `codex-watch`, is started by codex-session-start instead).
INSTALLED = ("codex-session-start", "codex-stop", "codex-session-end")
TIMEOUT = 15  # seconds; the hooks give up within their own 8 s budget
#: SessionEnd's own bound: settling reads no network, and Codex waits for it while the session closes
#: (Codex's default for SessionEnd is 1 s, too tight for an interpreter start on a busy machine).
TIMEOUTS = {"SessionEnd": 5}


def codex_home(environ: Mapping[str, str]) -> Path:
    raw = environ.get("CODEX_HOME", "").strip()
    return common.expand(raw, environ) if raw else common.home(environ) / ".codex"


def hooks_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return codex_home(environ) / "hooks.json" if scope == USER else project / ".codex" / "hooks.json"


def add_arguments(parser: Any, action: str) -> None:
    if action == "install":
        SettingsHooks.add_command_argument(parser)
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
            outcome.changed.append("Codex's trust of the project")
        if request.option("trust"):
            found = trust.trust(codex, str(project), request.environ, [path], is_ours=is_ours)
            if found.ok:
                outcome.notes.append(f"Codex trusts kijito-pull's {len(found.ours)} hooks in {path}")
                if found.recorded:
                    outcome.changed.append("Codex's trust of the hooks")
        else:
            found = trust.look(codex, str(project), request.environ, [path], is_ours=is_ours)
    except trust.AppServerError as exc:
        outcome.notes.append(f"could not ask Codex whether it trusts the hooks ({exc}); check with `kijito-pull "
                             f"doctor`")
        return
    problem = found.problem()
    if problem:
        outcome.notes.append(f"{problem}: {found.fix(flag)}")


_MISSING = ("the `codex` command is not on PATH, so the hooks could be neither checked nor trusted: install Codex "
            "first (npm install -g @openai/codex), set $KIJITO_PULL_CODEX to it, or pass --no-codex to write them "
            "anyway")


def _check(request: InstallRequest, outcome: Outcome) -> None:
    """Before writing: without `codex` (and no --no-codex) the install refuses; a dry run says it would."""
    if codex_path(request.environ) is not None or request.option("no_codex"):
        return
    if request.dry_run:
        outcome.notes.append("the `codex` command is not on PATH: the real install would stop here (or pass "
                             "--no-codex to write the hooks anyway)")
        return
    raise InstallError(_MISSING, ExitCode.USAGE)


def _after(request: InstallRequest, outcome: Outcome) -> None:
    codex = codex_path(request.environ)
    if codex is None:
        outcome.notes.append("`codex` is not on PATH: run `kijito-pull install codex "
                             f"{_scope_flag(request.scope)} --trust` once it is (Codex skips untrusted hooks)")
    else:
        _trust_step(request, outcome, codex, outcome.path)


def _already(request: InstallRequest, outcome: Outcome) -> None:
    codex = codex_path(request.environ)
    if codex is not None:
        _trust_step(request, outcome, codex, outcome.path)  # e.g. `install codex --trust` after the install


KIT = SettingsHooks(HARNESS, hooks_path, hooks=INSTALLED, timeout=TIMEOUT, timeouts=TIMEOUTS,
                    optional=("SessionEnd",),  # only settles sooner what a deadline settles anyway
                    check=_check, after=_after, already=_already)
#: Codex event -> the hook of ours that answers it.
EVENTS = KIT.events
hook_name, is_ours, command_line = KIT.hook_name, KIT.is_ours, KIT.command_line
our_handlers, with_ours, without_ours = KIT.our_handlers, KIT.with_ours, KIT.without_ours
is_installed = KIT.is_installed
install, uninstall, wiring = KIT.install, KIT.uninstall, KIT.wiring
