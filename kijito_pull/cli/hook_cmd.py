"""`kijito-pull hook claude-*`: the entry points of the Claude Code plugin (hooks/hooks.json).

Each reads Claude Code's hook JSON on stdin and answers on stdout. Not meant to be typed by hand;
see docs/claude.md. A project that has not opted in is answered by `kijito_pull.hooks.fastpath`
before this module is even imported.
"""

from __future__ import annotations

import argparse

from kijito_pull.cli.environment import Environment
from kijito_pull.hooks import fastpath

DESCRIPTION = """\
Claude Code hook entry points (the plugin's hooks/hooks.json calls them; they read the hook's JSON
on stdin). Every one exits 0 at once, with no output, in a project that has not opted in.

  claude-session-start   SessionStart: waiting mail as additionalContext
  claude-stop            Stop: unseen mail blocks the stop (at most $KIJITO_PULL_MAX_STOP_BLOCKS
                         times in a row, default 3); never twice for the same mail
  claude-prompt          UserPromptSubmit: hands the mail to a turn a waker's doorbell started
  claude-waker           SessionStart/Stop (asyncRewake): the session's one waker; exits 2 with a
                         doorbell when new mail arrives (interactive sessions only)
  claude-session-end     SessionEnd: ends the session's waker
"""

EPILOG = """\
environment: KIJITO_PULL_MODE=interactive|headless overrides CLAUDE_CODE_ENTRYPOINT (cli = interactive);
KIJITO_PULL_HOOK_BUDGET (seconds a synchronous hook may take, default 8); KIJITO_PULL_CLAUDE_WAKER=
rewake|monitor|off overrides the detection of asyncRewake in the running Claude Code.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("hook", help="Claude Code hook entry points (used by the plugin)",
                            description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=fastpath.HOOKS, metavar="HOOK",
                        help="one of: " + ", ".join(fastpath.HOOKS))
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> int:
    """In-process entry (tests, `python -c`); the console entry runs hooks from `fastpath.early_gate`."""
    try:
        code, inp = fastpath.gate(args.name, env.stdin, env.environ, env.cwd, env.stderr)
    except Exception as exc:  # noqa: BLE001 - a hook must never crash with a traceback
        fastpath.say(env.stderr, f"{args.name}: internal error ({type(exc).__name__}: {exc}); nothing was done")
        return 0
    if code is not None:
        return code
    assert inp is not None
    from kijito_pull.hooks import claude

    return claude.run(inp, env)
