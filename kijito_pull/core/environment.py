"""The injectable environment a command runs in (streams, environment variables, folder), so every entry
point -- the CLI, the harness hooks -- is tested in-process (the httpie model). Imports nothing of kijito_pull."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO


@dataclass
class Environment:
    """What a command reads and writes besides files: its streams, environment variables and working
    folder, injected so that every command runs in-process in tests."""

    stdin: IO[str] = field(default_factory=lambda: sys.stdin)
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: str = field(default_factory=os.getcwd)

    @property
    def stdout_isatty(self) -> bool:
        isatty = getattr(self.stdout, "isatty", None)
        return bool(isatty and isatty())

    def error(self, message: str) -> None:
        """One clear line on stderr, prefixed with the program name, never a traceback."""
        self.stderr.write(f"kijito-pull: {message}\n")
        self.stderr.flush()
