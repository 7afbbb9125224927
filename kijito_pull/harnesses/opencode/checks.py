"""OpenCode's own doctor checks: will OpenCode load kijito-pull's plugin and start without waiting, and can
new mail be pushed into its sessions? Listed in `HARNESS.checks`.

    opencode.plugin   the plugin is wired (installer.wiring); `opencode` is there and new enough for what the
                      plugin uses (a text part added at `chat.message` with its own id, `session.idle`:
                      measured on 1.18.33); `@opencode-ai/plugin` is installed in every config folder OpenCode
                      looks in (else each start waits about 70 s offline); project config not switched off
    opencode.push     push needs OpenCode's server: only a session started with `--port N` (or `opencode
                      serve`) gets new mail at once, and the server should have a password
"""

from __future__ import annotations

import re
from pathlib import Path

from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding
from kijito_pull.harnesses import installkit
from kijito_pull.harnesses.opencode import installer
from kijito_pull.harnesses.opencode.server import PASSWORD_ENV

PLUGIN_CHECK = "opencode.plugin"
PUSH_CHECK = "opencode.push"
MEASURED = (1, 18, 33)  # the version the plugin's hooks were measured on
NO_PROJECT_ENV = "OPENCODE_DISABLE_PROJECT_CONFIG"


def _version(text: str | None) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(g) for g in match.groups()) if match else None


def check_plugin(ctx: Context) -> Finding:
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.installed]
    if not wired:
        return Finding(PLUGIN_CHECK, OK, "kijito-pull's OpenCode plugin is not installed here; nothing to check")
    scope = "--project" if any(w.scope == installkit.PROJECT for w in wired) else "--user"
    if scope == "--project" and ctx.environ.get(NO_PROJECT_ENV, "").strip() not in ("", "0", "false"):
        return Finding(PLUGIN_CHECK, FAIL, f"${NO_PROJECT_ENV} is set: OpenCode loads no project plugin, so "
                                           f"kijito-pull's never runs here",
                       f"unset {NO_PROJECT_ENV}, or run `kijito-pull install opencode --user`")
    version, why = installer.opencode_version(ctx.environ, Path(ctx.cwd))
    if version is None:
        return Finding(PLUGIN_CHECK, WARN, f"kijito-pull's OpenCode plugin is installed, but {why}",
                       "put `opencode` on PATH and run doctor again")
    found = _version(version)
    if found is None or found < MEASURED[:2] + (0,):
        return Finding(PLUGIN_CHECK, WARN, f"OpenCode {version} is older than the {'.'.join(map(str, MEASURED))} "
                                           f"the plugin was measured on: its chat.message part may be refused",
                       "upgrade OpenCode (npm install -g opencode-ai)")
    project = installkit.default_project(False, ctx.cwd)
    folders = [installer.config_dir(installkit.USER, ctx.environ, project)]
    if (project / ".opencode").is_dir():
        folders.append(installer.config_dir(installkit.PROJECT, ctx.environ, project))
    missing = [str(f) for f in folders if not installer.has_dependency(f)]
    if missing:
        return Finding(PLUGIN_CHECK, WARN, f"{installer.DEPENDENCY} is not installed in {', '.join(missing)}: "
                                           f"OpenCode installs it at every start, and offline it waits about 70 s "
                                           f"before anything happens",
                       f"run `kijito-pull install opencode {scope}` again (it installs it where the plugin is), or "
                       f"`npm install --save-exact {installer.DEPENDENCY}@{version}` in each folder named")
    return Finding(PLUGIN_CHECK, OK, f"OpenCode {version} loads kijito-pull's plugin "
                                     f"({', '.join(w.path or '' for w in wired)}); {installer.DEPENDENCY} is installed "
                                     f"where it looks")


def check_push(ctx: Context) -> Finding:
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.installed]
    if not wired:
        return Finding(PUSH_CHECK, OK, "kijito-pull's OpenCode plugin is not installed here; nothing to check")
    how = ("new mail reaches a session at once only when its server listens (`opencode --port N`, `opencode "
           "serve`); otherwise it waits for the session's next message, and `opencode run` gets only what waits at "
           "its start")
    if not ctx.environ.get(PASSWORD_ENV):
        return Finding(PUSH_CHECK, WARN, f"{how}; ${PASSWORD_ENV} is not set here, so a server OpenCode starts "
                                         f"from this environment takes prompts from anyone on this machine",
                       f"set {PASSWORD_ENV} before starting `opencode --port N` (kijito-pull reads it from "
                       f"OpenCode's environment)")
    return Finding(PUSH_CHECK, OK, f"{how}; ${PASSWORD_ENV} is set")
