"""`kijito-pull optin`: does this project opt in to inbox pickup, and for which persona?"""

from __future__ import annotations

import argparse
import json

from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses.session import optin

_INTERRUPT_MEANING = {
    optin.INTERRUPT_ALL: "new mail may reach the agent mid-turn",
    optin.INTERRUPT_URGENT: "only urgent mail may reach the agent mid-turn",
    optin.INTERRUPT_TURN_END: "mail waits for the end of the turn",
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "optin", help="show whether a project opts in (AGENTS.md / CLAUDE.md) and its persona",
        description="Look for the opt-in line 'inbox monitor: raise on start' in AGENTS.md or CLAUDE.md of the "
                    "project (this folder up to the repository root), and the persona it names "
                    "('inbox persona: NAME', else $KIJITO_PERSONA, else the folder's name), and which mail may "
                    "interrupt "
                    "a running turn ('inbox interrupt: all | urgent | turn-end', default all).")
    parser.add_argument("--cwd", metavar="DIR", help="the project folder (default: the current folder)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    found = optin.resolve(args.cwd or env.cwd, env.environ)
    if args.json:
        env.stdout.write(json.dumps({
            "opted_in": found.opted_in, "persona": found.persona, "persona_source": found.persona_source,
            "project": str(found.project), "file": str(found.file) if found.file else None,
            "problem": found.problem, "interrupt": found.interrupt if found.opted_in else None,
            "interrupt_source": found.interrupt_source if found.opted_in else None,
            "interrupt_problem": found.interrupt_problem}) + "\n")
    elif found.opted_in and found.persona:
        env.stdout.write(f"opted in by {found.file}; persona {found.persona} (from the {found.persona_source}); "
                         f"interrupt {found.interrupt} ({_INTERRUPT_MEANING[found.interrupt]}, "
                         f"{'from the file' if found.interrupt_source == 'file' else 'the default'})\n")
    elif found.opted_in:
        env.stdout.write(f"opted in by {found.file}, but {found.problem}\n")
    else:
        env.stdout.write(f"not opted in: no 'inbox monitor: raise on start' line in AGENTS.md or CLAUDE.md "
                         f"from {found.project} up to the repository root\n")
        if found.problem:
            env.error(found.problem)
    if found.interrupt_problem:
        env.error(found.interrupt_problem)
    return ExitCode.OK if found.opted_in and found.persona else ExitCode.USAGE if found.opted_in else ExitCode.OK
