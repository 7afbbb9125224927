"""Gemini CLI's part of the hook fast gate: the answer given before anything heavy is imported.
Standard library only (see kijito_pull.harnesses.hookgate).

SessionEnd forgets the session's own files (its block count, its record offset: lifecycle.end_session);
a session that was never handed mail has nothing more to settle, so it is answered here, by a file test
(the session's `handed` marker, kijito_pull.harnesses.session.lifecycle), without the runtime.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Mapping
    from typing import IO

    from kijito_pull.harnesses.hookgate import HookInput

SESSION_START = "gemini-session-start"
AFTER_AGENT = "gemini-after-agent"
SESSION_END = "gemini-session-end"


def early(inp: HookInput, environ: Mapping[str, str], stderr: IO[str]) -> int | None:
    """An exit code when the hook is answered here; None when the runtime has work to do."""
    if inp.hook != SESSION_END:
        return None
    if inp.session_id is None:
        return 0  # nothing can be held by a session without a valid id
    from kijito_pull.harnesses.hookgate import say
    from kijito_pull.harnesses.session import lifecycle

    try:
        lifecycle.end_session(environ, inp.session_id)
    except lifecycle.LifecycleError as exc:
        say(stderr, f"{inp.hook}: {exc}")
    return None if lifecycle.handed_marker(environ, inp.session_id).exists() else 0
