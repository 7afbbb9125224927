"""The Codex adapter: Codex's hooks (hooks.json) speak Claude Code's vocabulary, with Codex's rules.

    codex-session-start   SessionStart: waiting mail as `{"hookSpecificOutput": {"hookEventName":
                          "SessionStart", "additionalContext": ...}}`
    codex-stop            Stop: unseen mail as `{"decision": "block", "reason": ...}`

The work is the shared hand-over (kijito_pull.harnesses.handover: one pull through the shared
engine, acknowledged once the JSON is written), behind the same opt-in gate as every hook
(kijito_pull.harnesses.hookgate). What is Codex's own comes from its Harness
(kijito_pull.harnesses.codex.HARNESS):

- stdout is never empty: "nothing to do" is `{}` (Codex rejects empty output on some events), also
  when the project has not opted in, the input is bad, or the hook gives up after its budget;
- Codex has no cap on consecutive Stop blocks, so the two guards matter more: the cursor moves past
  mail as soon as the block is written (the next Stop sees nothing new, so the same mail never
  blocks twice), and at most `max_stop_blocks` (default 3) blocks in a row per session;
- Codex sessions are headless: no waker (Codex cannot be woken from outside), and the session-start
  text does not promise one.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.hookgate import HookInput

SESSION_START = "codex-session-start"
STOP = "codex-stop"
HOOKS = (SESSION_START, STOP)

#: The shared hand-over each Codex hook runs.
HANDLERS = {SESSION_START: handover.session_start, STOP: handover.stop}


def run(inp: HookInput, env: Environment, *, exit_fn: Callable[[int], None] = os._exit) -> int:
    """Run one Codex hook. Always exit 0 with one JSON object on stdout (`{}` for nothing); never raises."""
    handover.answer(inp, env, lambda i, e, out: HANDLERS[i.hook](i, e, out), exit_fn=exit_fn)
    return 0
