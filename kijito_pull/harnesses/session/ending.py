"""A SessionEnd hook whose only work is settling the session's hand-overs (Gemini CLI's, Copilot CLI's).

    answer_end   in the fast gate: forget the session's own files (its block count, its record offset:
                 lifecycle.end_session), and leave the runtime out when the session was never handed mail
                 (no `handed` marker: a file test)
    settle       in the runtime: what the session's record shows is confirmed, the rest is unseen again
                 at once, so the next session gets it without waiting for a deadline

Standard library only at import (the gate imports it; see kijito_pull.harnesses.hookgate): `settle` loads
the hand-over (kijito_pull.harnesses.handover) when it runs.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Mapping
    from typing import IO

    from kijito_pull.core.environment import Environment
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


def settle(inp: HookInput, env: Environment) -> None:
    """Never raises: a problem is one stderr line (the deadline and the holder's liveness still claim the
    hand-overs back)."""
    from kijito_pull.harnesses import handover
    from kijito_pull.harnesses.hookgate import say
    from kijito_pull.harnesses.session import lifecycle

    sid = inp.session_id
    if sid is None:
        return
    try:
        handover.confirm_at_end(inp, env.environ)
        lifecycle.handed_marker(env.environ, sid).unlink(missing_ok=True)
    except Exception as exc:  # noqa: BLE001 - a hook must never crash the session it serves
        say(env.stderr, f"{inp.hook}: cannot settle this session's hand-overs ({type(exc).__name__}: {exc}); "
                        f"they are claimed back when their deadline passes")
