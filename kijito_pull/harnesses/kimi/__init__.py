"""Kimi Code CLI: its hook adapter (UserPromptSubmit, Stop, SessionEnd), the installer of its `[[hooks]]`
tables in config.toml, and the settler that confirms a Stop hand-over from the session's record.

`HARNESS` is Kimi Code CLI's side of the Harness contract (kijito_pull.harnesses.base). Standard library
only: the hook fast gate imports this package for every `kijito-pull hook kimi-*`.

Kimi Code CLI has no route by which mail can be pushed into a running session (measured on 2.1.0: no socket,
HTTP route or queue of the TUI's; `kimi web` serves only its own sessions): its turn hooks are the delivery.
Its SessionStart output never reaches the model, so the mail waiting at session start goes with the first
prompt (UserPromptSubmit), as does whatever arrived while the session was idle; a Stop hook continues the
turn with what arrived during it (docs/kimi.md).
"""

from kijito_pull.harnesses.base import TRANSCRIPT, USER, Harness, Hook

HOOKS = "kijito_pull.harnesses.kimi.hooks"

HARNESS = Harness(
    "kimi", "Kimi Code CLI",
    executable="kimi",
    hooks=(
        Hook("kimi-prompt", "UserPromptSubmit", "Kimi Code CLI UserPromptSubmit: unseen mail as a message before the "
                                                "prompt\n(the first prompt carries what waited at session start; "
                                                "nothing when none)",
             handler=f"{HOOKS}:on_prompt"),
        Hook("kimi-stop", "Stop", "Kimi Code CLI Stop: unseen mail continues the turn (Kimi allows one continuation "
                                  "a turn;\nat most $KIJITO_PULL_MAX_STOP_BLOCKS between prompts, default 3)",
             handler=f"{HOOKS}:on_stop"),
        Hook("kimi-session-end", "SessionEnd", "Kimi Code CLI SessionEnd: settles the session's hand-overs",
             handler="kijito_pull.harnesses.handover:session_end"),
        Hook("kimi-settle", "Stop", "the settler kimi-stop starts after a hand-over (not installed as a hook): "
                                    "confirms it\nfrom the session's wire.jsonl as soon as it shows it",
             handler=f"{HOOKS}:on_settle"),
    ),
    nothing="",  # Kimi takes any other stdout, `{}` included, as a message for the model
    early="kijito_pull.harnesses.session.ending:early",  # a never-handed SessionEnd ends in the gate
    # Kimi's hook input names no transcript: the session's wire.jsonl is found from its id (kimi/record.py);
    # only its context.append_message records count, the messages the model is sent.
    confirmation=TRANSCRIPT,
    record="kijito_pull.harnesses.kimi.record:record",
    installer="kijito_pull.harnesses.kimi.installer",
    install_help="Kimi Code CLI: UserPromptSubmit, Stop and SessionEnd hooks in its config.toml (--user only: Kimi "
                 "reads hooks from no project file)",
    scopes=(USER,),
    checks=(("kimi.config", "kijito_pull.harnesses.kimi.checks:check_config"),),
)
