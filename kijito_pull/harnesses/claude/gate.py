"""Claude Code's part of the hook fast gate: its hook names, how its session mode is told, and the
answers given before anything heavy is imported (an ordinary prompt, a session end, a waker that is
not wanted or already armed). Standard library only (see kijito_pull.harnesses.hookgate).
"""

from __future__ import annotations

from kijito_pull.harnesses.base import HEADLESS, INTERACTIVE

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Mapping
    from typing import IO, Any

    from kijito_pull.harnesses.hookgate import HookInput

SESSION_START = "claude-session-start"
STOP = "claude-stop"
PROMPT = "claude-prompt"
WAKER = "claude-waker"
PUSHER = "claude-pusher"
SESSION_END = "claude-session-end"
HOOKS = (SESSION_START, STOP, PROMPT, WAKER, PUSHER, SESSION_END)
SOCKET_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"  # kijito_pull.harnesses.claude.inbox_socket (a test keeps them equal)

MODE_ENV = "KIJITO_PULL_MODE"
SESSION_ENV = "CLAUDE_CODE_SESSION_ID"
DOORBELL = "[kijito-pull doorbell]"


def detect_mode(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """Interactive or headless: `KIJITO_PULL_MODE` wins, else Claude Code's `CLAUDE_CODE_ENTRYPOINT`.

    Measured: `cli` in an interactive session; `sdk-cli` under `claude -p` (stream-json included).
    Anything else, or nothing, is treated as headless: a headless run is never sent a waker.
    """
    raw = environ.get(MODE_ENV, "").strip().lower()
    if raw in (INTERACTIVE, HEADLESS):
        return raw, None
    note = f"ignoring {MODE_ENV}={raw[:20]!r} (expected interactive or headless)" if raw else None
    entry = environ.get("CLAUDE_CODE_ENTRYPOINT", "").strip()
    return (INTERACTIVE if entry == "cli" else HEADLESS), note


def is_doorbell(data: dict[str, Any]) -> bool:
    """A prompt a waker's doorbell started: the only prompts the prompt hook hands mail to."""
    prompt = data.get("prompt")
    return isinstance(prompt, str) and DOORBELL in prompt


def early(inp: HookInput, environ: Mapping[str, str], stderr: IO[str]) -> int | None:
    """The Claude hooks that usually have nothing to do finish here, before the heavy imports.
    An exit code when the hook is answered; None when the runtime has work to do."""
    from kijito_pull.harnesses.hookgate import say
    from kijito_pull.harnesses.session import lifecycle

    if inp.hook == SESSION_END:
        from kijito_pull.harnesses.session.ending import answer_end

        # Mail handed to this session and not yet confirmed: the runtime settles it from the transcript.
        return answer_end(inp, environ, stderr)
    if inp.hook == STOP and inp.session_id is not None:
        # Lean: the session's live waker long-polls the server and vouches that nothing is new (and that
        # the cursor has not changed since it looked): no request, no HTTP stack. Any doubt: pull as usual.
        try:
            if lifecycle.nothing_new(environ, inp.session_id, inp.persona):
                return 0
        except Exception:  # noqa: BLE001 - a doubt, never a failure: the runtime pulls
            pass
    if inp.hook in (WAKER, PUSHER):
        if inp.hook == WAKER and inp.mode != INTERACTIVE:
            return 0  # headless runs get no waker: a wake would be dropped (their pusher and Stop hook serve them)
        if inp.hook == PUSHER and (inp.mode == INTERACTIVE or not environ.get(SOCKET_ENV)):
            return 0  # the pusher is for headless runs with an inbox socket (interactive: the waker pushes)
        if inp.session_id is None:
            say(stderr, f"{inp.hook}: {lifecycle.Result.SESSION_ID_UNAVAILABLE.value}: {inp.session_problem}")
            return 0
        try:
            if lifecycle.stop_marker(environ, inp.project, inp.persona) is not None:
                return 0  # stopped by `kijito-pull session stop`: honoured until `session start`
            if lifecycle.live_lease(environ, inp.session_id) is not None:
                return 0  # already armed: one waker per session
        except lifecycle.LifecycleError as exc:
            say(stderr, f"{inp.hook}: {lifecycle.Result.STARTUP_FAILED.value}: {exc}")
            return 0
    return None
