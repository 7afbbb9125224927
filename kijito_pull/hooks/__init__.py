"""Harness adapters: the Claude Code plugin's hook entry points (`kijito-pull hook claude-*`)."""
