"""A local package index for tests: a folder of wheels (kijito-pull's own, built from this checkout or given,
and its dependencies', with the [redis] extra) that stands in for PyPI through `pip --find-links` /
`UV_FIND_LINKS`, so every install after the one `pip download` is offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def wheel_index(wheel: Path, folder: Path) -> Path:
    """`folder` holding `wheel` and every dependency's wheel (`pip download`, the only network step)."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                           "--only-binary=:all:", "--dest", str(folder), f"{wheel}[redis]"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download of kijito-pull's dependencies failed:\n{proc.stderr[-3000:]}")
    shutil.copy2(wheel, folder / wheel.name)
    return folder


def uv_folder(folder: Path) -> Path:
    """`folder` holding only uv and uvx (links to the ones the test extra installs beside this Python)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("uv", "uvx"):
        found = shutil.which(name, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        if not found:
            raise RuntimeError(f"{name} is not installed (pip install -e .[test] installs it)")
        if not (folder / name).exists():
            (folder / name).symlink_to(found)
    return folder


def uv_env(index: Path, cache: Path) -> dict[str, str]:
    """uv offline, the local index its only source of packages, this Python its interpreter."""
    return {"UV_CACHE_DIR": str(cache), "UV_FIND_LINKS": str(index), "UV_OFFLINE": "1",
            "UV_PYTHON": sys.executable, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
