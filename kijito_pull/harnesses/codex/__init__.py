"""Codex: its hook adapter and the installer of its hooks.json entries.

`HARNESS` is Codex's side of the Harness contract (kijito_pull.harnesses.base). Standard library
only: the hook fast gate imports this package for every `kijito-pull hook codex-*`.
"""

from kijito_pull.harnesses.base import REPOSITORY, Harness, Hook

HARNESS = Harness(
    "codex", "Codex",
    executable="codex",
    hooks=(
        Hook("codex-session-start", "SessionStart", "Codex SessionStart: waiting mail as additionalContext "
                                                    "(`{}` when none)"),
        Hook("codex-stop", "Stop", "Codex Stop: unseen mail blocks the stop, as claude-stop (`{}` when none)"),
    ),
    nothing="{}\n",  # Codex rejects empty stdout on some events
    mode=None,  # always headless: Codex sessions cannot be woken from outside, so they get no waker
    runtime="kijito_pull.harnesses.codex.hooks:run",
    # Codex's transcript (rollout) has not been measured to record hook context yet (issue 13): until it
    # is, a hand-over counts once written, as before, rather than risk repeating confirmed mail.
    confirmation=None,
    installer="kijito_pull.harnesses.codex.installer",
    install_help="Codex: SessionStart and Stop hooks in hooks.json",
    project=REPOSITORY,  # Codex looks for <repository>/.codex/hooks.json
)
