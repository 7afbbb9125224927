#!/usr/bin/env python3
"""Development entry point that needs nothing but python3: it makes .venv, installs, then runs.

    python3 scripts/dev.py demo    # the whole loop on an embedded sandbox, no account needed
    python3 scripts/dev.py test    # lint (ruff, py39 target) and the whole test suite
    python3 scripts/dev.py test -- -k acceptance   # extra pytest arguments after --
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".kijito-pull-installed"


def _run(*cmd: str) -> int:
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT)


def ensure_venv() -> None:
    """Create .venv and install the package with its test extras, again only when pyproject.toml changed."""
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not (BIN / "python").exists():
        print(f"+ creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    if _run(str(BIN / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip") != 0:
        sys.exit("could not upgrade pip in .venv")
    if _run(str(BIN / "python"), "-m", "pip", "install", "--quiet", "-e", ".[test]") != 0:
        sys.exit("could not install kijito-pull into .venv")
    STAMP.write_text(wanted)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print(__doc__.strip())
        return 2
    ensure_venv()
    if argv[0] == "demo":
        return _run(str(BIN / "kijito-pull"), "demo")
    extra = argv[2:] if argv[1:2] == ["--"] else argv[1:]
    lint = _run(str(BIN / "ruff"), "check", "kijito_pull", "tests", "bench", "scripts")
    tests = _run(str(BIN / "python"), "-m", "pytest", *extra)
    return tests or lint


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
