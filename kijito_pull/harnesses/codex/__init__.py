"""Codex: its hook adapter, the watcher of an interactive session, and the installer of its hooks.json entries.

`HARNESS` is Codex's side of the Harness contract (kijito_pull.harnesses.base). Standard library
only: the hook fast gate imports this package for every `kijito-pull hook codex-*`.
"""

from kijito_pull.harnesses.base import REPOSITORY, TRANSCRIPT, Harness, Hook

HARNESS = Harness(
    "codex", "Codex",
    executable="codex",
    hooks=(
        Hook("codex-session-start", "SessionStart", "Codex SessionStart: waiting mail as additionalContext "
                                                    "(`{}` when none);\nin an interactive session, arms its watcher",
             handler="kijito_pull.harnesses.codex.hooks:on_session_start"),
        Hook("codex-stop", "Stop", "Codex Stop: unseen mail blocks the stop, as claude-stop (`{}` when none)",
             handler="kijito_pull.harnesses.codex.hooks:on_stop"),
        Hook("codex-session-end", "SessionEnd", "Codex SessionEnd: settles the session's hand-overs, ends its watcher",
             handler="kijito_pull.harnesses.handover:session_end"),
        Hook("codex-watch", "SessionStart", "the watcher codex-session-start starts for an interactive session "
                                            "(not installed\nas a hook): new mail wakes it through `codex queue`",
             handler="kijito_pull.harnesses.codex.hooks:on_watch"),
    ),
    nothing="{}\n",  # Codex rejects empty stdout on some events
    mode=None,  # told from the session's rollout, not the environment (kijito_pull.harnesses.codex.session)
    # Codex's rollout records SessionStart context, Stop-block reasons and queued messages (measured on
    # 0.171.0, docs/codex.md): a hand-over is pending until the rollout shows it.
    confirmation=TRANSCRIPT,
    holders=(("codex-queue", "queue"),),  # the session's watcher (codex/watcher.py), with its own rollout reader
    installer="kijito_pull.harnesses.codex.installer",
    install_help="Codex: SessionStart, Stop and SessionEnd hooks in hooks.json (--trust records Codex's trust)",
    project=REPOSITORY,  # Codex looks for <repository>/.codex/hooks.json
    checks=(("codex.trust", "kijito_pull.harnesses.codex.checks:check_trust"),),
)
