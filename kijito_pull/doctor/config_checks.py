"""The doctor's configuration checks: the config file, the `kijito-pull` command on PATH, the token, the
API base and the project's opt-in, and the persona the later checks look at (`resolve_persona`).
Each reads what every command would resolve (kijito_pull.context.Settings, from the same flags)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from kijito_pull import __version__
from kijito_pull.context import Flags, Settings
from kijito_pull.core import config, paths
from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding, shown
from kijito_pull.harnesses.session import optin


def which(name: str, environ: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=environ.get("PATH", os.defpath))


def file_mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return None


def resolved(ctx: Context) -> Settings:
    """The settings every command would resolve, from the same flags (kijito_pull.context)."""
    if ctx.resolved is None:
        ctx.resolved = Settings(ctx.environ, Flags(api_base=ctx.api_base_flag, token_file=ctx.token_file_flag,
                                                   auth_header=ctx.auth_header_flag, timeout=ctx.timeout,
                                                   source=ctx.source_flag, consumer=ctx.consumer_flag,
                                                   redis_password_file=ctx.redis_password_file_flag))
    return ctx.resolved


def check_config(ctx: Context) -> Finding:
    found = resolved(ctx)
    path = found.paths.config_file
    try:
        ctx.settings = found.file
    except config.ConfigError as exc:
        ctx.settings = found.file = config.FileSettings()  # the later checks go on as if there were no file
        if not path.exists():  # named by $KIJITO_PULL_CONFIG, and missing
            return Finding("config", FAIL, str(exc),
                           f"create {shown(path, ctx.environ)}, or unset ${paths.CONFIG_ENV} to read the "
                           f"default file (see docs/configuration.md)")
        return Finding("config", FAIL, str(exc),
                       f"fix the TOML in {shown(path, ctx.environ)} (see docs/configuration.md), or move it away")
    if not path.exists():
        return Finding("config", OK, f"no config file at {shown(path, ctx.environ)} (optional)")
    if str(path) == os.devnull:
        return Finding("config", OK, f"no config file (${paths.CONFIG_ENV} is {os.devnull})")
    known = config.KNOWN_KEYS
    unknown = sorted(k for k in ctx.settings if k not in known)
    keys = ", ".join(sorted(k for k in ctx.settings if k in known)) or "no settings"
    if unknown:
        return Finding("config", WARN, f"{shown(path, ctx.environ)}: {keys}; unknown keys ignored: "
                                       f"{', '.join(unknown)}",
                       f"remove or correct them (known keys: {', '.join(known)})")
    return Finding("config", OK, f"{shown(path, ctx.environ)}: {keys}")


def check_command(ctx: Context) -> Finding:
    """The hooks and plugins start kijito-pull through its launcher (the installing kijito-pull, else PATH's,
    else `uvx`), the daemon by absolute path: is there one they can start from this PATH?"""
    found = which("kijito-pull", ctx.environ)
    if found is None:
        uvx = which("uvx", ctx.environ)
        if uvx is not None:
            return Finding("command", OK,
                           f"kijito-pull is not on PATH; plugins installed from a harness's own channel start it "
                           f"through {shown(uvx, ctx.environ)} (uvx --from kijito-pull=={__version__}; hooks that "
                           f"`kijito-pull install` wrote try the installing kijito-pull first)")
        return Finding("command", WARN,
                       "kijito-pull is not on PATH and uv is not installed, so a plugin installed from a harness's "
                       "own channel cannot start it (its hooks say so at session start and do nothing)",
                       "`uv tool install kijito-pull` (or `pipx install kijito-pull`), then `uv tool update-shell` / "
                       "`pipx ensurepath`, and restart the harness from that shell; or install uv")
    here = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "kijito-pull"))
    detail = f"{shown(found, ctx.environ)} (kijito-pull {__version__}, Python {sys.version.split()[0]})"
    if os.path.exists(here) and os.path.realpath(found) != here:
        return Finding("command", WARN, f"{detail}; but this doctor runs from {shown(here, ctx.environ)}, another "
                                        "installation, so the hooks may run a different version",
                       "remove the older installation or put the one you use first on PATH")
    return Finding("command", OK, detail)


def check_token(ctx: Context) -> Finding:
    """Where the token comes from (the same precedence as every command) and whether its file is private."""
    env_set = bool(ctx.environ.get(config.TOKEN_ENV, "").strip())
    file_path, source = None, None
    if ctx.token_file_flag:
        file_path, source = ctx.token_file_flag, "--token-file"
    elif ctx.settings.get("token_file") and not env_set:
        file_path, source = ctx.settings["token_file"], "the config file's token_file"
    try:
        ctx.token = resolved(ctx).token
    except config.ConfigError as exc:
        ctx.token = None
        ctx.token_problem = str(exc)
        if file_path is None:
            return Finding("token", FAIL, f"no token: ${config.TOKEN_ENV} is not set and no token file is configured",
                           f"export {config.TOKEN_ENV}=... where the harness starts, or put token_file = "
                           f"\"/path/to/token\" (chmod 600) in {shown(resolved(ctx).paths.config_file, ctx.environ)}"
                           f"; {config.SANDBOX_HINT}")
        mode = file_mode(Path(file_path).expanduser())
        if mode is not None and mode & 0o077:
            return Finding("token", FAIL, f"the token file {file_path} (from {source}) is readable by other users "
                                          f"(mode {mode:04o}), so it is refused",
                           f"chmod 600 {file_path}")
        return Finding("token", FAIL, f"{exc} (from {source})",
                       f"point {source} at a readable file holding only the token, or unset it and use "
                       f"${config.TOKEN_ENV}")
    if file_path is None:
        ignored = "; the config file's token_file is ignored" if ctx.settings.get("token_file") else ""
        return Finding("token", OK, f"from ${config.TOKEN_ENV} ({len(ctx.token)} characters; never shown){ignored}")
    shadowed = f"; ${config.TOKEN_ENV} is also set and is ignored" if env_set else ""
    note = ("; the harness hooks do not get this flag: they read the config file's token_file or "
            f"${config.TOKEN_ENV}") if source == "--token-file" else ""
    mode = file_mode(Path(file_path).expanduser())
    return Finding("token", OK, f"from {source} {file_path} (mode {mode:04o}){shadowed}{note}"
                   if mode is not None else f"from {source} {file_path}{shadowed}{note}")


def check_api_base(ctx: Context) -> Finding:
    if ctx.api_base_flag:
        source = "--api-base"
    elif ctx.environ.get(config.BASE_ENV, "").strip():
        source = f"${config.BASE_ENV}"
    elif ctx.settings.get("api_base"):
        source = "the config file's api_base"
    else:
        source = "the default"
    try:
        ctx.api_base = resolved(ctx).api_base
        ctx.auth_header = resolved(ctx).auth_header
    except config.ConfigError as exc:
        ctx.api_base = None
        return Finding("api_base", FAIL, str(exc),
                       f"use an https:// URL (plain http:// only to 127.0.0.1, ::1 or localhost) in {source}, "
                       f"or unset it for {config.DEFAULT_API_BASE}")
    header = f"; token sent in header {ctx.auth_header}" if ctx.auth_header else ""
    if ctx.api_base.startswith("https://"):
        return Finding("api_base", OK, f"{ctx.api_base} (from {source}); TLS with certificate verification{header}")
    return Finding("api_base", OK, f"{ctx.api_base} (from {source}); plain http, allowed only because it is "
                                   f"loopback (a sandbox or a local server){header}")


def check_optin(ctx: Context) -> Finding:
    found = optin.resolve(ctx.cwd, ctx.environ)
    ctx.optin = found
    if found.opted_in and found.persona:
        return Finding("optin", OK, f"opted in by {shown(found.file or '', ctx.environ)}; persona {found.persona} "
                                    f"(from the {found.persona_source})")
    if found.opted_in:
        return Finding("optin", FAIL, f"opted in by {shown(found.file or '', ctx.environ)}, but {found.problem}",
                       f"add a line 'inbox persona: NAME' to {shown(found.file or '', ctx.environ)}")
    extra = f" ({found.problem})" if found.problem else ""
    return Finding("optin", WARN,
                   f"{shown(found.project, ctx.environ)} has not opted in: no 'inbox monitor: raise on start' line "
                   f"in AGENTS.md or CLAUDE.md up to the repository root, so the harness hooks do nothing "
                   f"here{extra}",
                   "add '- inbox monitor: raise on start' (and '- inbox persona: NAME') to the project's AGENTS.md; "
                   "see AGENTS.md.example (not needed for scripts and the daemon)")


def resolve_persona(ctx: Context) -> None:
    """--persona, else the opted-in project's persona (what the hooks use), else $KIJITO_PERSONA, else the
    config file's persona."""
    name, source = None, None
    if ctx.persona_flag:
        name, source = ctx.persona_flag, "--persona"
    elif ctx.optin is not None and ctx.optin.opted_in and ctx.optin.persona:
        name, source = ctx.optin.persona, {"file": "the project's 'inbox persona:' line",
                                           "env": f"${config.PERSONA_ENV}, for the opted-in project",
                                           "folder": "the opted-in project's folder name"}.get(
                                               str(ctx.optin.persona_source), "the project's opt-in")
    elif ctx.environ.get(config.PERSONA_ENV, "").strip():
        name, source = ctx.environ[config.PERSONA_ENV].strip(), f"${config.PERSONA_ENV}"
    elif ctx.settings.get("persona"):
        name, source = ctx.settings["persona"], "the config file's persona"
    if name is None:
        ctx.persona_problem = (f"no persona: pass --persona NAME, run it in an opted-in project, or set "
                               f"${config.PERSONA_ENV}")
        return
    try:
        ctx.persona = config.validate_persona(name)
        ctx.persona_source = source
    except config.ConfigError as exc:
        ctx.persona_problem = f"{exc} (from {source})"
