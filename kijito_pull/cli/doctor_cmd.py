"""`kijito-pull doctor`: one screen saying whether mail can reach the agent, and what to fix if not."""

from __future__ import annotations

import argparse
import json
import textwrap

from kijito_pull import doctor
from kijito_pull.cli import options
from kijito_pull.core.api import DEFAULT_TIMEOUT
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode

DESCRIPTION = """\
Check everything between the Kijito server and the agent, each with a verdict and a fix: the token
(source, file mode), the API base (TLS, or http only to loopback), reachability and auth (one peek
request, nothing marked read), the persona, the project's opt-in line, the state directory (not in a
cache dir, writable, private), cursors and their locks, waker leases, the stop marker, which harnesses
are installed and wired (and whether the command their hooks run exists), whether Codex trusts
kijito-pull's hooks (asked of `codex app-server`, which keeps its own state under ~/.codex), and the
current session's waker. Read-only: it creates and changes no file of its own. The token is never shown.

With a Redis source (--source, $KIJITO_PULL_SOURCE, config source; docs/fleets.md) it sends Kijito
nothing and checks Redis instead: PING and the password, the persona's stream and the consumer's group,
persistence (AOF and appendfsync), and the group's lag, pending and parked mail.
"""

EPILOG = """\
exit codes: 0 nothing would stop mail reaching the agent (there may be warnings); 1 at least one FAIL;
2 usage error. --json prints one object per check and line:
  {"check": "token", "verdict": "ok|warn|fail", "detail": "...", "fix": "..." or null}
Every check id has a section in docs/troubleshooting.md.

examples:
  kijito-pull doctor
  kijito-pull doctor --persona river --cwd ~/src/project
  kijito-pull doctor --json
  kijito-pull doctor --persona river --source redis://10.0.0.5:6379/0 --consumer ci
"""

SYMBOLS = {doctor.OK: "✓", doctor.WARN: "!", doctor.FAIL: "✗"}
WORDS = {doctor.OK: "OK  ", doctor.WARN: "WARN", doctor.FAIL: "FAIL"}
COLOURS = {doctor.OK: "32", doctor.WARN: "33", doctor.FAIL: "31"}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("doctor", help="check token, server, persona, opt-in, state and harness wiring",
                            description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--persona", metavar="NAME",
                        help="the persona to check (default: the project's opt-in persona, else $KIJITO_PERSONA, "
                             "else the config file's)")
    parser.add_argument("--cwd", metavar="DIR", help="the project folder to check (default: the current folder)")
    parser.add_argument("--json", action="store_true", help="one JSON object per check, one per line")
    parser.add_argument("--consumer", metavar="NAME", default=None,
                        help="with a Redis source: the consumer group to check (default: $KIJITO_PULL_CONSUMER, "
                             "else the config file's consumer, else agent)")
    options.add_connection(parser)
    options.add_source(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    import os

    cwd = os.path.abspath(os.path.join(env.cwd, os.path.expanduser(args.cwd))) if args.cwd else env.cwd
    ctx = doctor.Context(environ=env.environ, cwd=cwd, persona_flag=args.persona, api_base_flag=args.api_base,
                         token_file_flag=args.token_file, auth_header_flag=args.auth_header,
                         source_flag=args.source, consumer_flag=args.consumer,
                         redis_password_file_flag=args.redis_password_file,
                         timeout=args.timeout or DEFAULT_TIMEOUT)
    findings = doctor.run_checks(ctx)
    if args.json:
        for finding in findings:
            env.stdout.write(json.dumps(finding.as_dict(), ensure_ascii=False) + "\n")
    else:
        env.stdout.write(screen(findings, env, quiet=args.quiet, unchecked=unchecked(ctx)))
    env.stdout.flush()
    return ExitCode.SOURCE_FAILED if doctor.failed(findings) else ExitCode.OK


def unchecked(ctx: doctor.Context) -> str | None:
    """Why the doctor cannot say mail reaches the agent although nothing failed, or None when it can."""
    if ctx.persona is None:
        return "no persona was given, so no inbox was peeked at"
    from kijito_pull.doctor.source_checks import configured

    if configured(ctx):
        return None if ctx.source_reachable else "the Redis source was not reached"
    if ctx.reachable is not True:
        return "the server was not reached"
    return None


def _fancy(env: Environment) -> tuple[bool, bool]:
    """(symbols, colour): symbols and colour on a terminal that can show them; words and no colour elsewhere."""
    if not env.stdout_isatty:
        return False, False
    encoding = getattr(env.stdout, "encoding", None) or "ascii"
    try:
        "✓✗".encode(encoding)
    except (LookupError, UnicodeEncodeError):
        return False, not env.environ.get("NO_COLOR")
    return True, not env.environ.get("NO_COLOR") and env.environ.get("TERM") != "dumb"


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=max(40, 110 - len(indent)), break_on_hyphens=False, break_long_words=False)


def screen(findings: list[doctor.Finding], env: Environment, quiet: bool = False, unchecked: str | None = None) -> str:
    """The findings for a person, then one summary line; `unchecked` (see `unchecked`) keeps that line
    from claiming mail can reach the agent when that was not checked."""
    symbols, colour = _fancy(env)
    lines = []
    width = max(len(c) for c in (*doctor.check_ids(), *doctor.SOURCE_CHECK_IDS))
    indent = " " * (2 + (1 if symbols else 4) + 1 + width + 2)
    for f in findings:
        if quiet and f.verdict == doctor.OK:
            continue
        mark = SYMBOLS[f.verdict] if symbols else WORDS[f.verdict]
        if colour:
            mark = f"\033[{COLOURS[f.verdict]}m{mark}\033[0m"
        head = f"  {mark} {f.check.ljust(width)}  "
        body = _wrap(f.detail, indent) or [""]
        lines.append(head + body[0])
        lines.extend(indent + more for more in body[1:])
        if f.fix and f.verdict != doctor.OK:
            fix = _wrap("fix: " + f.fix, indent)
            lines.extend(indent + part for part in fix)
    fails = sum(f.verdict == doctor.FAIL for f in findings)
    warns = sum(f.verdict == doctor.WARN for f in findings)
    if fails:
        summary = (f"{fails} problem{'s' if fails != 1 else ''} would stop mail reaching the agent"
                   + (f"; {warns} warning{'s' if warns != 1 else ''}" if warns else "")
                   + ". Details: docs/troubleshooting.md")
    elif unchecked:
        summary = (f"Nothing found that would stop mail, but whether it reaches the agent was not checked: {unchecked}"
                   + (f"; {warns} warning{'s' if warns != 1 else ''}" if warns else "") + ".")
    elif warns:
        summary = f"Mail can reach the agent; {warns} warning{'s' if warns != 1 else ''}."
    else:
        summary = "Everything checked is fine."
    return "\n".join(lines + ["", summary, ""])
