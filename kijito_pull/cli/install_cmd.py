"""`kijito-pull install | uninstall claude | pi | codex | daemon`: wire kijito-pull into a harness, or undo it.

The work is in kijito_pull.harnesses.registry (one module per target); this module parses, prints what was
done (or, with --dry-run, exactly what would be: the harness commands and a unified diff per file)
and maps failures to exit codes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kijito_pull.cli.environment import Environment
from kijito_pull.core.exitcodes import ExitCode

TARGETS = ("claude", "pi", "codex", "daemon")

DESCRIPTION = {
    "install": """\
Wire kijito-pull into a harness, so its sessions get their Kijito mail. Idempotent (a second run
changes nothing); a settings file that existed is backed up first (FILE.kijito-pull.bak) and only
kijito-pull's own entries are added; `kijito-pull uninstall ...` undoes it.

  kijito-pull install claude --project   the Claude Code plugin for this project (claude plugin install)
  kijito-pull install claude --user      ... for every project of yours (the default scope)
  kijito-pull install pi --user          the pi extension, as a pi package (pi install)
  kijito-pull install codex --project    SessionStart and Stop hooks in .codex/hooks.json
  kijito-pull install daemon --persona river
                                         `kijito-pull watch` as a systemd user unit (launchd on macOS)
  kijito-pull install claude --dry-run   print the commands and the diff, change nothing
""",
    "uninstall": """\
Undo `kijito-pull install`: the harness's own removal commands, then each settings file is given back
as it was before the install, byte for byte, when kijito-pull's entries were the only change (else
only those entries are removed, and the file as it was is kept in a timestamped backup).

  kijito-pull uninstall claude --project
  kijito-pull uninstall pi --user
  kijito-pull uninstall codex --project --dry-run
  kijito-pull uninstall daemon --persona river
""",
}

EPILOG = """\
exit codes: 0 done (or nothing to do); 1 a harness command failed; 2 usage, an unreadable settings
file, or the harness (claude, pi, systemctl) is not installed (the manual steps are printed).
"""

HELP = {
    "claude": "Claude Code: the plugin, via `claude plugin marketplace add` + `claude plugin install`",
    "pi": "pi: the extension as a pi package, via `pi install`",
    "codex": "Codex: SessionStart and Stop hooks in hooks.json",
    "daemon": "`kijito-pull watch` for one persona as a systemd user unit or launchd agent",
}


def register(sub: argparse._SubParsersAction) -> None:
    for action in ("install", "uninstall"):
        if action in sub.choices:
            continue  # COMMANDS maps both names to this module
        parser = sub.add_parser(action, help=("wire kijito-pull into claude, pi, codex or a daemon" if action ==
                                              "install" else "undo `kijito-pull install`"),
                                description=DESCRIPTION[action], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        targets = parser.add_subparsers(dest="target", metavar="TARGET")
        for target in TARGETS:
            t = targets.add_parser(target, help=HELP[target], description=HELP[target], epilog=EPILOG,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
            if target == "daemon":
                t.add_argument("--persona", metavar="NAME",
                               help="the persona to watch (default: $KIJITO_PERSONA, else this project's)")
                t.add_argument("--system", choices=("systemd", "launchd"),
                               help="the supervisor (default: launchd on macOS, else systemd)")
            else:
                scope = t.add_mutually_exclusive_group()
                where = ("the repository around the current folder" if target == "codex"
                         else f"the current folder, where you start {target}")
                scope.add_argument("--project", nargs="?", const="", default=None, metavar="DIR",
                                   help=f"this project only ({where}; or DIR)")
                scope.add_argument("--user", action="store_true", help="every project of yours (the default)")
                if target in ("claude", "pi"):
                    t.add_argument("--bin", metavar="PATH", help=f"the {target} executable (default: `{target}` "
                                                                 f"on PATH)")
                if target == "codex" and action == "install":
                    t.add_argument("--command", metavar="CMD",
                                   help="the kijito-pull command the hooks run (default: this installation, by "
                                        "absolute path)")
            t.add_argument("--dry-run", action="store_true",
                           help="print the commands and a diff of every file, change nothing")
            t.set_defaults(run=run, action=action)
        parser.set_defaults(run=lambda args, env, p=parser: _help(p, env), action=action)


def _help(parser: argparse.ArgumentParser, env: Environment) -> ExitCode:
    parser.print_help(env.stdout)
    return ExitCode.USAGE


def run(args: argparse.Namespace, env: Environment) -> int:
    from kijito_pull.harnesses import installkit as common

    if not getattr(args, "target", None):
        env.error(f"{args.action} what? one of: {', '.join(TARGETS)}")
        return ExitCode.USAGE
    quiet = getattr(args, "quiet", False)
    isatty = getattr(env.stderr, "isatty", None)
    if not quiet and not args.dry_run and isatty and isatty():
        common.on_run = lambda argv: (env.stderr.write(f"kijito-pull: running {common.shown(argv)} ...\n"),
                                      env.stderr.flush())
    try:
        outcome = _dispatch(args, env)
    except common.InstallError as exc:
        env.error(f"{args.action} {args.target}: {exc}")
        return exc.code
    except FileNotFoundError as exc:  # plugin files missing from the installation
        env.error(f"{args.action} {args.target}: {exc}")
        return ExitCode.USAGE
    finally:
        common.on_run = None
    if not quiet or args.dry_run:
        env.stdout.write(report(outcome, args.dry_run))
        env.stdout.flush()
    return outcome.code


def _dispatch(args: argparse.Namespace, env: Environment):
    import importlib

    from kijito_pull.harnesses import installkit as common

    module = importlib.import_module(f"kijito_pull.harnesses.{args.target}.installer")
    verb = getattr(module, args.action)
    if args.target == "daemon":
        return verb(env.environ, env.cwd, persona=args.persona, system=args.system, dry_run=args.dry_run)
    scope = common.PROJECT if args.project is not None else common.USER
    if args.project:
        project = Path(os.path.abspath(os.path.join(env.cwd, os.path.expanduser(args.project))))
        if not project.is_dir():
            raise common.InstallError(f"--project {args.project}: no such folder", 2)
    else:
        project = common.default_project(args.target, env.cwd)
    kwargs = {"dry_run": args.dry_run}
    if args.target in ("claude", "pi"):
        kwargs["bin_path"] = args.bin
    if args.target == "codex" and args.action == "install":
        kwargs["command"] = args.command
    return verb(scope, env.environ, project, **kwargs)


RESULTS = {
    "installed": "installed",
    "updated": "updated (new plugin files)",
    "already_installed": "already installed, nothing changed",
    "uninstalled": "uninstalled",
    "not_installed": "not installed, nothing changed",
    "would_install": "dry run, nothing changed; install would:",
    "would_update": "dry run, nothing changed; install would refresh the plugin files",
    "would_uninstall": "dry run, nothing changed; uninstall would:",
}


def report(outcome, dry_run: bool) -> str:
    scope = "" if outcome.harness == "daemon" else f" ({outcome.scope} scope)"
    lines = [f"kijito-pull: {outcome.harness}{scope}: {RESULTS.get(outcome.result, outcome.result)}"]
    verb = "run" if dry_run else "ran"
    for argv in outcome.commands:
        from kijito_pull.harnesses.installkit import shown

        lines.append(f"  {verb}: {shown(argv)}")
    for backup in outcome.backups:
        lines.append(f"  backup: {backup}")
    for note in outcome.notes:
        lines.append("  " + note.replace("\n", "\n  "))
    text = "\n".join(lines) + "\n"
    if dry_run:
        diffs = [d for d in outcome.diffs if d]
        text += "".join(diffs) if diffs else ("  (no file changes)\n" if outcome.result.startswith("would") else "")
    return text
