"""The Copilot CLI adapter: Copilot CLI reads Claude Code's hook format (PascalCase events), with its own rules.

    copilot-session-start   SessionStart: waiting mail as context. Copilot CLI reads only a top-level
                            `additionalContext` (1.0.102 ignores `hookSpecificOutput.additionalContext`,
                            the key Claude Code reads), so the answer carries both
    copilot-stop            Stop (agentStop): unseen mail as `{"decision": "block", "reason": ...}`; at most
                            `max_stop_blocks` (default 3) in a row per session (Copilot's own cap is 8)
    copilot-session-end     SessionEnd: settles what the session was handed
    copilot-watch           the watcher of an interactive session whose extension listens (copilot/watcher.py;
                            started by copilot-session-start, never by Copilot): new mail pushed through
                            `session.send`

The work is the shared hand-over (kijito_pull.harnesses.handover), pending with the session until its
record shows the mail. Copilot names the record (`transcript_path`) only in its Stop input; for SessionStart
and SessionEnd it is the session's `events.jsonl` under Copilot's home (`$COPILOT_HOME`, else
`~/.copilot`), `session-state/<session id>/events.jsonl`, measured on 1.0.102.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.copilot.session import copilot_home
from kijito_pull.harnesses.hookgate import HookInput
from kijito_pull.harnesses.session.optin import INTERRUPT_ALL, during_a_turn

WATCH = "copilot-watch"


def record_path(environ: Mapping[str, str], session_id: str) -> Path:
    return copilot_home(environ) / "session-state" / session_id / "events.jsonl"


def top_level_context(obj: dict[str, Any]) -> dict[str, Any]:
    """SessionStart's `additionalContext` also at the top level (Copilot CLI reads only that one; Claude Code's
    `hookSpecificOutput` key stays for the shape's sake)."""
    inner = obj.get("hookSpecificOutput")
    if isinstance(inner, dict) and isinstance(inner.get("additionalContext"), str):
        return {**obj, "additionalContext": inner["additionalContext"]}
    return obj


def _with_record(inp: HookInput, env: Environment) -> HookInput:
    """The input naming the session's record, as Copilot names it only at Stop."""
    if inp.session_id is not None and not isinstance(inp.data.get("transcript_path"), str):
        inp.data["transcript_path"] = str(record_path(env.environ, inp.session_id))
    return inp


WAKE_SENTENCE = ("New mail for {persona} reaches this session by itself while it is open: kijito-pull's Copilot "
                 "extension sends it as a message of its own{when}.")


def _pushes(inp: HookInput, env: Environment) -> bool:
    """Will this session get a watcher: interactive, not stopped, and Copilot loads the extension (which may
    still be starting beside this very hook: the watcher waits for it to answer)."""
    from kijito_pull.harnesses.base import INTERACTIVE
    from kijito_pull.harnesses.copilot.session import push_possible
    from kijito_pull.harnesses.session import pushwatch

    return (inp.mode == INTERACTIVE and inp.session_id is not None and pushwatch.may_arm(inp, env.environ)
            and push_possible(env.environ))


def _when(inp: HookInput) -> str:
    clause = during_a_turn(getattr(inp.optin, "interrupt", INTERRUPT_ALL))
    return f" ({clause})" if clause else " (during a turn, at the next model call)"


def _start(inp: HookInput, env: Environment, out: handover.Output, extra: tuple[str, ...] = ()) -> int:
    return handover.session_start(inp, env, handover.Reshaped(out, top_level_context), extra)  # type: ignore[arg-type]


# -- the hooks' handlers (each named by its Hook in kijito_pull.harnesses.copilot.HARNESS) -----------------


def on_session_start(inp: HookInput, env: Environment) -> int:
    """copilot-session-start: waiting mail as the session's context (both keys); then, in an interactive
    session whose extension listens, its watcher is armed (after the answer is written)."""
    inp = _with_record(inp, env)
    pushes = _pushes(inp, env)
    extra = (WAKE_SENTENCE.format(persona=inp.persona, when=_when(inp)),) if pushes else ()
    handover.answer(inp, env, lambda i, e, out: _start(i, e, out, extra))
    if pushes:
        from kijito_pull.harnesses.copilot.session import HOST_ENV
        from kijito_pull.harnesses.session import lifecycle, pushwatch

        pushwatch.arm(inp, env, name=WATCH, host_env=HOST_ENV, host=lifecycle.host_process(),
                      later="new mail waits for the turn's end")
    return 0


def on_watch(inp: HookInput, env: Environment) -> int:
    """copilot-watch: the session's one watcher (copilot/watcher.py)."""
    from kijito_pull.harnesses.copilot import watcher

    return watcher.run(inp, env)


def on_stop(inp: HookInput, env: Environment) -> int:
    """copilot-stop: unseen mail blocks the stop (bounded, handover.stop)."""
    return handover.answer(_with_record(inp, env), env, handover.stop)


def on_session_end(inp: HookInput, env: Environment) -> int:
    """copilot-session-end: settles what the session was handed (handover.session_end)."""
    return handover.session_end(_with_record(inp, env), env)
