"""Copilot CLI's part of the hook fast gate: the answer given before anything heavy is imported.
Standard library only (see kijito_pull.harnesses.hookgate): a SessionEnd of a session that was never
handed mail is answered here (kijito_pull.harnesses.session.ending).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Mapping
    from typing import IO

    from kijito_pull.harnesses.hookgate import HookInput

SESSION_START = "copilot-session-start"
STOP = "copilot-stop"
SESSION_END = "copilot-session-end"


def early(inp: HookInput, environ: Mapping[str, str], stderr: IO[str]) -> int | None:
    """An exit code when the hook is answered here; None when the runtime has work to do."""
    if inp.hook != SESSION_END:
        return None
    from kijito_pull.harnesses.session.ending import answer_end

    return answer_end(inp, environ, stderr)
