"""`kijito-pull hook claude-*`: the entry points of the Claude Code plugin (hooks/hooks.json).

Each reads Claude Code's hook JSON on stdin and answers on stdout. Not meant to be typed by hand;
see docs/claude.md. A project that has not opted in is answered by `kijito_pull.harnesses.hookgate`
before this module is even imported.
"""

from __future__ import annotations

import argparse

from kijito_pull.cli.environment import Environment
from kijito_pull.harnesses import hookgate as fastpath

DESCRIPTION = """\
Claude Code and Codex hook entry points (the Claude plugin's hooks/hooks.json and Codex's hooks.json
call them; they read the hook's JSON on stdin). Every one exits 0 at once in a project that has not
opted in: with no output (Claude Code), or `{}` (Codex).

  claude-session-start   SessionStart: waiting mail as additionalContext
  claude-stop            Stop: unseen mail blocks the stop (at most $KIJITO_PULL_MAX_STOP_BLOCKS
                         times in a row, default 3); never twice for the same mail
  claude-prompt          UserPromptSubmit: hands the mail to a turn a waker's doorbell started
  claude-waker           SessionStart/Stop (asyncRewake): the session's one waker; exits 2 with a
                         doorbell when new mail arrives (interactive sessions only)
  claude-session-end     SessionEnd: ends the session's waker

  codex-session-start    Codex SessionStart: waiting mail as additionalContext (`{}` when none)
  codex-stop             Codex Stop: unseen mail blocks the stop, as claude-stop (`{}` when none)
"""

EPILOG = """\
environment: KIJITO_PULL_MODE=interactive|headless overrides CLAUDE_CODE_ENTRYPOINT (cli = interactive);
KIJITO_PULL_HOOK_BUDGET (seconds a synchronous hook may take, default 8); KIJITO_PULL_CLAUDE_WAKER=
rewake|monitor|off overrides the detection of asyncRewake in the running Claude Code.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("hook", help="Claude Code and Codex hook entry points (used by their hooks)",
                            description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=fastpath.ALL_HOOKS, metavar="HOOK",
                        help="one of: " + ", ".join(fastpath.ALL_HOOKS))
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> int:
    """In-process entry (tests, `python -c`); the console entry runs hooks from `fastpath.early_gate`."""
    codex = args.name in fastpath.CODEX_HOOKS
    try:
        code, inp = fastpath.gate(args.name, env.stdin, env.environ, env.cwd, env.stderr)
    except Exception as exc:  # noqa: BLE001 - a hook must never crash with a traceback
        fastpath.say(env.stderr, f"{args.name}: internal error ({type(exc).__name__}: {exc}); nothing was done")
        code, inp = 0, None
    if code is not None or inp is None:
        if codex:
            fastpath.answer_nothing(env.stdout)
        return code or 0
    if codex:
        from kijito_pull.harnesses.codex import hooks as adapter

        return adapter.run(inp, env)
    from kijito_pull.harnesses.claude import hooks as claude

    return claude.run(inp, env)
