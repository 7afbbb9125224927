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

from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.hookgate import HookInput

# -- the hooks' handlers (each named by its Hook in kijito_pull.harnesses.gemini.HARNESS; SessionEnd's is the
# shared handover.session_end) -------------------------------------------------------------------------------


def on_session_start(inp: HookInput, env: Environment) -> int:
    """gemini-session-start: waiting mail as the session's context."""
    return handover.answer(inp, env, handover.session_start)


def on_after_agent(inp: HookInput, env: Environment) -> int:
    """gemini-after-agent: unseen mail refuses the turn's end (bounded, handover.stop)."""
    return handover.answer(inp, env, handover.stop)
