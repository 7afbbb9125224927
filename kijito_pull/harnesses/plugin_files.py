"""The harness files kijito-pull ships: the Claude Code plugin, the pi extension, the OpenCode plugin and the
Copilot CLI extension.

In a wheel they are package data under `kijito_pull/data/` (pyproject.toml's force-include maps the
repository's own files there, so there is one copy to edit). In a development checkout (editable
install, or running from the source tree) the same files are read from the repository root.
The supervision templates are ordinary package data in `kijito_pull/harnesses/daemon/templates/` (see supervision.py).
"""

from __future__ import annotations

import os
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
#: The launcher every harness's hooks and plugins start kijito-pull through (harnesses/launcher.py).
LAUNCHER = "bin/kijito-pull-launch"
CLAUDE_FILES = (".claude-plugin/plugin.json", ".claude-plugin/marketplace.json", "hooks/hooks.json", LAUNCHER)
CLAUDE_OPTIONAL = ("monitors/monitors.json",)
PI_FILES = ("package.json", "extensions/kijito-pull.ts")  # and LAUNCHER, from the Claude bundle
OPENCODE_FILES = ("extensions/opencode/kijito-pull.js",)
COPILOT_FILES = ("extensions/copilot/kijito-pull/extension.mjs",)
BUNDLES = {CLAUDE: CLAUDE_FILES, PI: PI_FILES, OPENCODE: OPENCODE_FILES, COPILOT: COPILOT_FILES}


class MissingPluginFiles(UsageError, FileNotFoundError):
    """A plugin or extension file this installation should ship is not where it looks for it (exit 2)."""


#: Where each bundle's files are in a checkout, when not at the repository root: the Claude Code plugin has a
#: folder of its own, so that no other harness installing this repository finds its hooks.
IN_REPOSITORY = {CLAUDE: "plugins/claude"}


def _root(bundle: str, first: str) -> Path:
    for base in (DATA / bundle, REPO_ROOT / IN_REPOSITORY.get(bundle, "")):
        if (base / first).is_file():
            return base
    raise MissingPluginFiles(f"the {bundle} files are missing from this installation of kijito-pull "
                             f"(looked in {DATA / bundle} and {REPO_ROOT / IN_REPOSITORY.get(bundle, '')}); "
                             f"reinstall kijito-pull")


def bundle_root(bundle: str) -> Path:
    """Where one bundle's files are: `kijito_pull/data/<bundle>` in a wheel, else in the checkout (the
    repository root, the Claude Code plugin's own folder plugins/claude/)."""
    return _root(bundle, BUNDLES[bundle][0])


def files(bundle: str) -> dict[str, Path]:
    """Relative name -> source path of every file of `bundle` ("claude-plugin", "pi", "opencode" or "copilot")."""
    root = bundle_root(bundle)
    out = {}
    for name in BUNDLES[bundle] + (CLAUDE_OPTIONAL if bundle == CLAUDE else ()):
        path = root / name
        if path.is_file():
            out[name] = path
        elif name not in CLAUDE_OPTIONAL:
            raise MissingPluginFiles(f"{path} is missing from this installation of kijito-pull; reinstall it")
    if bundle == PI:  # the package's own launcher (one file in the wheel: the Claude plugin's)
        out[LAUNCHER] = launcher()
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


def launcher() -> Path:
    """The launcher as shipped (the Claude plugin's copy: every bundle carries the same file)."""
    return files(CLAUDE)[LAUNCHER]


def launcher_contents(here: list[str] | None = None) -> bytes:
    """The launcher's bytes with the installing kijito-pull (`here`, argv words; this installation when
    None) as its first choice; a command of more than one word (`python -m kijito_pull`) is not
    written, and the launcher goes to PATH, then uvx."""
    from kijito_pull.harnesses import installkit
    from kijito_pull.harnesses.launcher import text_with

    words = installkit.this_command() if here is None else here
    return text_with(launcher().read_text("utf-8"), words[0] if len(words) == 1 else None).encode("utf-8")


def launcher_command(environ, dry_run: bool = False) -> list[str]:
    """The hook command's first word for a harness whose hooks `kijito-pull install` writes: the launcher
    in kijito-pull's data folder (same path across upgrades, and after a `uvx` run whose copy is gone),
    written there now unless `dry_run`."""
    from kijito_pull.harnesses import installkit

    path = installkit.data_dir(environ) / LAUNCHER
    if not dry_run:
        installkit.materialize(path.parent.parent, {LAUNCHER: launcher()}, contents={LAUNCHER: launcher_contents()})
    return [str(path)]


def hooks_command(command_line: object, environ) -> tuple[str | None, bool, str | None]:
    """What an installed hook's command line runs, for `doctor`: (the command, whether it exists, and for a
    hook through the launcher the one line how_hooks_find says, else None)."""
    from kijito_pull.harnesses import installkit
    from kijito_pull.harnesses.launcher import MARKER

    command, exists = installkit.command_executable(command_line, environ)
    if command and exists and Path(command).name == MARKER:  # through the launcher: what it finds on this PATH
        return how_hooks_find(Path(command), environ)
    return command, exists, None


def how_hooks_find(launcher_path: Path | None, environ) -> tuple[str | None, bool, str]:
    """How hooks that run through the launcher at `launcher_path` find kijito-pull with this PATH:
    (the command they would run, whether one is found, one line saying so) for `doctor`."""
    import shlex

    from kijito_pull.harnesses import installkit
    from kijito_pull.harnesses.launcher import HERE_LINE, version_of

    text = None
    if launcher_path is not None:
        try:
            text = Path(launcher_path).read_text("utf-8")
        except OSError:
            return None, False, f"the launcher {launcher_path} is missing: reinstall the plugin"
    want = (version_of(text) if text else None) or "?"
    through = f"through {launcher_path}: " if launcher_path is not None else ""
    line = HERE_LINE.search(text or "")
    here = (shlex.split(line.group(0).split("#", 1)[0].split("=", 1)[1]) or [""])[0] if line else ""
    if here and os.access(here, os.X_OK):
        return here, True, f"{through}the kijito-pull that installed them ({here})"
    found = installkit.which("kijito-pull", environ)
    if found:
        return found, True, f"{through}kijito-pull on PATH ({found}), if its version is {want} or newer"
    uvx = installkit.which("uvx", environ)
    if uvx:
        return f"{uvx} --from kijito-pull=={want} kijito-pull", True, (
            f"{through}uvx --from kijito-pull=={want} (kijito-pull is not on PATH; the first start downloads it)")
    return "kijito-pull", False, (f"{through}neither kijito-pull nor uv is on this PATH: the hooks say so at a "
                                  f"session's start and do nothing (`uv tool install kijito-pull` fixes it)")
