"""Mail sources other than the embedded Kijito engine (core/source.py's contract): each imports only
the core, and the composition root (kijito_pull/context.py) picks one."""
