"""OpenCode: its plugin (a thin shell that runs `kijito-pull hook opencode-*`), the watcher that pushes new
mail into a session whose server listens, and the installer of the plugin.

`HARNESS` is OpenCode's side of the Harness contract (kijito_pull.harnesses.base). Standard library only:
the hook fast gate imports this package for every `kijito-pull hook opencode-*`.

OpenCode runs no hook commands; its plugins are JavaScript modules it loads (measured on 1.18.33,
docs/opencode.md). Ours (extensions/opencode/kijito-pull.js) hands the CLI each user message
(`chat.message`: waiting mail goes in as one more text part of it) and each turn's end (`session.idle`: what
the session was handed is confirmed from OpenCode's own record, `opencode export`). A headless `opencode run`
takes no turn after its first, so everything waiting is handed over with the first message. A session whose
server listens (`opencode --port N`, `opencode serve`) also gets a watcher, which pushes new mail as a new
prompt (`POST /session/{id}/prompt_async`).

Kilo Code CLI (an OpenCode fork) runs all of this under its own names: variant.py, kijito_pull.harnesses.kilo.
"""

from kijito_pull.harnesses.base import FOLDER, TRANSCRIPT, Harness, Hook

HOOKS = "kijito_pull.harnesses.opencode.hooks"

HARNESS = Harness(
    "opencode", "OpenCode",
    executable="opencode",
    hooks=(
        Hook("opencode-chat-message", "chat.message", "OpenCode chat.message (the plugin): waiting mail as {\"text\": "
                                                      "...}, one more part of the user message (`{}` when none);\n"
                                                      "when the session's server listens, arms its watcher",
             handler=f"{HOOKS}:on_chat_message"),
        Hook("opencode-session-idle", "session.idle", "OpenCode session.idle (the plugin, detached): confirms from "
                                                      "`opencode export` what the session was handed",
             handler=f"{HOOKS}:on_session_idle"),
        Hook("opencode-watch", "chat.message", "the watcher opencode-chat-message starts for a session whose server "
                                               "listens (not\nrun by the plugin): new mail as a prompt "
                                               "(POST /session/{id}/prompt_async)",
             handler=f"{HOOKS}:on_watch"),
    ),
    nothing="{}\n",  # the plugin parses stdout as one JSON object
    # OpenCode's store (`opencode export <session>`, or GET /session/{id}/message of its server) holds the parts
    # the plugin added and the pushed prompts (measured on 1.18.33): a hand-over is pending until it shows them.
    confirmation=TRANSCRIPT,
    holders=(("opencode-push", "push"),),  # the session's watcher (opencode/watcher.py)
    installer="kijito_pull.harnesses.opencode.installer",
    install_help="OpenCode: the plugin in its plugin folder, and @opencode-ai/plugin where OpenCode looks for it",
    project=FOLDER,  # OpenCode reads <the folder it is started in>/.opencode/
    checks=(("opencode.plugin", "kijito_pull.harnesses.opencode.checks:check_plugin"),
            ("opencode.push", "kijito_pull.harnesses.opencode.checks:check_push")),
)
