"""The Gemini CLI adapter: Gemini's hooks (settings.json) speak Claude Code's vocabulary, with Gemini's rules.

    gemini-session-start   SessionStart: waiting mail as `{"hookSpecificOutput": {"hookEventName":
                           "SessionStart", "additionalContext": ...}}` (Gemini reads only this key; it
                           reaches the model as `<hook_context>...</hook_context>` before the prompt)
    gemini-after-agent     AfterAgent: unseen mail as `{"decision": "block", "reason": ...}`; Gemini takes
                           "block" as "deny" (its `isBlockingDecision`), refuses the turn's end and sends the
                           reason to the model as the next prompt; at most `max_stop_blocks` (default 3) in a
                           row per session, counted while Gemini says `stop_hook_active`
    gemini-session-end     SessionEnd: settles what the session was handed

The work is the shared hand-over (kijito_pull.harnesses.handover: one pull through the shared engine,
pending with the session until its record, `chats/session-*.jsonl`, shows the mail), behind the same
opt-in gate as every hook (kijito_pull.harnesses.hookgate). What is Gemini's own comes from its Harness
(kijito_pull.harnesses.gemini.HARNESS): stdout is never empty, "nothing to do" is `{}` (with empty stdout
Gemini would show our stderr lines to the user as a message).

Gemini hands its hooks its whole environment, GEMINI_API_KEY included: nothing here logs, forwards or
passes on a hook's environment; what goes to stderr is our own one-line messages.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.gemini.gate import SESSION_END, SESSION_START
from kijito_pull.harnesses.hookgate import HookInput, answer_nothing, say
from kijito_pull.harnesses.session import lifecycle


def run(inp: HookInput, env: Environment, *, exit_fn: Callable[[int], None] = os._exit) -> int:
    """Run one Gemini CLI hook. Always exit 0 with one JSON object on stdout (`{}` for nothing); never raises."""
    if inp.hook == SESSION_END:
        session_end(inp, env)
        answer_nothing(env.stdout, inp.harness.nothing if inp.harness is not None else "{}\n")
        return 0
    handler = handover.session_start if inp.hook == SESSION_START else handover.stop
    handover.answer(inp, env, handler, exit_fn=exit_fn)
    return 0


def session_end(inp: HookInput, env: Environment) -> None:
    """Settle what the session was handed: what its record shows is confirmed, the rest is unseen again at
    once, so the next session gets it without waiting for a deadline."""
    sid = inp.session_id
    if sid is None:
        return
    try:
        handover.confirm_at_end(inp, env.environ)
        lifecycle.handed_marker(env.environ, sid).unlink(missing_ok=True)
    except Exception as exc:  # noqa: BLE001 - a hook must never crash the session it serves
        say(env.stderr, f"{inp.hook}: cannot settle this session's hand-overs ({type(exc).__name__}: {exc}); "
                        f"they are claimed back when their deadline passes")
