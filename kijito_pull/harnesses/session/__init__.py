"""Session machinery shared by the harnesses: the project opt-in, the per-session lease, the stop
marker. Standard library only (the hook fast gate imports it)."""
