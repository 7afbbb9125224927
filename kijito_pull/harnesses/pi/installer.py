"""`kijito-pull install pi`: the extension as a pi package, through pi's own command.

    pi install <data dir>/pi          (--user: ~/.pi/agent/settings.json, or $PI_CODING_AGENT_DIR)
    pi install -l <data dir>/pi       (--project: <project>/.pi/settings.json)

The package (package.json with its "pi" block, and extensions/kijito-pull.ts) is copied from
kijito-pull's own files into its data folder first; pi records a local path in `packages` and loads
the extension from there at every start, so `kijito-pull install pi` after an upgrade refreshes it.
pi 1.x loads a project's packages only in a trusted project (`/trust`, or `pi --approve`), and its
`-l` commands need `--approve` in an untrusted one: we pass it, as the user asked for this project.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.installkit import PROJECT, USER, Outcome, Result, Wiring

NAME = "pi"

PACKAGE_NAME = "kijito-pull"
EXTENSION = "kijito-pull.ts"


def agent_dir(environ: Mapping[str, str]) -> Path:
    raw = environ.get("PI_CODING_AGENT_DIR", "").strip()
    return common.expand(raw, environ) if raw else common.home(environ) / ".pi" / "agent"


def settings_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return agent_dir(environ) / "settings.json" if scope == USER else project / ".pi" / "settings.json"


def extensions_dir(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    return agent_dir(environ) / "extensions" if scope == USER else project / ".pi" / "extensions"


def package_dir(environ: Mapping[str, str]) -> Path:
    return common.data_dir(environ) / "pi"


def _source(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("source"), str):
        return entry["source"]
    return None


def _local(source: str, base: Path, environ: Mapping[str, str]) -> Path | None:
    """The folder a local `packages` entry names (pi resolves relative ones against the settings
    folder); None for npm:, git: and URL sources."""
    if re.match(r"^(npm|git|https?|ssh|file):", source):
        return None
    path = common.expand(source, environ)
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def _is_kijito_package(folder: Path) -> bool:
    try:
        data = json.loads((folder / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("name") == PACKAGE_NAME and isinstance(data.get("pi"), dict)


def our_entries(data: Any, settings: Path, environ: Mapping[str, str], only_ours: bool = False) -> list[Any]:
    """The `packages` entries that are kijito-pull (ours, or any kijito-pull package unless only_ours)."""
    packages = data.get("packages") if isinstance(data, dict) else None
    if not isinstance(packages, list):
        return []
    mine = package_dir(environ)
    out = []
    for entry in packages:
        source = _source(entry)
        folder = _local(source, settings.parent, environ) if source else None
        if folder is None:
            if not only_ours and source and "kijito-pull" in source:
                out.append(entry)
            continue
        if folder == Path(os.path.normpath(mine)) or (not only_ours and _is_kijito_package(folder)):
            out.append(entry)
    return out


def our_entry(settings: Path, environ: Mapping[str, str]) -> str:
    """The entry `pi install <package dir>` writes: the path relative to the settings folder."""
    return os.path.relpath(package_dir(environ), settings.parent)


def bin_command(environ: Mapping[str, str]) -> str:
    return environ.get("KIJITO_PULL_BIN", "").strip() or "kijito-pull"


# -- wiring (read-only, for doctor) -----------------------------------------------------------------------


def wiring(environ: Mapping[str, str], cwd: str) -> list[Wiring]:
    command, exists = common.command_executable(bin_command(environ), environ)
    if " " in bin_command(environ) and not exists:  # KIJITO_PULL_BIN is one path, spaces and all
        command, exists = bin_command(environ), common.which(bin_command(environ), environ) is not None
    out = []
    here = Path(os.path.abspath(cwd))
    places = [(PROJECT, folder) for folder in common.project_dirs(cwd)] + [(USER, here)]
    for scope, project in places:
        path = settings_path(scope, environ, project)
        data, problem = common.read_for_wiring(path)
        if problem is not None:
            out.append(Wiring(NAME, scope, False, str(path), command, exists, problem))
            continue
        details = []
        entries = our_entries(data, path, environ)
        for entry in entries:
            folder = _local(_source(entry) or "", path.parent, environ)
            if folder is not None:
                details.append(f"package {folder}")
                if not (folder / "extensions" / EXTENSION).is_file():
                    details.append(f"but {folder} has no extensions/{EXTENSION} (run `kijito-pull install pi "
                                   f"--{scope}` again)")
        if scope == PROJECT and entries:
            details.append("pi 1.x loads a project's packages only once the project is trusted (/trust)")
            if project != here:
                details.append(f"pi reads it when started in {project}, not in {here}")
        if entries and not exists:
            details.append("the extension runs `kijito-pull` ($KIJITO_PULL_BIN, else PATH), and it is not found")
        if entries or path.exists():
            out.append(Wiring(NAME, scope, bool(entries), str(path), command, exists, "; ".join(details)))
        copied = extensions_dir(scope, environ, project) / EXTENSION
        if copied.is_file():
            out.append(Wiring(NAME, scope, True, str(copied), command, exists, "the extension file, copied by hand"))
    return out


# -- install / uninstall -----------------------------------------------------------------------------------


MANUAL = """\
pi's `pi` command is not on PATH. Install pi, or do it by hand:
  1. kijito-pull install pi --dry-run shows the package folder ({package})
  2. pi install {flag}{package}
  or copy {extension} into {extensions}/
(or pass the pi executable with --bin PATH)"""


def _pi(environ: Mapping[str, str], bin_path: str | None) -> str | None:
    return common.which(bin_path, environ) if bin_path else common.which("pi", environ)


def _major(pi: str, environ: Mapping[str, str], project: Path) -> int | None:
    ran = common.run([pi, "--version"], _offline(environ), project, 60)
    match = re.search(r"(\d+)\.(\d+)", ran.output)
    return int(match.group(1)) if ran.code == 0 and match else None


def _argv(pi: str | None, verb: str, scope: str, package: Path, major: int | None) -> list[str]:
    argv = [pi or "pi", verb, str(package)]
    if scope == PROJECT:
        argv.append("-l")
        if major is not None and major >= 1:
            argv.append("--approve")  # pi 1.x: -l in an untrusted project needs it; the user asked for it
    return argv


def add_arguments(parser: Any, action: str) -> None:
    parser.add_argument("--bin", metavar="PATH", help="the pi executable (default: `pi` on PATH)")


def _offline(environ: Mapping[str, str]) -> dict[str, str]:
    """pi's commands, kept from reaching the network (PI_OFFLINE=1 unless the caller chose otherwise)."""
    return {**environ, "PI_OFFLINE": environ.get("PI_OFFLINE", "1")}


def install(request: InstallRequest) -> Outcome:
    from kijito_pull.harnesses import plugin_files

    outcome, file = common.begin(request, settings_path)
    scope, environ, project, path = request.scope, request.environ, request.project, outcome.path
    folder, files = package_dir(environ), plugin_files.pi_files()
    stale = common.materialize(folder, files, dry_run=True)
    mine = our_entries(file.data, path, environ, only_ours=True)
    outcome.notes.append(f"package files: {folder}" + (f" ({', '.join(stale)} new)" if stale else ""))
    if mine:
        if stale and not request.dry_run:
            common.materialize(folder, files)
        updated = Result.WOULD_UPDATE if request.dry_run else Result.UPDATED
        outcome.result = updated if stale else Result.ALREADY_INSTALLED
        return outcome
    pi = _pi(environ, request.option("bin"))
    major = _major(pi, environ, project) if pi else None
    outcome.commands = [_argv(pi, "install", scope, folder, major)]
    expected = json.loads(json.dumps(file.data))
    packages = expected.get("packages")
    if not isinstance(packages, list):
        packages = expected["packages"] = []
    packages.append(our_entry(path, environ))
    outcome.diffs.append(common.diff(path, file.raw, file.edited(expected)))
    others = [e for e in our_entries(file.data, path, environ) if e not in mine]
    if others:
        outcome.notes.append(f"{path} already lists another kijito-pull package ({_source(others[0])}); pi would "
                             f"load the extension twice: remove it with `pi remove {_source(others[0])}`")
    if scope == PROJECT:
        outcome.notes.append("pi 1.x loads a project's packages only in a trusted project (/trust in pi, or "
                             "start it with --approve)")
    if common.dry_run_or_manual(outcome, request.dry_run, pi, "pi", lambda: MANUAL.format(
            package=folder, flag="-l " if scope == PROJECT else "", extension=folder / "extensions" / EXTENSION,
            extensions=extensions_dir(scope, environ, project))):
        return outcome
    common.materialize(folder, files)
    common.run_all(outcome.commands, _offline(environ), project)
    bak = common.keep_style_after(file, expected, lambda data: bool(our_entries(data, path, environ, only_ours=True)),
                                  f"pi did not record the package in {path}; run `pi list` to see why",
                                  ours_already=False)
    if bak:
        outcome.backups.append(bak)
    outcome.result = Result.INSTALLED
    return outcome


def without_ours(data: dict[str, Any], path: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    mine = our_entries(out, path, environ, only_ours=True)
    if mine and isinstance(out.get("packages"), list):
        out["packages"] = [e for e in out["packages"] if e not in mine]
    return out


def uninstall(request: InstallRequest) -> Outcome:
    outcome, file = common.begin(request, settings_path)
    scope, environ, project, path = request.scope, request.environ, request.project, outcome.path
    if not our_entries(file.data, path, environ, only_ours=True):
        outcome.result = Result.NOT_INSTALLED
        others = our_entries(file.data, path, environ)
        if others:
            outcome.notes.append(f"{path} lists a kijito-pull package kijito-pull did not install "
                                 f"({_source(others[0])}); `pi remove {_source(others[0])}` removes it")
        return outcome
    pi = _pi(environ, request.option("bin"))
    if request.dry_run:
        major = _major(pi, environ, project) if pi else None
        outcome.commands = [_argv(pi, "remove", scope, package_dir(environ), major)]
        new, _how = common.restore_after_uninstall(file, without_ours(file.data, path, environ), dry_run=True)
        outcome.diffs.append(common.diff(path, file.raw, new))
        outcome.result = Result.WOULD_UNINSTALL
        return outcome
    if pi is not None:
        argv = _argv(pi, "remove", scope, package_dir(environ), _major(pi, environ, project))
        outcome.commands = [argv]
        common.run_all(outcome.commands, _offline(environ), project,
                       tolerate=lambda _n, ran: "No matching package" in ran.output)
    else:
        outcome.notes.append("the `pi` command is not on PATH: the package was taken out of the settings file "
                             "directly")
    now = common.read_json(path)
    _new, how = common.restore_after_uninstall(file, without_ours(now.data, path, environ))
    common.note_restored(outcome, how, "package")
    if package_dir(environ).exists():
        outcome.notes.append(f"kept: the package files in {package_dir(environ)} (other projects' installs may "
                             f"use them; nothing loads them otherwise)")
    outcome.result = Result.UNINSTALLED
    return outcome
