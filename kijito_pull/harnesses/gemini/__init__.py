"""Gemini CLI: its hook adapter (SessionStart, AfterAgent, SessionEnd), the installer of its settings.json
hooks, and its folder trust.

`HARNESS` is Gemini CLI's side of the Harness contract (kijito_pull.harnesses.base). Standard library
only: the hook fast gate imports this package for every `kijito-pull hook gemini-*`.

Gemini CLI has no route by which mail can be pushed into a running session (measured on 0.61.0: no socket,
HTTP route or queue command): its turn hooks are the delivery. SessionStart hands waiting mail over as
context, AfterAgent hands over what arrived during the turn by refusing the turn's end.
"""

from kijito_pull.harnesses.base import FOLDER, TRANSCRIPT, Harness, Hook

HARNESS = Harness(
    "gemini", "Gemini CLI",
    executable="gemini",
    hooks=(
        Hook("gemini-session-start", "SessionStart", "Gemini CLI SessionStart: waiting mail as additionalContext "
                                                     "(`{}` when none)",
             handler="kijito_pull.harnesses.gemini.hooks:on_session_start"),
        Hook("gemini-after-agent", "AfterAgent", "Gemini CLI AfterAgent: unseen mail refuses the turn's end, so it "
                                                 "becomes the next prompt\n(at most $KIJITO_PULL_MAX_STOP_BLOCKS times "
                                                 "in a row, default 3; `{}` when none)",
             handler="kijito_pull.harnesses.gemini.hooks:on_after_agent"),
        Hook("gemini-session-end", "SessionEnd", "Gemini CLI SessionEnd: settles the session's hand-overs",
             handler="kijito_pull.harnesses.handover:session_end"),
    ),
    nothing="{}\n",  # with empty stdout Gemini CLI would show a hook's stderr lines to the user as a message
    session_env="GEMINI_SESSION_ID",
    early="kijito_pull.harnesses.session.ending:early",  # a never-handed SessionEnd ends in the gate
    # Gemini CLI's session record (chats/session-*.jsonl, named in every hook input as transcript_path) holds
    # the SessionStart context and the AfterAgent reason as user records (measured on 0.61.0, docs/gemini.md).
    confirmation=TRANSCRIPT,
    installer="kijito_pull.harnesses.gemini.installer",
    install_help="Gemini CLI: SessionStart, AfterAgent and SessionEnd hooks in settings.json (--trust records "
                 "Gemini's folder trust)",
    project=FOLDER,  # Gemini CLI reads <the folder it is started in>/.gemini/settings.json
    checks=(("gemini.trust", "kijito_pull.harnesses.gemini.checks:check_trust"),),
)
