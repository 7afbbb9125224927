"""`kijito-pull install qwen`: SessionStart, UserPromptSubmit, Stop and SessionEnd hooks in Qwen Code's
settings.json.

    --user      $QWEN_HOME/settings.json (default ~/.qwen/settings.json)
    --project   <folder>/.qwen/settings.json (Qwen reads the one of the folder it is started in)

Qwen Code reads Claude Code's hook vocabulary there, timeouts in seconds (measured on 0.24.4):

    {"hooks": {"SessionStart":     [{"hooks": [{"type": "command", "command": "... hook qwen-session-start",
                                                "timeout": 15}]}],
               "UserPromptSubmit": [... "hook qwen-prompt" ...],
               "Stop":             [... "hook qwen-stop" ...],
               "SessionEnd":       [... "hook qwen-session-end", "timeout": 5 ...]}}

The settings edit and the install sequence are the kit's (kijito_pull.harnesses.settingshooks): nothing else
in the file is touched, uninstall gives it back byte for byte. This module adds what is Qwen's own: its paths,
and a note when Qwen's folder trust (off unless the user turned it on) would skip project hooks here
(kijito_pull.harnesses.qwen.checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.installkit import PROJECT, USER, Outcome
from kijito_pull.harnesses.qwen import HARNESS
from kijito_pull.harnesses.qwen.session import qwen_dir
from kijito_pull.harnesses.settingshooks import SettingsHooks

__all__ = ["PROJECT", "USER", "add_arguments", "install", "qwen_dir", "settings_path", "uninstall", "wiring"]

def settings_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return qwen_dir(environ) / "settings.json" if scope == USER else project / ".qwen" / "settings.json"


def _trust_note(request: InstallRequest, outcome: Outcome) -> None:
    if request.scope != PROJECT:
        return
    from kijito_pull.harnesses.qwen import checks

    folder = request.project if request.project is not None else common.default_project(False, request.cwd)
    why = checks.untrusted(request.environ, folder)
    if why:
        outcome.notes.append(f"{why}: {checks.TRUST_FIX}")


# Qwen writes `"$version": 4` into a settings file that lacks it (its settings migration, measured on 0.24.4), the
# project file the install created too: uninstall still removes that file when nothing else is left in it.
INSTALLED = ("qwen-session-start", "qwen-prompt", "qwen-stop", "qwen-session-end")  # qwen-watch is started by us
KIT = SettingsHooks(HARNESS, settings_path, hooks=INSTALLED, timeout=15, timeouts={"SessionEnd": 5}, after=_trust_note,
                    already=_trust_note, theirs=("$version",))
EVENTS = KIT.events  # Qwen event -> the hook of ours that answers it
install, uninstall, wiring, add_arguments = KIT.install, KIT.uninstall, KIT.wiring, KIT.add_arguments
