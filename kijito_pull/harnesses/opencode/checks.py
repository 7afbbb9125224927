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
from kijito_pull.harnesses.opencode.variant import OPENCODE, Variant

PLUGIN_CHECK = "opencode.plugin"
PUSH_CHECK = "opencode.push"
MEASURED = (1, 18, 33)  # the version the plugin's hooks were measured on
MEASURED_KILO = (7, 7, 7)  # Kilo Code CLI's
NO_PROJECT_ENV = OPENCODE.no_project_env


def _version(text: str | None) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(g) for g in match.groups()) if match else None


def check_plugin(ctx: Context, variant: Variant = OPENCODE) -> Finding:
    """OpenCode's (or its fork's: `variant`) plugin check (module docstring)."""
    v, check = variant, f"{variant.name}.plugin"
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd, v) if w.installed]
    if not wired:
        return Finding(check, OK, f"kijito-pull's {v.title} plugin is not installed here; nothing to check")
    scope = "--project" if any(w.scope == installkit.PROJECT for w in wired) else "--user"
    if scope == "--project" and ctx.environ.get(v.no_project_env, "").strip() not in ("", "0", "false"):
        return Finding(check, FAIL, f"${v.no_project_env} is set: {v.title} loads no project plugin, so "
                                    f"kijito-pull's never runs here",
                       f"unset {v.no_project_env}, or run `kijito-pull install {v.name} --user`")
    version, why = installer.opencode_version(ctx.environ, Path(ctx.cwd), v)
    if version is None:
        return Finding(check, WARN, f"kijito-pull's {v.title} plugin is installed, but {why}",
                       f"put `{v.executable}` on PATH and run doctor again")
    found, measured = _version(version), MEASURED_KILO if v.name == "kilo" else MEASURED
    if found is None or found < measured[:2] + (0,):
        return Finding(check, WARN, f"{v.title} {version} is older than the {'.'.join(map(str, measured))} "
                                    f"the plugin was measured on: its chat.message part may be refused",
                       f"upgrade {v.title} ({v.upgrade})")
    project = installkit.default_project(False, ctx.cwd)
    folders = [installer.config_dir(installkit.USER, ctx.environ, project, v)]
    if (project / f".{v.config}").is_dir():
        folders.append(installer.config_dir(installkit.PROJECT, ctx.environ, project, v))
    missing = [str(f) for f in folders if not installer.has_dependency(f, v)]
    pin = v.dependency_version or version
    if missing:
        return Finding(check, WARN, f"{v.dependency} is not installed in {', '.join(missing)}: {v.title} installs "
                                    f"it at every start, and offline it waits about 70 s before anything happens",
                       f"run `kijito-pull install {v.name} {scope}` again (it installs it where the plugin is), or "
                       f"`npm install --save-exact {v.dependency}@{pin}` in each folder named")
    return Finding(check, OK, f"{v.title} {version} loads kijito-pull's plugin "
                              f"({', '.join(w.path or '' for w in wired)}); {v.dependency} is installed where it looks")


def check_push(ctx: Context, variant: Variant = OPENCODE) -> Finding:
    """Can new mail be pushed into OpenCode's (or its fork's) sessions (module docstring)."""
    v, check = variant, f"{variant.name}.push"
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd, v) if w.installed]
    if not wired:
        return Finding(check, OK, f"kijito-pull's {v.title} plugin is not installed here; nothing to check")
    how = (f"new mail reaches a session at once only when its server listens (`{v.executable} --port N`, "
           f"`{v.executable} serve`); otherwise it waits for the session's next message")
    if not ctx.environ.get(v.password_env):
        return Finding(check, WARN, f"{how}; ${v.password_env} is not set here, so a server {v.title} starts "
                                    f"from this environment takes prompts from anyone on this machine",
                       f"set {v.password_env} before starting `{v.executable} --port N` (kijito-pull reads it from "
                       f"{v.title}'s environment)")
    return Finding(check, OK, f"{how}; ${v.password_env} is set")
