"""Kilo Code CLI: the OpenCode harness (kijito_pull.harnesses.opencode) run with its Kilo variant.

Kilo Code CLI 7.7.7 is an OpenCode fork with the same plugin API (measured, docs/kilo.md): the same plugin
file (extensions/opencode/kijito-pull.js, which learns at run time that it runs in Kilo and calls the `kilo-*`
hooks), the same handlers, record and watcher; only the names differ (opencode/variant.py: `~/.config/kilo/`,
`.kilo/`, `kilo export`, `KILO_SERVER_PASSWORD`, `@kilocode/plugin`). Standard library only.
"""

from kijito_pull.harnesses.base import FOLDER, TRANSCRIPT, Harness, Hook

HOOKS = "kijito_pull.harnesses.opencode.hooks"  # the handlers read the variant from the hook's name

HARNESS = Harness(
    "kilo", "Kilo Code CLI",
    executable="kilo",
    hooks=(
        Hook("kilo-chat-message", "chat.message", "Kilo chat.message (the plugin): waiting mail as {\"text\": ...}, "
                                                  "one more part of the user message (`{}` when none);\nwhen the "
                                                  "session's server listens, arms its watcher",
             handler=f"{HOOKS}:on_chat_message"),
        Hook("kilo-session-idle", "session.idle", "Kilo session.idle (the plugin, detached): confirms from "
                                                  "`kilo export` what the session was handed",
             handler=f"{HOOKS}:on_session_idle"),
        Hook("kilo-watch", "chat.message", "the watcher kilo-chat-message starts for a session whose server "
                                           "listens (not\nrun by the plugin): new mail as a prompt "
                                           "(POST /session/{id}/prompt_async)",
             handler=f"{HOOKS}:on_watch"),
    ),
    nothing="{}\n",
    confirmation=TRANSCRIPT,
    holders=(("kilo-push", "push"),),
    installer="kijito_pull.harnesses.kilo.installer",
    install_help="Kilo Code CLI: the OpenCode plugin in Kilo's plugin folder, and @kilocode/plugin beside it",
    project=FOLDER,  # Kilo reads <the folder it is started in>/.kilo/
    checks=(("kilo.plugin", "kijito_pull.harnesses.kilo.checks:check_plugin"),
            ("kilo.push", "kijito_pull.harnesses.kilo.checks:check_push")),
)
