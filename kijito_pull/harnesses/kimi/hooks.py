"""The Kimi Code CLI adapter: Kimi's `[[hooks]]` (config.toml) read a hook's answer their own way.

    kimi-prompt        UserPromptSubmit: unseen mail as `{"message": ...}`, which Kimi puts before the prompt
                       as a user message of its own (`<hook_result hook_event="UserPromptSubmit">`). Kimi drops
                       every SessionStart answer, so the first prompt is where the mail waiting at session
                       start goes; each later prompt carries what arrived while the session was idle
    kimi-stop          Stop: unseen mail as `{"hookSpecificOutput": {"permissionDecision": "deny",
                       "permissionDecisionReason": ...}}` (Kimi ignores Claude Code's `decision: block`): Kimi
                       appends the reason as a user message and runs one more step. Kimi allows one such
                       continuation a turn and says `stop_hook_active: false` always, so the count of blocks
                       in a row is kijito-pull's own, reset at every prompt (at most `max_stop_blocks`,
                       default 3); after a block it starts the settler
    kimi-settle        the settler (started by kimi-stop, never by Kimi): Kimi runs no hook after the
                       continuation (no second Stop; no SessionEnd under `kimi -p`), so this process confirms
                       the hand-over from the record as soon as it shows it (handover.confirm_soon, bounded)
    kimi-session-end   SessionEnd (the shared handover.session_end)

The work is the shared hand-over (kijito_pull.harnesses.handover: one pull through the shared engine,
pending with the session until its record shows it; the record and its rule: kimi/record.py), behind the
same opt-in gate as every hook. "Nothing to do" is empty stdout: Kimi would hand any other stdout, `{}`
included, to the model as a message. A hook's stderr at exit 0 is not shown (measured under `kimi -p`).
"""

from __future__ import annotations

from typing import Any

from kijito_pull.core import render
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import handover
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.session import lifecycle

SETTLE = "kimi-settle"
HOST_ENV = "KIJITO_PULL_KIMI_HOST"  # the Kimi process the settler watches (it is started detached)


def kimi_answer(obj: dict[str, Any]) -> dict[str, Any]:
    """An answer in the shape Kimi reads: context as `message`, a Stop block as a deny."""
    inner = obj.get("hookSpecificOutput")
    if isinstance(inner, dict) and isinstance(inner.get("additionalContext"), str):
        return {"message": inner["additionalContext"]}
    if obj.get("decision") == "block" and isinstance(obj.get("reason"), str):
        return {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": obj["reason"]}}
    return obj


def prompt(inp: HookInput, env: Environment, out: handover.Output) -> int:
    """Unseen mail as a message before the prompt; a failure is one stderr line (the mail waits)."""
    answer = handover.Reshaped(out, kimi_answer)
    sink = handover.HookSink(lambda text: answer.json(handover.context_json("UserPromptSubmit", text)))
    report = handover.checked_pull(inp, env, out, sink, failed="; nothing was acknowledged, unseen mail comes with "
                                                               "a later prompt or turn end")
    if report is None:
        return 0
    for note in sink.notes if not report.delivered else ():
        say(env.stderr, f"{inp.hook}: {render.sanitize(note)}")
    return 0


def stop(inp: HookInput, env: Environment, out: handover.Output) -> int:
    return handover.stop(inp, env, handover.Reshaped(out, kimi_answer))  # type: ignore[arg-type]


# -- the hooks' handlers (each named by its Hook in kijito_pull.harnesses.kimi.HARNESS) ------------------------


def on_prompt(inp: HookInput, env: Environment) -> int:
    """kimi-prompt: a new prompt ends a run of Stop blocks; then unseen mail goes before it."""
    if inp.session_id is not None:
        try:
            lifecycle.write_blocks(env.environ, inp.session_id, 0)
        except lifecycle.LifecycleError as exc:
            say(env.stderr, f"{inp.hook}: cannot reset the block count: {exc}")
    return handover.answer(inp, env, prompt)


def on_stop(inp: HookInput, env: Environment) -> int:
    """kimi-stop: unseen mail continues the turn (bounded); after a block, the settler confirms it."""
    sid = inp.session_id
    if sid is not None:
        try:  # Kimi says stop_hook_active: false always; a block since the last prompt is what it means
            inp.data["stop_hook_active"] = lifecycle.read_blocks(env.environ, sid) > 0
        except lifecycle.LifecycleError:
            inp.data["stop_hook_active"] = False
    blocked: list[bool] = []

    def handler(i: HookInput, e: Environment, out: handover.Output) -> int:
        code = stop(i, e, out)
        blocked.append(bool(out.written))
        return code

    code = handover.answer(inp, env, handler)
    if blocked and blocked[0] and sid is not None:
        _settle_later(inp, env)
    return code


def _settle_later(inp: HookInput, env: Environment) -> None:
    import json

    from kijito_pull.harnesses.session import pushwatch

    try:
        log = lifecycle.sessions_dir(env.environ) / f"{inp.session_id}.settle.log"
        pushwatch.spawn(SETTLE, json.dumps(inp.data).encode(), env.environ, HOST_ENV, lifecycle.host_process(), log)
    except (OSError, lifecycle.LifecycleError) as exc:
        say(env.stderr, f"{inp.hook}: the settler could not be started ({exc}); the hand-over is confirmed by the "
                        f"session's next hook, or handed over again when the session is gone")


def on_settle(inp: HookInput, env: Environment) -> int:
    """kimi-settle: confirm the session's hand-over from its record as soon as it shows it (bounded)."""
    from kijito_pull.harnesses.session import pushwatch

    code = handover.confirm_soon(inp, env, pushwatch.parse_host(env.environ.get(HOST_ENV)))
    log = lifecycle.sessions_dir(env.environ) / f"{inp.session_id}.settle.log"
    try:
        if log.stat().st_size == 0:
            log.unlink()  # nothing to say: leave no file behind
    except (OSError, lifecycle.LifecycleError):
        pass
    return code
