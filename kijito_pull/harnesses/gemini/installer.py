"""`kijito-pull install gemini`: SessionStart, AfterAgent and SessionEnd hooks in Gemini CLI's settings.json,
and, when asked, Gemini's trust in the project folder.

    --user      $GEMINI_CLI_HOME/.gemini/settings.json (default ~/.gemini/settings.json)
    --project   <folder>/.gemini/settings.json (Gemini reads the one of the folder it is started in)
    --trust     record that Gemini CLI trusts the project folder (trustedFolders.json), as its own trust
                dialog does: without it `gemini -p` refuses to start there (exit 55) and no hook runs

Gemini CLI reads Claude Code's hook vocabulary there, with its timeouts in milliseconds and a name per
handler:

    {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "name": "gemini-session-start",
                                            "command": "... hook gemini-session-start", "timeout": 15000}]}],
               "AfterAgent":   [... "hook gemini-after-agent" ...],
               "SessionEnd":   [... "hook gemini-session-end", "timeout": 5000 ...]}}

The settings edit and the install sequence are the kit's (kijito_pull.harnesses.settingshooks): nothing else
in the file is touched, uninstall gives it back byte for byte. This module adds what is Gemini's own: its
paths and the trust step. The folder trust is Gemini's record of the user's own decision, so uninstall
leaves it; every install says whether Gemini trusts the folder, and trust is written only with `--trust`,
never silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.gemini import HARNESS, trust
from kijito_pull.harnesses.installkit import PROJECT, USER, Outcome
from kijito_pull.harnesses.settingshooks import SettingsHooks

__all__ = ["PROJECT", "USER", "add_arguments", "install", "settings_path", "uninstall", "wiring"]


def settings_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return trust.gemini_dir(environ) / "settings.json" if scope == USER else project / ".gemini" / "settings.json"


def _trust_argument(parser: Any) -> None:
    parser.add_argument("--trust", action="store_true",
                        help="Gemini CLI: record that it trusts the project folder (trustedFolders.json), as its "
                             "own trust dialog does; without trust `gemini -p` refuses to start there")


def _trust(request: InstallRequest, outcome: Outcome) -> None:
    """Whether Gemini trusts the project folder, and with --trust the trustedFolders.json that makes it so:
    planned before the hooks are written (a file that cannot be parsed stops the install first), shown in a
    dry run's diff, written after the hooks."""
    folder = request.project if request.project is not None else common.default_project(False, request.cwd)
    seen = trust.verdict(request.environ, folder)
    planned = trust.plan(request.environ, folder) if request.option("trust") and not seen.trusted else None
    if seen.trusted:
        outcome.notes.append(f"Gemini CLI trusts {folder} ({seen.why})")
    elif planned is None:
        flag = "--user" if request.scope == USER else "--project"
        outcome.notes.append(f"Gemini CLI does not trust {folder} ({seen.why}), so it runs no hook there "
                             f"(`gemini -p` exits 55): run `kijito-pull install gemini {flag} --trust`, or trust "
                             f"it in Gemini")
    elif request.dry_run:
        outcome.diffs.append(planned.diff())
    else:
        trust.record(planned)
        outcome.changed.append(f"trust recorded in {planned.path}")
        after = trust.verdict(request.environ, folder)
        outcome.notes.append(f"Gemini CLI now trusts {planned.folder} (recorded in {planned.path}, as its trust "
                             f"dialog does)" if after.trusted else
                             f"recorded trust for {planned.folder} in {planned.path}, but Gemini CLI still does "
                             f"not trust {folder}: {after.why}")


def _check(request: InstallRequest, outcome: Outcome) -> None:
    if request.dry_run:
        _trust(request, outcome)
    elif request.option("trust"):
        trust.plan(request.environ, request.project or common.default_project(False, request.cwd))  # parses first


KIT = SettingsHooks(HARNESS, settings_path, timeout=15000, timeouts={"SessionEnd": 5000}, optional=("SessionEnd",),
                    named=True, check=_check, after=_trust, already=_trust, extra_arguments=_trust_argument)
EVENTS = KIT.events  # Gemini event -> the hook of ours that answers it
install, uninstall, wiring, add_arguments = KIT.install, KIT.uninstall, KIT.wiring, KIT.add_arguments
