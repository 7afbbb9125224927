"""Claude Code's own doctor check (`waker`): the current session's waker, when the doctor runs inside a
Claude Code session. Listed in `HARNESS.checks` (kijito_pull.harnesses.claude); run by
kijito_pull.doctor after every harness's wiring finding.
"""

from __future__ import annotations

from kijito_pull.core.findings import OK, WARN, Context, Finding
from kijito_pull.harnesses.base import INTERACTIVE
from kijito_pull.harnesses.claude.gate import SESSION_ENV, detect_mode
from kijito_pull.harnesses.session import lifecycle


def check_waker(ctx: Context) -> Finding:
    """The current Claude Code session's waker, when the doctor runs inside one (`!kijito-pull doctor`)."""
    raw = ctx.environ.get(SESSION_ENV) or None
    if raw is None:
        return Finding("waker", OK, "not inside a Claude Code session ($CLAUDE_CODE_SESSION_ID is not set); "
                                    "nothing to check")
    sid, problem = lifecycle.check_session_id(raw)
    if sid is None:
        return Finding("waker", WARN, f"$CLAUDE_CODE_SESSION_ID is unusable: {problem}",
                       "no waker can be armed for this session; start a new session")
    interactive = detect_mode(ctx.environ)[0] == INTERACTIVE
    lease = lifecycle.read_lease(ctx.environ, sid)
    if lease is not None and lifecycle.alive(lease.get("pid"), lease.get("pid_start")):
        return Finding("waker", OK, f"session {sid}: waker pid {lease.get('pid')} armed since {lease.get('armed_at')} "
                                    f"for {lease.get('persona')}")
    if not interactive:
        return Finding("waker", OK, f"session {sid} is headless: no waker by design (the Stop hook hands mail over)")
    if ctx.optin is None or not ctx.optin.opted_in:
        return Finding("waker", OK, f"session {sid}: no waker (this project has not opted in)")
    if lease is not None:
        return Finding("waker", WARN, f"session {sid}: its waker (pid {lease.get('pid')}) is gone; the next turn "
                                      "end arms a new one",
                       "end a turn (or start a new session); `kijito-pull session status` shows it")
    return Finding("waker", WARN, f"session {sid} is interactive but has no waker: idle mail will wait for the next "
                                  "turn end",
                   "`kijito-pull session status` (a stop marker?); is the plugin installed (harness.claude)? "
                   "the session-start context says which way new mail arrives")


def check_push(ctx: Context) -> Finding:
    """How new mail reaches a busy session: pushed through the session inbox socket, or at the turn's end;
    and the one kind of run the plugin never sees (`claude -p --bare`)."""
    bare = ("`claude -p --bare` runs no hooks and binds no inbox socket: such a run gets no mail from the "
            "plugin; scripts use `kijito-pull exec -- claude -p --bare ...`")
    raw = ctx.environ.get(SESSION_ENV) or None
    if raw is None:
        return Finding("push", OK, f"not inside a Claude Code session; note: {bare}")
    sid, problem = lifecycle.check_session_id(raw)
    if sid is None:  # the waker check warns about it
        return Finding("push", OK, f"$CLAUDE_CODE_SESSION_ID is unusable ({problem}), so no session to check; "
                                   f"note: {bare}")
    mode = lifecycle.read_push_mode(ctx.environ, sid)
    if mode is None:
        return Finding("push", OK, f"session {sid}: no waker has reported yet (mail arrives at turn ends and by "
                                   f"the doorbell); note: {bare}")
    if mode.get("pushing"):
        return Finding("push", OK, f"session {sid}: new mail is pushed into the session as it arrives "
                                   f"({mode.get('why')})")
    return Finding("push", OK, f"session {sid}: not pushing ({mode.get('why')}); mail arrives by the doorbell and "
                               f"at turn ends (Claude Code 2.1.224+ pushes between tool calls)")
