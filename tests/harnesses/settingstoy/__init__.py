"""A toy harness whose hooks live in a JSON settings file (the shape of Codex or Gemini CLI), registered only
at test time (tests/harnesses/test_settings_harness.py). This folder is all of it."""

from kijito_pull.harnesses.base import TRANSCRIPT, Harness, Hook

HARNESS = Harness(
    "settingstoy", "Settings Toy",
    executable="settingstoy",
    hooks=(Hook("settingstoy-session-start", "SessionStart", "Settings Toy SessionStart: waiting mail as context"),
           Hook("settingstoy-stop", "Stop", "Settings Toy Stop: unseen mail blocks the stop")),
    nothing="{}\n",
    project_env="SETTINGSTOY_PROJECT_DIR",
    runtime="tests.harnesses.settingstoy.hooks:run",
    confirmation=TRANSCRIPT,
    installer="tests.harnesses.settingstoy.installer",
    install_help="Settings Toy: SessionStart and Stop hooks in .settingstoy/settings.json",
    checks=(("settingstoy.hooks", "tests.harnesses.settingstoy.checks:check"),),
)
