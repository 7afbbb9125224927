"""An embedded Kijito-compatible API server on loopback, backed by SQLite: demo, development, tests."""

from __future__ import annotations

from kijito_pull.sandbox.app import Sandbox

__all__ = ["Sandbox"]
