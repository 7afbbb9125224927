"""The toy's hooks: the shared hand-over, JSON answers, pending until the session's transcript shows it."""

from kijito_pull.harnesses import handover


def run(inp, env) -> int:
    start = inp.harness.hook(inp.hook).event == "SessionStart"
    return handover.answer(inp, env, handover.session_start if start else handover.stop)
