"""The Codex adapter: Codex's hooks (hooks.json) speak Claude Code's vocabulary, with Codex's rules.

    codex-session-start   SessionStart: waiting mail as `{"hookSpecificOutput": {"hookEventName":
                          "SessionStart", "additionalContext": ...}}`; in an interactive session it then
                          arms the session's watcher (kijito_pull.harnesses.codex.watcher)
    codex-stop            Stop: unseen mail as `{"decision": "block", "reason": ...}`
    codex-session-end     SessionEnd: settles the session's hand-overs and ends its watcher
    codex-watch           the watcher itself (started by codex-session-start, never by Codex)

The work is the shared hand-over (kijito_pull.harnesses.handover: one pull through the shared engine,
pending until the session's rollout shows it), behind the same opt-in gate as every hook
(kijito_pull.harnesses.hookgate). What is Codex's own comes from its Harness
(kijito_pull.harnesses.codex.HARNESS):

- stdout is never empty: "nothing to do" is `{}` (Codex rejects empty output on some events), also
  when the project has not opted in, the input is bad, or the hook gives up after its budget;
- Codex has no cap on consecutive Stop blocks, so the two guards matter more: mail handed over is
  pending with the session, so the next Stop does not block with it again (it is confirmed from the
  rollout, or handed over again only if the rollout never showed it), and at most `max_stop_blocks`
  (default 3) blocks in a row per session;
- the mode is read from the session's rollout (codex.session.detect_mode): only an interactive session
  gets a watcher, and only its session-start text says that new mail wakes it.
"""

from __future__ import annotations

from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.base import INTERACTIVE
from kijito_pull.harnesses.hookgate import HookInput
from kijito_pull.harnesses.session import lifecycle

SESSION_START = "codex-session-start"
STOP = "codex-stop"
SESSION_END = "codex-session-end"
WATCH = "codex-watch"
HOOKS = (SESSION_START, STOP, SESSION_END)  # the ones hooks.json runs

WAKE_SENTENCE = ("New mail for {persona} reaches this session by itself while it is open: kijito-pull queues it "
                 "as a message of its own (`codex queue`), so it arrives as the next turn.")


# -- the hooks' handlers (each named by its Hook in kijito_pull.harnesses.codex.HARNESS) ----------------------


def on_session_start(inp: HookInput, env: Environment) -> int:
    """codex-session-start: waiting mail as the session's context; then, in an interactive session, its
    watcher is armed (after the answer is written)."""
    handover.answer(inp, env, session_start)
    arm_watcher(inp, env)
    return 0


def on_stop(inp: HookInput, env: Environment) -> int:
    """codex-stop: unseen mail blocks the stop (bounded, handover.stop)."""
    handover.answer(inp, env, handover.stop)
    return 0


def on_watch(inp: HookInput, env: Environment) -> int:
    """codex-watch: the session's one watcher (started by codex-session-start, never by Codex)."""
    from kijito_pull.harnesses.codex import watcher

    return watcher.run(inp, env)


def session_start(inp: HookInput, env: Environment, out: handover.Output) -> int:
    from kijito_pull.harnesses.codex import session

    inp.mode, why = session.detect_mode(inp.data, env.environ)
    extra = []
    if inp.mode == INTERACTIVE and inp.session_id and _may_arm(inp, env):
        extra.append(WAKE_SENTENCE.format(persona=inp.persona))
    return handover.session_start(inp, env, out, extra)


def _may_arm(inp: HookInput, env: Environment) -> bool:
    from kijito_pull.harnesses.session import pushwatch

    return pushwatch.may_arm(inp, env.environ)


def arm_watcher(inp: HookInput, env: Environment) -> None:
    """After the answer is written: start the session's watcher if it is interactive and has none."""
    from kijito_pull.harnesses.codex import session
    from kijito_pull.harnesses.session import pushwatch

    if inp.mode != INTERACTIVE:
        return
    pushwatch.arm(inp, env, name=WATCH, host_env=session.HOST_ENV, host=lifecycle.host_process(),
                  later="new mail waits for the next turn's end")
