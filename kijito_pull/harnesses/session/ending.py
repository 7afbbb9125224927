"""The fast-gate answer of a SessionEnd hook whose only work is settling the session's hand-overs (the
settling itself is handover.session_end): forget the session's own files (its block count, its record
offset: lifecycle.end_session), and leave the runtime out when the session was never handed mail (no
`handed` marker: a file test). Standard library only (see kijito_pull.harnesses.hookgate).

`early` is the whole early answer of a harness whose only early answer is that one (Gemini CLI, Copilot
CLI name it as their `Harness.early`); a harness with more early answers calls `answer_end` from its own
(Claude Code's gate).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Mapping
    from typing import IO

    from kijito_pull.harnesses.hookgate import HookInput

SESSION_END = "SessionEnd"  # the harness event (Hook.event) this answer is for


def early(inp: HookInput, environ: Mapping[str, str], stderr: IO[str]) -> int | None:
    """An exit code when the hook is its harness's SessionEnd and is answered here; None otherwise."""
    hook = inp.harness.hook(inp.hook) if inp.harness is not None else None
    if hook is None or hook.event != SESSION_END:
        return None
    return answer_end(inp, environ, stderr)


def answer_end(inp: HookInput, environ: Mapping[str, str], stderr: IO[str]) -> int | None:
    """0 when the SessionEnd is answered here; None when the runtime has hand-overs to settle."""
    from kijito_pull.harnesses.hookgate import say
    from kijito_pull.harnesses.session import lifecycle

    if inp.session_id is None:  # nothing can be held by a session without a valid id
        say(stderr, f"{inp.hook}: {lifecycle.Result.SESSION_ID_UNAVAILABLE.value}: {inp.session_problem}")
        return 0
    try:
        lifecycle.end_session(environ, inp.session_id)
    except lifecycle.LifecycleError as exc:
        say(stderr, f"{inp.hook}: {exc}")
    return None if lifecycle.handed_marker(environ, inp.session_id).exists() else 0
