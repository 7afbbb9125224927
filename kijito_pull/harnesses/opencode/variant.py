"""What differs between OpenCode and its forks that run the same plugin API (Kilo Code CLI): one `Variant` each.

The OpenCode harness (this package) is written once; its installer, server, record, hooks and watcher take
the variant they serve. Kilo Code CLI 7.7.7 is an OpenCode fork (measured, docs/kilo.md): the same plugin
API, the same server routes and the same `export`, under its own names.

    OPENCODE, KILO          the two variants
    for_name(name)          the variant of a harness name, or of a hook name (`kilo-chat-message`)

Standard library only (the hook fast gate imports it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    """One host of kijito-pull's OpenCode plugin: its names for the same things."""

    name: str  # the harness name, and the first word of its hooks' names (`<name>-chat-message`)
    title: str  # as people call it
    executable: str  # the command on PATH
    binaries: tuple[str, ...]  # names the real binary (the plugin's `process.execPath`) starts with
    config: str  # ~/.config/<config>/ and <project>/.<config>/
    dependency: str  # the npm package it installs into each config folder at every start
    dependency_version: str | None  # which version of it to install; None: the harness's own version
    password_env: str  # its server's basic-auth password (and user) in its environment
    username_env: str
    default_user: str
    no_project_env: str  # set: it loads no project plugin
    upgrade: str  # how to upgrade it (a doctor fix)

    @property
    def command_env(self) -> str:
        """Which binary to ask for the record when the plugin does not say."""
        return f"KIJITO_PULL_{self.name.upper()}"

    @property
    def host_env(self) -> str:
        """`<pid>:<start>` of the host process, handed to the session's watcher."""
        return f"KIJITO_PULL_{self.name.upper()}_HOST"

    def hook(self, what: str) -> str:
        """A hook's name: `chat-message` -> `opencode-chat-message` / `kilo-chat-message`."""
        return f"{self.name}-{what}"


OPENCODE = Variant("opencode", "OpenCode", "opencode", ("opencode",), "opencode", "@opencode-ai/plugin", None,
                   "OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME", "opencode",
                   "OPENCODE_DISABLE_PROJECT_CONFIG", "npm install -g opencode-ai")
# @kilocode/plugin is published only up to 7.3.1 while the CLI is 7.7.7: with 7.3.1 installed Kilo starts without
# its offline stall (measured), so that is the version installed.
KILO = Variant("kilo", "Kilo Code CLI", "kilo", ("kilo", ".kilo"), "kilo", "@kilocode/plugin", "7.3.1",
               "KILO_SERVER_PASSWORD", "KILO_SERVER_USERNAME", "kilo",
               "KILO_DISABLE_PROJECT_CONFIG", "npm install -g @kilocode/cli")

VARIANTS = {v.name: v for v in (OPENCODE, KILO)}


def for_name(name: str) -> Variant:
    """The variant of a harness or hook name (`kilo`, `kilo-watch`); OpenCode's for any other."""
    return VARIANTS.get(name.split("-", 1)[0], OPENCODE)


__all__ = ["KILO", "OPENCODE", "VARIANTS", "Variant", "for_name"]
