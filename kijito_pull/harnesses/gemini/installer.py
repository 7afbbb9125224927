"""`kijito-pull install gemini`: SessionStart, AfterAgent and SessionEnd hooks in Gemini CLI's settings.json,
and, when asked, Gemini's trust in the project folder.

    --user      $GEMINI_CLI_HOME/.gemini/settings.json (default ~/.gemini/settings.json)
    --project   <folder>/.gemini/settings.json (Gemini reads the one of the folder it is started in)
    --trust     record that Gemini CLI trusts the project folder (trustedFolders.json), as its own trust
                dialog does: without it `gemini -p` refuses to start there (exit 55) and no hook runs

Gemini CLI reads Claude Code's hook vocabulary there, with its timeouts in milliseconds:

    {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "... hook gemini-session-start",
                                            "timeout": 15000}]}],
               "AfterAgent":   [... "hook gemini-after-agent" ...],
               "SessionEnd":   [... "hook gemini-session-end", "timeout": 5000 ...]}}

The command is this installation's kijito-pull by absolute path; `--command kijito-pull` writes the bare name
instead. Nothing else in the file is touched (its other settings, its formatting); uninstall gives it back
byte for byte when nothing else changed meanwhile (installkit.restore_after_uninstall). The folder trust is
Gemini's record of the user's own decision, so uninstall leaves it; every install says whether Gemini
trusts the folder, and trust is written only with `--trust`, never silently.

The settings edit, the install sequence and the wiring look are the harness kit's
(kijito_pull.harnesses.settingshooks); what is Gemini's own here is where the file is and the trust step.
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

NAME = HARNESS.name
TIMEOUT_MS = 15000  # Gemini's timeouts are in milliseconds; the hooks give up within their own 8 s budget
#: SessionEnd reads no network; Gemini waits for it while the session closes.
TIMEOUTS_MS = {"SessionEnd": 5000}


def settings_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return trust.gemini_dir(environ) / "settings.json" if scope == USER else project / ".gemini" / "settings.json"


def add_arguments(parser: Any, action: str) -> None:
    if action == "install":
        SettingsHooks.add_command_argument(parser)
        parser.add_argument("--trust", action="store_true",
                            help="Gemini CLI: record that it trusts the project folder (trustedFolders.json), as its "
                                 "own trust dialog does; without trust `gemini -p` refuses to start there")


def _folder(request: InstallRequest) -> Path:
    return request.project if request.project is not None else common.default_project(False, request.cwd)


def _planned(request: InstallRequest) -> trust.Plan | None:
    """With --trust, the trustedFolders.json that trusts the folder (None: not asked, or trusted already).
    Raises InstallError for a file that cannot be parsed, before anything is written."""
    if not request.option("trust") or trust.verdict(request.environ, _folder(request)).trusted:
        return None
    return trust.plan(request.environ, _folder(request))


def _check(request: InstallRequest, outcome: Outcome) -> None:
    """Before anything is written: a trust file that cannot be parsed stops the install; a dry run shows
    the trust it would record, or says Gemini does not trust the folder."""
    planned = _planned(request)
    if request.dry_run:
        if planned is not None:
            outcome.diffs.append(planned.diff())
        else:
            _say_trust(request, outcome)


def _after(request: InstallRequest, outcome: Outcome) -> None:
    """Once the hooks are written (or found installed): record trust when asked; say how Gemini sees it."""
    planned = _planned(request)
    if planned is None:
        _say_trust(request, outcome)
        return
    trust.record(planned)
    after = trust.verdict(request.environ, _folder(request))
    outcome.notes.append(f"Gemini CLI now trusts {planned.folder} (recorded in {planned.path}, as its trust dialog "
                         f"does)" if after.trusted else
                         f"recorded trust for {planned.folder} in {planned.path}, but Gemini CLI still does not "
                         f"trust {_folder(request)}: {after.why}")


def _say_trust(request: InstallRequest, outcome: Outcome) -> None:
    folder = _folder(request)
    seen = trust.verdict(request.environ, folder)
    if seen.trusted:
        outcome.notes.append(f"Gemini CLI trusts {folder} ({seen.why})")
        return
    flag = "--user" if request.scope == USER else "--project"
    outcome.notes.append(f"Gemini CLI does not trust {folder} ({seen.why}), so it runs no hook there (`gemini -p` "
                         f"exits 55): run `kijito-pull install gemini {flag} --trust`, or trust it in Gemini")


KIT = SettingsHooks(HARNESS, settings_path, timeout=TIMEOUT_MS, timeouts=TIMEOUTS_MS,
                    optional=("SessionEnd",),  # only settles sooner what a deadline settles anyway
                    check=_check, after=_after, already=_after)
#: Gemini event -> the hook of ours that answers it.
EVENTS = KIT.events
hook_name, is_ours, command_line = KIT.hook_name, KIT.is_ours, KIT.command_line
our_handlers, with_ours, without_ours, is_installed = KIT.our_handlers, KIT.with_ours, KIT.without_ours, \
    KIT.is_installed
install, uninstall, wiring = KIT.install, KIT.uninstall, KIT.wiring

__all__ = ["EVENTS", "PROJECT", "USER", "add_arguments", "install", "settings_path", "uninstall", "wiring"]
