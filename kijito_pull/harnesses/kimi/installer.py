"""`kijito-pull install kimi`: UserPromptSubmit, Stop and SessionEnd hooks as `[[hooks]]` tables in Kimi Code
CLI's config.toml.

    --user      $KIMI_CODE_HOME/config.toml (default ~/.kimi-code/config.toml), the only place Kimi reads
                hooks from (measured on 2.1.0: `[[hooks]]` in a project's `.kimi-code/config.toml` or
                `local.toml` never run), so there is no `--project`

    [[hooks]]
    event = "UserPromptSubmit"
    command = "... hook kimi-prompt"
    timeout = 15                      # seconds (Kimi's unit; 1 to 600)

The edit and the install sequence are the TOML kit's (kijito_pull.harnesses.tomlhooks): the file is edited as
text, nothing else in it is touched, uninstall gives it back byte for byte. Kimi reads config.toml when a
session starts: a session already running keeps the hooks it had (`/reload` in its TUI reads them again).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.installkit import PROJECT, USER, InstallError, Outcome, Wiring
from kijito_pull.harnesses.kimi import HARNESS
from kijito_pull.harnesses.kimi.record import kimi_home
from kijito_pull.harnesses.tomlhooks import TomlHooks

__all__ = ["USER", "add_arguments", "config_path", "install", "uninstall", "wiring"]


def config_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return kimi_home(environ) / "config.toml"


KIT = TomlHooks(HARNESS, config_path, hooks=("kimi-prompt", "kimi-stop", "kimi-session-end"),
                timeout=15, timeouts={"SessionEnd": 5})
add_arguments = KIT.add_arguments


def _user_only(request: InstallRequest) -> None:
    if request.scope == PROJECT:
        where = kimi_home(request.environ) / "config.toml"
        raise InstallError(f"Kimi Code CLI reads hooks only from its user config ({where}), "
                           f"never from a project's .kimi-code folder: run `kijito-pull {request.action} kimi --user` "
                           f"(the project still opts in through its AGENTS.md)", ExitCode.USAGE)


def install(request: InstallRequest) -> Outcome:
    _user_only(request)
    return KIT.install(request)


def uninstall(request: InstallRequest) -> Outcome:
    _user_only(request)
    return KIT.uninstall(request)


def wiring(environ: Mapping[str, str], cwd: str) -> list[Wiring]:
    return KIT.wiring(environ, cwd)
