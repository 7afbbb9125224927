"""GitHub Copilot CLI: its hook adapter (SessionStart, Stop, SessionEnd), the watcher that pushes new mail
through kijito-pull's extension, and the installer of its hooks file, extension and trust.

`HARNESS` is Copilot CLI's side of the Harness contract (kijito_pull.harnesses.base). Standard library
only: the hook fast gate imports this package for every `kijito-pull hook copilot-*`.

The hooks file is written in Claude Code's format (PascalCase events), which Copilot CLI 1.0.102 reads
from `~/.copilot/hooks/*.json` and `.github/hooks/*.json`: its hook input is then snake_case
(`session_id`, `transcript_path`, `stop_hook_active`), the shape the shared hand-over reads.
"""

from kijito_pull.harnesses.base import REPOSITORY, TRANSCRIPT, Harness, Hook

HARNESS = Harness(
    "copilot", "Copilot CLI",
    executable="copilot",
    hooks=(
        Hook("copilot-session-start", "SessionStart", "Copilot CLI SessionStart: waiting mail as additionalContext",
             handler="kijito_pull.harnesses.copilot.hooks:on_session_start"),
        Hook("copilot-stop", "Stop", "Copilot CLI Stop (agentStop): unseen mail blocks the stop, as claude-stop",
             handler="kijito_pull.harnesses.copilot.hooks:on_stop"),
        Hook("copilot-session-end", "SessionEnd", "Copilot CLI SessionEnd: settles the session's hand-overs",
             handler="kijito_pull.harnesses.copilot.hooks:on_session_end"),
        Hook("copilot-watch", "SessionStart", "the watcher copilot-session-start starts for an interactive session "
                                              "whose extension\nlistens (not installed as a hook): new mail through "
                                              "session.send",
             handler="kijito_pull.harnesses.copilot.hooks:on_watch"),
    ),
    nothing="",  # measured: empty output lets the agent stop
    early="kijito_pull.harnesses.session.ending:early",  # a never-handed SessionEnd ends in the gate
    mode="kijito_pull.harnesses.copilot.session:detect_mode",  # the terminal UI sets COPILOT_LOADER_PID
    # Copilot CLI's session record (~/.copilot/session-state/<id>/events.jsonl) holds the SessionStart
    # context (hook.end output) and a Stop block's reason (a user.message), measured on 1.0.102.
    confirmation=TRANSCRIPT,
    holders=(("copilot-push", "push"),),  # the session's watcher (copilot/watcher.py), its own record reader
    installer="kijito_pull.harnesses.copilot.installer",
    install_help="Copilot CLI: SessionStart, Stop and SessionEnd hooks in ~/.copilot/hooks/kijito-pull.json and "
                 "the push extension (--project: .github/hooks/, --trust records Copilot's trust)",
    project=REPOSITORY,  # Copilot looks for <repository>/.github/hooks/
    checks=(("copilot.trust", "kijito_pull.harnesses.copilot.checks:check_trust"),
            ("copilot.push", "kijito_pull.harnesses.copilot.checks:check_push")),
)
