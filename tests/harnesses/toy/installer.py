"""The toy harness's installer: writes (and removes) `.toy/hooks.json` in the project or the home folder."""

from __future__ import annotations

import json
from pathlib import Path

from kijito_pull.harnesses import installkit
from kijito_pull.harnesses.installkit import Outcome, Result, Wiring


def _path(scope: str, environ, project: Path) -> Path:
    return (installkit.home(environ) if scope == installkit.USER else project) / ".toy" / "hooks.json"


def add_arguments(parser, action: str) -> None:
    if action == "install":
        parser.add_argument("--flavour", default="plain", help="what the toy hook tastes of")


def install(request) -> Outcome:
    path = _path(request.scope, request.environ, request.project)
    outcome = Outcome("toy", request.scope, "install", path=path)
    if path.exists():
        outcome.result = Result.ALREADY_INSTALLED
        return outcome
    data = {"command": "kijito-pull hook toy-stop", "flavour": request.option("flavour")}
    outcome.diffs.append(installkit.diff(path, None, installkit.dump(data)))
    if request.dry_run:
        outcome.result = Result.WOULD_INSTALL
        return outcome
    installkit.write_bytes(path, installkit.dump(data))
    outcome.result = Result.INSTALLED
    return outcome


def uninstall(request) -> Outcome:
    path = _path(request.scope, request.environ, request.project)
    outcome = Outcome("toy", request.scope, "uninstall", path=path)
    if not path.exists():
        outcome.result = Result.NOT_INSTALLED
        return outcome
    path.unlink()
    outcome.result = Result.UNINSTALLED
    return outcome


def wiring(environ, cwd: str) -> list[Wiring]:
    rows = []
    for scope in (installkit.PROJECT, installkit.USER):
        path = _path(scope, environ, Path(cwd))
        if path.exists():
            command = json.loads(path.read_text())["command"]
            exe, exists = installkit.command_executable(command, environ)
            rows.append(Wiring("toy", scope, True, str(path), exe, exists, ""))
    return rows
