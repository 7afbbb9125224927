"""The fast-gate answer of a SessionEnd hook whose only work is settling the session's hand-overs (Gemini
CLI's, Copilot CLI's; the settling itself is handover.session_end): forget the session's own files (its
block count, its record offset: lifecycle.end_session), and leave the runtime out when the session was
never handed mail (no `handed` marker: a file test). Standard library only (see
kijito_pull.harnesses.hookgate).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Mapping
    from typing import IO

    from kijito_pull.harnesses.hookgate import HookInput


def answer_end(inp: HookInput, environ: Mapping[str, str], stderr: IO[str]) -> int | None:
    """0 when the SessionEnd is answered here; None when the runtime has hand-overs to settle."""
    if inp.session_id is None:
        return 0  # nothing can be held by a session without a valid id
    from kijito_pull.harnesses.hookgate import say
    from kijito_pull.harnesses.session import lifecycle

    try:
        lifecycle.end_session(environ, inp.session_id)
    except lifecycle.LifecycleError as exc:
        say(stderr, f"{inp.hook}: {exc}")
    return None if lifecycle.handed_marker(environ, inp.session_id).exists() else 0

