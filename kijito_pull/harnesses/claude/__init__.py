"""Claude Code: the plugin's hooks, the waker, facts about the running host, the installer.

`HARNESS` is Claude Code's side of the Harness contract (kijito_pull.harnesses.base). Standard
library only: the hook fast gate imports this package for every `kijito-pull hook claude-*`.
"""

from kijito_pull.harnesses.base import TRANSCRIPT, Harness, Hook

HARNESS = Harness(
    "claude", "Claude Code",
    executable="claude",
    hooks=(
        Hook("claude-session-start", "SessionStart", "SessionStart: waiting mail as additionalContext",
             handler="kijito_pull.harnesses.claude.hooks:on_session_start"),
        Hook("claude-stop", "Stop", "Stop: unseen mail blocks the stop (at most $KIJITO_PULL_MAX_STOP_BLOCKS\n"
                                    "times in a row, default 3); never twice for the same mail",
             handler="kijito_pull.harnesses.claude.hooks:on_stop"),
        Hook("claude-prompt", "UserPromptSubmit", "UserPromptSubmit: hands the mail to a turn a waker's doorbell "
                                                  "started", wants="kijito_pull.harnesses.claude.gate:is_doorbell",
             handler="kijito_pull.harnesses.claude.hooks:on_prompt"),
        Hook("claude-waker", "SessionStart", "SessionStart/Stop (asyncRewake): the session's one waker; exits 2 "
                                             "with a\ndoorbell when new mail arrives (interactive sessions only)",
             handler="kijito_pull.harnesses.claude.hooks:run_waker"),
        Hook("claude-pusher", "SessionStart", "SessionStart (async): in claude -p with a session inbox socket, "
                                              "pushes new\nmail into the run as it arrives (headless only)",
             handler="kijito_pull.harnesses.claude.hooks:run_pusher"),
        Hook("claude-session-end", "SessionEnd", "SessionEnd: ends the session's waker, settles its hand-overs",
             handler="kijito_pull.harnesses.handover:session_end"),
    ),
    nothing="",
    mode="kijito_pull.harnesses.claude.gate:detect_mode",
    session_env="CLAUDE_CODE_SESSION_ID",
    project_env="CLAUDE_PROJECT_DIR",  # set by Claude Code for its hooks
    early="kijito_pull.harnesses.claude.gate:early",
    confirmation=TRANSCRIPT,
    holders=(("claude-push", "push-transcript"),),  # the pusher (claude/push.py), with its own transcript reader
    installer="kijito_pull.harnesses.claude.installer",
    install_help="Claude Code: the plugin, via `claude plugin marketplace add` + `claude plugin install`",
    checks=(("waker", "kijito_pull.harnesses.claude.checks:check_waker"),
            ("push", "kijito_pull.harnesses.claude.checks:check_push")),
)
