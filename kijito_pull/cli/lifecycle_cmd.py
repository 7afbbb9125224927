"""`kijito-pull session arm|stop|start|status`: a harness session's waker, by hand, with typed results.

(`kijito-pull status` is about cursors; `session ...` is about wakers.) Every result is one of the
`lifecycle.Result` values -- armed, already_armed, not_armed, stopped, already_stopped, started,
not_stopped, session_id_unavailable, invalid_session_id, startup_failed -- printed as
`kijito-pull: session ID: RESULT (detail)`, or as one JSON object per line with --json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from kijito_pull.core import config
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses.session import lifecycle, optin

Result = lifecycle.Result

DESCRIPTION = """\
Manage the waker of a harness session (the Claude Code plugin arms one per interactive session by
itself). A stop is durable: it is kept per project and persona, and automatic arming honours it until
`kijito-pull session start`.

  kijito-pull session status                   wakers and stop markers (this project by default)
  kijito-pull session stop                     end this project's waker(s), keep them off
  kijito-pull session start                    allow automatic arming again
  kijito-pull session arm --session-id ID      run a waker in the foreground: print the result line,
                                               wait for unseen mail, print a doorbell line, exit 0
"""

EPILOG = """\
The session id defaults to $CLAUDE_CODE_SESSION_ID; the project to the opted-in folder around the
current directory (--project DIR); the persona to the project's `inbox persona:` line, $KIJITO_PERSONA,
or the folder name. Exit codes: 0 for any result that states what is true now; 1 startup_failed;
2 session_id_unavailable / invalid_session_id / usage.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("session", help="a harness session's waker: arm, stop, start, status",
                            description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    for name, text in (("status", "show wakers and stop markers"),
                       ("stop", "end the project's waker(s) and keep automatic arming off"),
                       ("start", "remove the stop marker: automatic arming resumes"),
                       ("arm", "run a waker for a session in the foreground")):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument("--session-id", metavar="ID", help="the session (default $CLAUDE_CODE_SESSION_ID)")
        action.add_argument("--project", metavar="DIR", help="the project folder (default: around the cwd)")
        action.add_argument("--persona", metavar="NAME", help="the persona (default: the project's)")
        action.add_argument("--json", action="store_true", help="one JSON object per result line")
        if name == "status":
            action.add_argument("--all", action="store_true", help="every project, not only this one")
        action.set_defaults(run=run, action=name)
    parser.set_defaults(run=lambda args, env: _help(parser, env))


def _help(parser: argparse.ArgumentParser, env: Environment) -> ExitCode:
    parser.print_help(env.stdout)
    return ExitCode.USAGE


def _target(args: argparse.Namespace, env: Environment) -> tuple[str, str]:
    start = os.path.abspath(os.path.join(env.cwd, os.path.expanduser(args.project))) if args.project else env.cwd
    found = optin.resolve(start, env.environ)
    project = str(found.project) if found.opted_in else os.path.realpath(start)
    persona = (args.persona or (found.persona if found.opted_in else None)
               or env.environ.get(config.PERSONA_ENV, "").strip() or os.path.basename(project))
    config.validate_persona(persona)
    return lifecycle.project_key(project), persona


def _session_id(args: argparse.Namespace, env: Environment,
                required: bool) -> tuple[str | None, lifecycle.Outcome | None]:
    raw = args.session_id if args.session_id is not None else (env.environ.get("CLAUDE_CODE_SESSION_ID") or None)
    if raw is None:
        if required:
            return None, lifecycle.Outcome(Result.SESSION_ID_UNAVAILABLE, None,
                                           "pass --session-id ID or run it where $CLAUDE_CODE_SESSION_ID is set")
        return None, None
    sid, problem = lifecycle.check_session_id(raw)
    if sid is None:
        return None, lifecycle.Outcome(Result.INVALID_SESSION_ID, None, problem or "invalid")
    return sid, None


def _print(env: Environment, outcomes: Sequence[lifecycle.Outcome], as_json: bool, stream=None) -> None:
    out = stream or env.stdout
    for outcome in outcomes:
        if as_json:
            out.write(json.dumps(outcome.as_dict()) + "\n")
        else:
            out.write(f"kijito-pull: {outcome.line()}\n")
    out.flush()


def _code(outcome: lifecycle.Outcome) -> ExitCode:
    if outcome.result in (Result.SESSION_ID_UNAVAILABLE, Result.INVALID_SESSION_ID):
        return ExitCode.USAGE
    if outcome.result is Result.STARTUP_FAILED:
        return ExitCode.SOURCE_FAILED
    return ExitCode.OK


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    try:
        return _run(args, env)
    except lifecycle.LifecycleError as exc:
        outcome = lifecycle.Outcome(Result.STARTUP_FAILED, None, str(exc))
        _print(env, [outcome], args.json)
        return _code(outcome)


def _run(args: argparse.Namespace, env: Environment) -> ExitCode:
    environ = env.environ
    sid, bad = _session_id(args, env, required=args.action == "arm")
    if bad is not None:
        _print(env, [bad], args.json)
        return _code(bad)
    project, persona = _target(args, env)
    if args.action == "stop":
        outcome = lifecycle.set_stop(environ, project, persona, session_id=sid)
        _print(env, [outcome], args.json)
        return _code(outcome)
    if args.action == "start":
        outcome = lifecycle.clear_stop(environ, project, persona)
        _print(env, [outcome], args.json)
        return _code(outcome)
    if args.action == "status":
        return _status(args, env, sid, project, persona)
    return _arm(args, env, sid, project, persona)


def _status(args: argparse.Namespace, env: Environment, sid: str | None, project: str, persona: str) -> ExitCode:
    environ = env.environ
    outcomes: list[lifecycle.Outcome] = []
    leases = lifecycle.all_leases(environ)
    if sid is not None:
        leases = [lease for lease in leases if lease["session_id"] == sid]
    elif not args.all:
        leases = [lease for lease in leases if lease.get("project") == project]
    for lease in leases:
        fields = {k: lease.get(k) for k in ("pid", "persona", "project", "armed_at", "source")}
        if lease["live"]:
            outcomes.append(lifecycle.Outcome(Result.ARMED, lease["session_id"],
                                              f"waker pid {lease.get('pid')}, persona {lease.get('persona')}, "
                                              f"since {lease.get('armed_at')}", fields))
        else:
            outcomes.append(lifecycle.Outcome(Result.NOT_ARMED, lease["session_id"],
                                              f"its waker (pid {lease.get('pid')}) is gone", fields))
    if sid is not None and not leases:
        outcomes.append(lifecycle.Outcome(Result.NOT_ARMED, sid, "no waker holds this session's lease"))
    markers = lifecycle.all_stop_markers(environ)
    if not args.all:
        markers = [m for m in markers if m.get("project") == project and m.get("persona") == persona]
    for marker in markers:
        outcomes.append(lifecycle.Outcome(Result.STOPPED, marker.get("session_id"),
                                          f"project {marker.get('project')}, persona {marker.get('persona')}, "
                                          f"since {marker.get('since')}",
                                          {k: marker.get(k) for k in ("project", "persona", "since")}))
    if not outcomes:
        outcomes.append(lifecycle.Outcome(Result.NOT_ARMED, None,
                                          f"no waker and no stop marker for project {project}, persona {persona}",
                                          {"project": project, "persona": persona}))
    _print(env, outcomes, args.json)
    return ExitCode.OK


def _arm(args: argparse.Namespace, env: Environment, sid: str | None, project: str, persona: str) -> ExitCode:
    assert sid is not None
    from kijito_pull.harnesses.claude import hooks as claude

    outcome, waker = claude.arm(project, persona, sid, env.environ, env.stderr, host=None, source="cli",
                                ring_stream=env.stdout, ring_code=0, options={"grace": 0.0, "exit_fn": sys.exit})
    _print(env, [outcome], args.json)
    if waker is None:
        return _code(outcome)
    return ExitCode(waker.run_with_signals())
