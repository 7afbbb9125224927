"""Codex: its hook adapter and the installer of its hooks.json entries."""
