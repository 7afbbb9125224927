"""The install sequence every installer ends with, once (kijito_pull.harnesses.installkit has the parts):
`--command` and the argv words it names (`command_prefix`), the note for a command that is not on PATH,
and the tails -- plan, diff, dry run, back up, the harness's own steps, write, result
(`install_tail`); dry run, undo, result (`uninstall_tail`). The settings-file kit
(kijito_pull.harnesses.settingshooks) and the installers of files of kijito-pull's own (OpenCode's plugin)
end through these, so a dry run's answer and the order "back up, then write" are the same everywhere.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installfolders
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.installkit import InstallError, Outcome, Result


def add_command_argument(parser: Any, runs: str = "the hooks") -> None:
    """`--command`: the kijito-pull command `runs` (what a harness runs: its hooks, its plugin)."""
    parser.add_argument("--command", metavar="CMD",
                        help=f"the kijito-pull command {runs} run (default: kijito-pull's launcher, which runs this "
                             f"installation by absolute path, else kijito-pull from PATH, else uvx)")


def command_prefix(command: str | None) -> list[str]:
    """The argv words `--command` names, else this installation by absolute path (the installers' default is
    the launcher, plugin_files.launcher_command, which runs this installation first)."""
    if command:
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise InstallError(f"--command: {exc}", ExitCode.USAGE) from None
        if not words:
            raise InstallError("--command is empty", ExitCode.USAGE)
        return words
    return common.this_command()


def note_command(outcome: Outcome, prefix: Sequence[str], environ: Mapping[str, str], runs: str = "the hooks") -> None:
    """Say so when the command `runs` (the hooks, the plugin) would run is not an executable on this PATH."""
    exe, exists = common.command_executable(shlex.join(prefix), environ)
    if not exists:
        outcome.notes.append(f"`{exe}` is not an executable on this PATH: {runs} would fail until it is")


def settle_folders(request: Any, outcome: Outcome) -> None:
    """After a real install: remember the folders it created. After a real uninstall: remove those of the
    harness's folders that are empty now, and say so (kijito_pull.harnesses.installfolders)."""
    made = installfolders.take()
    if request.dry_run:
        return
    if request.action == "install":
        installfolders.record(request.environ, request.harness, made)
    elif outcome.result == Result.UNINSTALLED:
        removed = installfolders.remove_created(request.environ, request.harness)
        if removed:
            outcome.notes.append(f"removed the empty folders the install created: {', '.join(removed)}")


def discard_folders() -> None:
    """After a run that did not finish (an InstallError): the empty folders it made are removed, none is
    remembered, so the next run records only its own."""
    installfolders.remove_made()


def again(request: Any, *extra: str) -> str:
    """The command that repeats `request` in the same scope: `kijito-pull install opencode --project DIR`
    (DIR only when the request named another folder than the current one), so advice to run it again never
    drops the scope the user chose."""
    words = ["kijito-pull", request.action, request.harness]
    if request.scope == common.PROJECT:
        words.append("--project")
        if request.project is not None and Path(request.project) != Path(request.cwd).resolve():
            words.append(str(request.project))
    elif request.scope == common.USER:
        words.append("--user")
    return shlex.join([*words, *extra])


def install_tail(outcome: Outcome, dry_run: bool, before: bytes | None, new: bytes, *,
                 plan: Callable[[], Any] | None = None, back_up: Callable[[], Path | None] | None = None,
                 prepare: Callable[[], Any] | None = None, update: bool = False) -> Outcome:
    """The end every install that writes one file (outcome.path) shares, once it knows the file's bytes
    `before` and `new`: the diff; the harness's `plan()` (notes, a refusal: InstallError); a dry run stops
    here (WOULD_INSTALL, or WOULD_UPDATE with `update`); else `back_up()` keeps what uninstall gives back
    (a path it returns is listed as a backup), `prepare()` runs the harness's own steps, and the file is
    written (atomically, keeping its mode): INSTALLED, or UPDATED with `update`."""
    outcome.diffs.append(common.diff(outcome.path, before, new))
    if plan is not None:
        plan()
    if dry_run:
        outcome.result = Result.WOULD_UPDATE if update else Result.WOULD_INSTALL
        return outcome
    if back_up is not None:
        kept = back_up()
        if kept is not None:
            outcome.backups.append(kept)
    if prepare is not None:
        prepare()
    common.write_bytes(outcome.path, new)
    outcome.result = Result.UPDATED if update else Result.INSTALLED
    return outcome


def uninstall_tail(outcome: Outcome, dry_run: bool, undo: Callable[[], Any]) -> Outcome:
    """The end every uninstall shares, once its diffs are planned: a dry run stops (WOULD_UNINSTALL); else
    `undo()` gives the files back and the result is UNINSTALLED."""
    if dry_run:
        outcome.result = Result.WOULD_UNINSTALL
        return outcome
    undo()
    outcome.result = Result.UNINSTALLED
    return outcome
