"""`kijito-pull hook NAME`: the entry points the harnesses' hooks call (the Claude plugin's
hooks/hooks.json, Codex's hooks.json), listed by the harness registry.

Each reads the harness's hook JSON on stdin and answers on stdout. Not meant to be typed by hand;
see docs/claude.md and docs/codex.md. The console entry runs a hook before this module is even
imported (kijito_pull.cli.early); both go through the one route, `kijito_pull.harnesses.hookgate.run_hook`.
"""

from __future__ import annotations

import argparse
import textwrap

from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import hookgate, registry

EPILOG = """\
environment: KIJITO_PULL_MODE=interactive|headless overrides CLAUDE_CODE_ENTRYPOINT (cli = interactive);
KIJITO_PULL_HOOK_BUDGET (seconds a synchronous hook may take, default 8); KIJITO_PULL_CLAUDE_WAKER=
rewake|monitor|off overrides the detection of asyncRewake in the running Claude Code.
"""


def _nothing(harness) -> str:
    return "with no output" if not harness.nothing else f"`{harness.nothing.strip()}`"


def description() -> str:
    """The hooks of every registered harness, one line (or a few) each."""
    hooked = [h for h in registry.all_harnesses() if h.hooks]
    titles = [h.title for h in hooked]
    names = " and ".join([", ".join(titles[:-1]), titles[-1]] if len(titles) > 1 else titles)
    shapes = ", or ".join(f"{_nothing(h)} ({h.title})" for h in hooked)
    head = (f"{names} hook entry points (the harnesses' hook settings call them; they read the hook's JSON "
            f"on stdin). Every one exits 0 at once in a project that has not opted in: {shapes}.")
    lines = [textwrap.fill(head, width=100), ""]
    for harness in hooked:
        for hook in harness.hooks:
            first, *more = hook.help.split("\n")
            lines.append(f"  {hook.name:<22} {first}")
            lines.extend(f"  {'':<22} {line}" for line in more)
        lines.append("")
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    titles = " and ".join(h.title for h in registry.all_harnesses() if h.hooks)
    names = registry.hook_names()
    parser = sub.add_parser("hook", help=f"{titles} hook entry points (used by their hooks)",
                            description=description(), epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=names, metavar="HOOK", help="one of: " + ", ".join(names))
    parser.add_argument("--source", metavar="URL", help="read the mail from this Redis source (redis://HOST:PORT/DB, "
                                                        "docs/fleets.md) instead of $KIJITO_PULL_SOURCE or the config")
    parser.add_argument("--consumer", metavar="NAME", help="the consumer (a Redis source: its consumer group) instead "
                                                           "of $KIJITO_PULL_CONSUMER or the config")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> int:
    """In-process entry (tests, `python -c`); the console entry runs hooks from `hookgate.early_gate`."""
    given = {hookgate.HOOK_FLAGS["--source"]: args.source, hookgate.HOOK_FLAGS["--consumer"]: args.consumer}
    environ = {**env.environ, **{k: v for k, v in given.items() if v is not None}}
    return hookgate.run_hook(args.name, env.stdin, env.stdout, env.stderr, environ, env.cwd)
