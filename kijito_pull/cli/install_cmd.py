"""`kijito-pull install | uninstall NAME`: wire kijito-pull into a harness, or undo it.

The targets, their help lines and their own arguments come from the harness registry
(kijito_pull.harnesses.registry; each harness's `add_arguments`); the work is the harness's installer
(`Harness.install` / `uninstall`, one InstallRequest in, one typed Outcome out). This module parses,
prints what was done (or, with --dry-run, exactly what would be: the harness commands and a unified
diff per file) and maps an InstallError to its exit code.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kijito_pull.core import errors
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import registry
from kijito_pull.harnesses.base import REPOSITORY, Harness, InstallRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kijito_pull.harnesses.installkit import Outcome

DESCRIPTION = {
    "install": """\
Wire kijito-pull into a harness, so its sessions get their Kijito mail. Idempotent (a second run
changes nothing); a settings file that existed is backed up first (FILE.kijito-pull.bak) and only
kijito-pull's own entries are added; `kijito-pull uninstall ...` undoes it.

  kijito-pull install claude --project   the Claude Code plugin for this project (claude plugin install)
  kijito-pull install claude --user      ... for every project of yours (the default scope)
  kijito-pull install pi --user          the pi extension, as a pi package (pi install)
  kijito-pull install codex --project    SessionStart and Stop hooks in .codex/hooks.json
  kijito-pull install gemini --user --trust
                                         hooks in ~/.gemini/settings.json, this folder trusted
  kijito-pull install daemon --persona river
                                         `kijito-pull watch` as a systemd user unit (launchd on macOS)
  kijito-pull install daemon --relay --redis redis://10.0.0.5:6379/0
                                         `kijito-pull relay` for a fleet, the same way (docs/fleets.md)
  kijito-pull install claude --dry-run   print the commands and the diff, change nothing
""",
    "uninstall": """\
Undo `kijito-pull install`: the harness's own removal commands, then each settings file is given back
as it was before the install, byte for byte, when kijito-pull's entries were the only change (else
only those entries are removed, and the file as it was is kept in a timestamped backup).

  kijito-pull uninstall claude --project
  kijito-pull uninstall pi --user
  kijito-pull uninstall codex --project --dry-run
  kijito-pull uninstall gemini --user
  kijito-pull uninstall daemon --persona river
  kijito-pull uninstall daemon --relay
""",
}

EPILOG = """\
exit codes: 0 done (or nothing to do); 1 a harness command failed; 2 usage, an unreadable settings
file, or the harness (claude, pi, systemctl) is not installed (the manual steps are printed).
"""

def _targets() -> str:
    names = registry.names()
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def register(sub: argparse._SubParsersAction) -> None:
    for action in ("install", "uninstall"):
        if action in sub.choices:
            continue  # COMMANDS maps both names to this module
        parser = sub.add_parser(action, help=(f"wire kijito-pull into {_targets()}" if action == "install"
                                              else "undo `kijito-pull install`"),
                                description=DESCRIPTION[action], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        targets = parser.add_subparsers(dest="target", metavar="TARGET")
        for harness in registry.all_harnesses():
            t = targets.add_parser(harness.name, help=harness.install_help, description=harness.install_help,
                                   epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
            if harness.scopes:
                scope = t.add_mutually_exclusive_group()
                where = ("the repository around the current folder" if harness.project == REPOSITORY
                         else f"the current folder, where you start {harness.name}")
                scope.add_argument("--project", nargs="?", const="", default=None, metavar="DIR",
                                   help=f"this project only ({where}; or DIR)")
                scope.add_argument("--user", action="store_true", help="every project of yours (the default)")
            own = len(t._actions)
            harness.add_arguments(t, action)
            options = [a.dest for a in t._actions[own:]]
            t.add_argument("--dry-run", action="store_true",
                           help="print the commands and a diff of every file, change nothing")
            t.set_defaults(run=run, action=action, harness_options=options)
        parser.set_defaults(run=lambda args, env, p=parser: _help(p, env), action=action)


def _help(parser: argparse.ArgumentParser, env: Environment) -> ExitCode:
    parser.print_help(env.stdout)
    return ExitCode.USAGE


def run(args: argparse.Namespace, env: Environment) -> int:
    from kijito_pull.harnesses import installflow as flow
    from kijito_pull.harnesses import installkit as common

    if not getattr(args, "target", None):
        raise errors.UsageError(f"{args.action} what? one of: {', '.join(registry.names())}")
    harness = registry.get(args.target)
    quiet = getattr(args, "quiet", False)
    isatty = getattr(env.stderr, "isatty", None)
    if not quiet and not args.dry_run and isatty and isatty():
        common.on_run = lambda argv: (env.stderr.write(f"kijito-pull: running {common.shown(argv)} ...\n"),
                                      env.stderr.flush())
    try:  # an InstallError (its own exit code) or missing plugin files (2): cli/main.py says it
        with errors.about(f"{args.action} {args.target}"):
            request = _request(harness, args, env)
            outcome = harness.install(request) if args.action == "install" else harness.uninstall(request)
            flow.settle_folders(request, outcome)  # the folders the install made: recorded, or removed when empty
    finally:
        common.on_run = None
        flow.discard_folders()  # a run that failed leaves none of the empty folders it made
    if not quiet or args.dry_run:
        env.stdout.write(report(outcome, args.dry_run))
        env.stdout.flush()
    return outcome.code


def _request(harness: Harness, args: argparse.Namespace, env: Environment) -> InstallRequest:
    """The one request every installer takes: scope and project from --user/--project (for a harness that
    has scopes), the harness's own options by name."""
    from kijito_pull.harnesses import installkit as common

    options = {dest: getattr(args, dest, None) for dest in args.harness_options}
    scope, project = common.USER, None
    if harness.scopes:
        scope = common.PROJECT if args.project is not None else common.USER
        if args.project:
            project = Path(os.path.abspath(os.path.join(env.cwd, os.path.expanduser(args.project))))
            if not project.is_dir():
                raise common.InstallError(f"--project {args.project}: no such folder", ExitCode.USAGE)
        else:
            project = common.default_project(harness.project == REPOSITORY, env.cwd)
    return InstallRequest(harness.name, args.action, scope=scope, environ=env.environ, project=project,
                          cwd=env.cwd, dry_run=args.dry_run, options=options)


def report(outcome: Outcome, dry_run: bool) -> str:
    from kijito_pull.harnesses.installkit import Result, headline, shown

    scoped = outcome.harness not in registry.HARNESSES or bool(registry.get(outcome.harness).scopes)
    scope = f" ({outcome.scope} scope)" if scoped else ""
    result = Result(outcome.result)
    lines = [f"kijito-pull: {outcome.harness}{scope}: {headline(outcome)}"]
    verb = "run" if dry_run else "ran"
    for argv in outcome.commands:
        lines.append(f"  {verb}: {shown(argv)}")
    for backup in outcome.backups:
        lines.append(f"  backup: {backup}")
    for note in outcome.notes:
        lines.append("  " + note.replace("\n", "\n  "))
    text = "\n".join(lines) + "\n"
    if dry_run:
        diffs = [d for d in outcome.diffs if d]
        text += "".join(diffs) if diffs else ("  (no file changes)\n" if result.would else "")
    return text
