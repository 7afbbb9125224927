"""The Codex adapter: Codex's hooks (hooks.json) speak Claude Code's vocabulary, with Codex's rules.

    codex-session-start   SessionStart: waiting mail as `{"hookSpecificOutput": {"hookEventName":
                          "SessionStart", "additionalContext": ...}}`
    codex-stop            Stop: unseen mail as `{"decision": "block", "reason": ...}`

The work is the Claude adapter's (`kijito_pull.harnesses.claude.hooks.session_start` / `stop`: the same opt-in
gate and fast path, one pull through the shared engine, acknowledged once the JSON is written). What
differs for Codex:

- stdout is never empty: "nothing to do" is `{}` (Codex rejects empty output on some events), also
  when the project has not opted in, the input is bad, or the hook gives up after its budget;
- Codex has no cap on consecutive Stop blocks, so the two guards matter more: the cursor moves past
  mail as soon as the block is written (the next Stop sees nothing new, so the same mail never
  blocks twice), and at most `max_stop_blocks` (default 3) blocks in a row per session;
- Codex sessions are treated as headless: no waker (Codex cannot be woken from outside), and the
  session-start text does not promise one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO, Any

from kijito_pull.cli.environment import Environment
from kijito_pull.harnesses import hookgate as fastpath
from kijito_pull.harnesses.claude import hooks as claude
from kijito_pull.harnesses.hookgate import CODEX_NOTHING, CODEX_SESSION_START, CODEX_STOP, HEADLESS, HookInput, say

# The Claude hook whose logic each Codex hook runs.
SAME_AS = {CODEX_SESSION_START: fastpath.SESSION_START, CODEX_STOP: fastpath.STOP}


class CodexOutput(claude.Output):
    """The Claude adapter's budgeted stdout, answering `{}` when the budget runs out with nothing written."""

    def _expire(self) -> None:
        with self._lock:
            if self._started:
                return
            self._expired = True
            self._started = True
        say(self.stderr, f"{self.hook}: gave up after {self.budget:g} s (the Kijito server is slow or unreachable); "
                         f"nothing was acknowledged, unseen mail waits for the next pull")
        try:
            self.stdout.write(CODEX_NOTHING)
            self.stdout.flush()
        except (OSError, ValueError):
            pass
        self._exit(0)


class _Named:
    """stderr for the shared Claude code paths, with their messages naming the Codex hook and harness."""

    def __init__(self, stream: IO[str], hook: str):
        self._stream = stream
        self._pairs = ((f"kijito-pull: {SAME_AS[hook]}:", f"kijito-pull: {hook}:"), ("Claude Code", "Codex"))

    def write(self, text: str) -> int:
        for old, new in self._pairs:
            text = text.replace(old, new)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def run(inp: HookInput, env: Environment, *, exit_fn: Callable[[int], None] = os._exit) -> int:
    """Run one Codex hook. Always exit 0 with one JSON object on stdout (`{}` for nothing); never raises."""
    errors = _Named(env.stderr, inp.hook)
    out: CodexOutput | None = None
    try:
        inp.mode = HEADLESS  # no waker for Codex, whatever $KIJITO_PULL_MODE says
        handler = {CODEX_SESSION_START: claude.session_start, CODEX_STOP: claude.stop}[inp.hook]
        shared = Environment(stdin=env.stdin, stdout=env.stdout, stderr=errors,  # type: ignore[arg-type]
                             environ=env.environ, cwd=env.cwd)
        with CodexOutput(env.stdout, errors, inp.hook, claude.hook_budget(env.environ), exit_fn) as out:  # type: ignore[arg-type]
            handler(inp, shared, out)
    except Exception as exc:  # noqa: BLE001 - a hook must never crash the session it serves
        say(errors, f"{inp.hook}: internal error ({type(exc).__name__}: {exc}); nothing was acknowledged")  # type: ignore[arg-type]
    if out is None:
        fastpath.answer_nothing(env.stdout)
    elif not out.written:
        out.json({})
    return 0
