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
from kijito_pull.harnesses.installkit import PROJECT, USER, InstallError, Outcome

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


def wiring(environ: Mapping[str, str], cwd: str) -> list[Any]:
    from kijito_pull.harnesses.registry import Wiring

    command, exists = common.command_executable(bin_command(environ), environ)
    if " " in bin_command(environ) and not exists:  # KIJITO_PULL_BIN is one path, spaces and all
        command, exists = bin_command(environ), common.which(bin_command(environ), environ) is not None
    out = []
    here = Path(os.path.abspath(cwd))
    places = [(PROJECT, folder) for folder in common.project_dirs(cwd)] + [(USER, here)]
    for scope, project in places:
        path = settings_path(scope, environ, project)
        try:
            data = common.read_json(path).data
        except InstallError as exc:
            out.append(Wiring("pi", scope, False, str(path), command, exists, str(exc)))
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
            out.append(Wiring("pi", scope, bool(entries), str(path), command, exists, "; ".join(details)))
        copied = extensions_dir(scope, environ, project) / EXTENSION
        if copied.is_file():
            out.append(Wiring("pi", scope, True, str(copied), command, exists, "the extension file, copied by hand"))
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
    ran = common.run([pi, "--version"], {**environ, "PI_OFFLINE": environ.get("PI_OFFLINE", "1")}, project, 60)
    match = re.search(r"(\d+)\.(\d+)", ran.output)
    return int(match.group(1)) if ran.code == 0 and match else None


def _argv(pi: str | None, verb: str, scope: str, package: Path, major: int | None) -> list[str]:
    argv = [pi or "pi", verb, str(package)]
    if scope == PROJECT:
        argv.append("-l")
        if major is not None and major >= 1:
            argv.append("--approve")  # pi 1.x: -l in an untrusted project needs it; the user asked for it
    return argv


def install(scope: str, environ: Mapping[str, str], project: Path, *, dry_run: bool = False,
            bin_path: str | None = None) -> Outcome:
    from kijito_pull.harnesses import plugin_files

    path = settings_path(scope, environ, project)
    outcome = Outcome("pi", scope, "install", path=path)
    file = common.read_json(path)
    folder = package_dir(environ)
    files = plugin_files.pi_files()
    stale = common.materialize(folder, files, dry_run=True)
    mine = our_entries(file.data, path, environ, only_ours=True)
    outcome.notes.append(f"package files: {folder}" + (f" ({', '.join(stale)} new)" if stale else ""))
    if mine:
        if stale and not dry_run:
            common.materialize(folder, files)
        outcome.result = ("would_update" if dry_run else "updated") if stale else "already_installed"
        return outcome
    pi = _pi(environ, bin_path)
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
    if dry_run:
        outcome.result = "would_install"
        if pi is None:
            outcome.notes.append("the `pi` command is not on PATH: the real install would stop here")
        return outcome
    if pi is None:
        raise InstallError(MANUAL.format(package=folder, flag="-l " if scope == PROJECT else "",
                                         extension=folder / "extensions" / EXTENSION,
                                         extensions=extensions_dir(scope, environ, project)), 2)
    common.materialize(folder, files)
    for argv in outcome.commands:
        ran = common.run(argv, {**environ, "PI_OFFLINE": environ.get("PI_OFFLINE", "1")}, project)
        if ran.code != 0:
            raise InstallError(f"`{common.shown(argv)}` failed (exit {ran.code}): {ran.output[-800:]}", 1)
    after = common.read_json(path)
    if not our_entries(after.data, path, environ, only_ours=True):
        raise InstallError(f"pi did not record the package in {path}; run `pi list` to see why", 1)
    final = file.edited(common.reorder_like(after.data, expected))
    if final != after.raw:
        common.write_bytes(path, final)
    if final != file.raw:
        bak = common.back_up_before_install(path, file.raw, ours_already=False)
        if bak:
            outcome.backups.append(bak)
    outcome.result = "installed"
    return outcome


def without_ours(data: dict[str, Any], path: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    mine = our_entries(out, path, environ, only_ours=True)
    if mine and isinstance(out.get("packages"), list):
        out["packages"] = [e for e in out["packages"] if e not in mine]
    return out


def uninstall(scope: str, environ: Mapping[str, str], project: Path, *, dry_run: bool = False,
              bin_path: str | None = None) -> Outcome:
    path = settings_path(scope, environ, project)
    outcome = Outcome("pi", scope, "uninstall", path=path)
    file = common.read_json(path)
    if not our_entries(file.data, path, environ, only_ours=True):
        outcome.result = "not_installed"
        others = our_entries(file.data, path, environ)
        if others:
            outcome.notes.append(f"{path} lists a kijito-pull package kijito-pull did not install "
                                 f"({_source(others[0])}); `pi remove {_source(others[0])}` removes it")
        return outcome
    pi = _pi(environ, bin_path)
    if dry_run:
        major = _major(pi, environ, project) if pi else None
        outcome.commands = [_argv(pi, "remove", scope, package_dir(environ), major)]
        new, _how = common.restore_after_uninstall(file, without_ours(file.data, path, environ), dry_run=True)
        outcome.diffs.append(common.diff(path, file.raw, new))
        outcome.result = "would_uninstall"
        return outcome
    if pi is not None:
        argv = _argv(pi, "remove", scope, package_dir(environ), _major(pi, environ, project))
        outcome.commands = [argv]
        ran = common.run(argv, {**environ, "PI_OFFLINE": environ.get("PI_OFFLINE", "1")}, project)
        if ran.code != 0 and "No matching package" not in ran.output:
            raise InstallError(f"`{common.shown(argv)}` failed (exit {ran.code}): {ran.output[-800:]}", 1)
    else:
        outcome.notes.append("the `pi` command is not on PATH: the package was taken out of the settings file "
                             "directly")
    now = common.read_json(path)
    _new, how = common.restore_after_uninstall(file, without_ours(now.data, path, environ))
    outcome.notes.append({"restored": f"{path} restored byte for byte from before the install",
                          "removed": f"{path} removed (it did not exist before the install)",
                          "edited": f"kijito-pull's package removed from {path}"}[how.how])
    if how.backup:
        outcome.backups.append(how.backup)
    if package_dir(environ).exists():
        outcome.notes.append(f"kept: the package files in {package_dir(environ)} (other projects' installs may "
                             f"use them; nothing loads them otherwise)")
    outcome.result = "uninstalled"
    return outcome
