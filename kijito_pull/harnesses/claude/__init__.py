"""Claude Code: the plugin's hooks, the waker, facts about the running host, the installer."""
