"""kijito-pull: keeps AI coding agents' Kijito inboxes live without ever skipping a message."""

__version__ = "0.1.0"
