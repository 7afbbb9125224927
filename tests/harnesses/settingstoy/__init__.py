"""A toy harness whose hooks live in a JSON settings file (the shape of Codex or Gemini CLI), registered only
at test time (tests/harnesses/test_settings_harness.py). This folder is all of it."""

from kijito_pull.harnesses.base import TRANSCRIPT, Harness, Hook

HOOKS = "tests.harnesses.settingstoy.hooks"
HARNESS = Harness(
    "settingstoy", "Settings Toy",
    executable="settingstoy",
    hooks=(Hook("settingstoy-session-start", "SessionStart", "waiting mail as context", handler=f"{HOOKS}:on_start"),
           Hook("settingstoy-stop", "Stop", "unseen mail blocks the stop", handler=f"{HOOKS}:on_stop"),
           Hook("settingstoy-session-end", "SessionEnd", "settles the session's hand-overs",
                handler="kijito_pull.harnesses.handover:session_end")),
    nothing="{}\n",
    project_env="SETTINGSTOY_PROJECT_DIR",
    confirmation=TRANSCRIPT,
    installer="tests.harnesses.settingstoy.installer",
    install_help="Settings Toy: SessionStart, Stop and SessionEnd hooks in .settingstoy/settings.json",
    checks=(("settingstoy.hooks", "tests.harnesses.settingstoy.checks:check"),),
)
