"""Qwen Code: its hook adapter (SessionStart, UserPromptSubmit, Stop, SessionEnd) and the installer of its
settings.json hooks.

`HARNESS` is Qwen Code's side of the Harness contract (kijito_pull.harnesses.base). Standard library only:
the hook fast gate imports this package for every `kijito-pull hook qwen-*`.

Qwen Code (a Gemini CLI fork, measured on 0.24.4: docs/qwen.md) reads Claude Code's hook vocabulary from
`settings.json` (user and project), with Claude's event names and timeouts in seconds. SessionStart hands
waiting mail over as context (Qwen puts it in the system prompt of every request), UserPromptSubmit what
arrived since as context for the prompt, and Stop what arrived during the turn by blocking the stop. What
the model was given is confirmed from Qwen's chat record by its own rule (kijito_pull.harnesses.qwen.record).
A TUI session also gets a watcher that pushes new mail through Qwen's session inbox
(kijito_pull.harnesses.qwen.watcher).
"""

from kijito_pull.harnesses.base import FOLDER, TRANSCRIPT, Harness, Hook

HOOKS = "kijito_pull.harnesses.qwen.hooks"

HARNESS = Harness(
    "qwen", "Qwen Code",
    executable="qwen",
    hooks=(
        Hook("qwen-session-start", "SessionStart", "Qwen Code SessionStart: waiting mail as additionalContext "
                                                   "(Qwen puts it in the system prompt)",
             handler=f"{HOOKS}:on_session_start"),
        Hook("qwen-prompt", "UserPromptSubmit", "Qwen Code UserPromptSubmit: mail that arrived since as context for "
                                                "the prompt (`{}` when none,\nand for the prompt Qwen makes of a "
                                                "Stop block's reason)",
             wants="kijito_pull.harnesses.qwen.gate:wants_prompt", handler=f"{HOOKS}:on_prompt"),
        Hook("qwen-stop", "Stop", "Qwen Code Stop: unseen mail blocks the stop, so it becomes the next prompt\n(at "
                                  "most $KIJITO_PULL_MAX_STOP_BLOCKS times in a row, default 3; `{}` when none)",
             handler=f"{HOOKS}:on_stop"),
        Hook("qwen-session-end", "SessionEnd", "Qwen Code SessionEnd: settles the session's hand-overs",
             handler="kijito_pull.harnesses.handover:session_end"),
        Hook("qwen-watch", "SessionStart", "the watcher qwen-session-start starts for a TUI session (not installed "
                                           "as a hook): new mail\nthrough the session inbox",
             handler=f"{HOOKS}:on_watch"),
    ),
    nothing="{}\n",
    mode="kijito_pull.harnesses.qwen.session:detect_mode",  # a TUI registers its session (and inbox)
    session_env="QWEN_CODE_SESSION_ID",
    project_env="QWEN_PROJECT_DIR",
    early="kijito_pull.harnesses.session.ending:early",  # a never-handed SessionEnd ends in the gate
    # Qwen's chat record (named in every hook input as transcript_path) shows the prompts with their
    # UserPromptSubmit context and each model reply, never the SessionStart context or a Stop reason:
    # qwen/record.py reads it by that rule.
    confirmation=TRANSCRIPT,
    record="kijito_pull.harnesses.qwen.record:record_of",
    holders=(("qwen-push", "qwen-push"),),  # the session's watcher (qwen/watcher.py), its own record reader
    installer="kijito_pull.harnesses.qwen.installer",
    install_help="Qwen Code: SessionStart, UserPromptSubmit, Stop and SessionEnd hooks in settings.json",
    project=FOLDER,  # Qwen reads <the folder it is started in>/.qwen/settings.json
    checks=(("qwen.trust", "kijito_pull.harnesses.qwen.checks:check_trust"),),
)
