"""The harness files kijito-pull ships: the Claude Code plugin, the pi extension, the OpenCode plugin and the
Copilot CLI extension.

In a wheel they are package data under `kijito_pull/data/` (pyproject.toml's force-include maps the
repository's own files there, so there is one copy to edit). In a development checkout (editable
install, or running from the source tree) the same files are read from the repository root.
The supervision templates are ordinary package data in `kijito_pull/harnesses/daemon/templates/` (see supervision.py).
"""

from __future__ import annotations

from pathlib import Path

from kijito_pull.core.errors import UsageError

PACKAGE = Path(__file__).resolve().parent.parent  # kijito_pull/
DATA = PACKAGE / "data"
REPO_ROOT = PACKAGE.parent

CLAUDE = "claude-plugin"
PI = "pi"
OPENCODE = "opencode"
COPILOT = "copilot"

# Relative names inside each bundle; the first one of each marks where a bundle is.
CLAUDE_FILES = (".claude-plugin/plugin.json", ".claude-plugin/marketplace.json", "hooks/hooks.json")
CLAUDE_OPTIONAL = ("monitors/monitors.json",)
PI_FILES = ("package.json", "extensions/kijito-pull.ts")
OPENCODE_FILES = ("extensions/opencode/kijito-pull.js",)
COPILOT_FILES = ("extensions/copilot/kijito-pull/extension.mjs",)


class MissingPluginFiles(UsageError, FileNotFoundError):
    """A plugin or extension file this installation should ship is not where it looks for it (exit 2)."""


def _root(bundle: str, first: str) -> Path:
    for base in (DATA / bundle, REPO_ROOT):
        if (base / first).is_file():
            return base
    raise MissingPluginFiles(f"the {bundle} files are missing from this installation of kijito-pull "
                             f"(looked in {DATA / bundle} and {REPO_ROOT}); reinstall kijito-pull")


def bundle_root(bundle: str) -> Path:
    """Where one bundle's files are: `kijito_pull/data/<bundle>` in a wheel, else the repository root."""
    first = {CLAUDE: CLAUDE_FILES[0], PI: PI_FILES[0], OPENCODE: OPENCODE_FILES[0], COPILOT: COPILOT_FILES[0]}[bundle]
    return _root(bundle, first)


def files(bundle: str) -> dict[str, Path]:
    """Relative name -> source path of every file of `bundle` ("claude-plugin", "pi", "opencode" or "copilot")."""
    root = bundle_root(bundle)
    names = (CLAUDE_FILES + CLAUDE_OPTIONAL if bundle == CLAUDE else OPENCODE_FILES if bundle == OPENCODE
             else COPILOT_FILES if bundle == COPILOT else PI_FILES)
    out = {}
    for name in names:
        path = root / name
        if path.is_file():
            out[name] = path
        elif name not in CLAUDE_OPTIONAL:
            raise MissingPluginFiles(f"{path} is missing from this installation of kijito-pull; reinstall it")
    return out


def claude_plugin_files() -> dict[str, Path]:
    return files(CLAUDE)


def pi_files() -> dict[str, Path]:
    return files(PI)


def pi_extension() -> Path:
    return files(PI)["extensions/kijito-pull.ts"]


def opencode_plugin() -> Path:
    return files(OPENCODE)["extensions/opencode/kijito-pull.js"]


def copilot_extension() -> Path:
    return files(COPILOT)["extensions/copilot/kijito-pull/extension.mjs"]
