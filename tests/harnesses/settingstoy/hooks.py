"""The toy's hooks: the shared hand-over, JSON answers, pending until the session's transcript shows it."""

from kijito_pull.harnesses import handover


def on_start(inp, env) -> int:
    return handover.answer(inp, env, handover.session_start)


def on_stop(inp, env) -> int:
    return handover.answer(inp, env, handover.stop)
