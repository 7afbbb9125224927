"""`kijito-pull doctor`: why mail is or is not reaching the agent, one check at a time.

Every check is a small function taking the shared `Context` and returning one or more `Finding`s:
a check id (stable: docs/troubleshooting.md has a section per id), a verdict, what was found, and a
fix. `fail` means something would stop mail reaching the agent; `warn` is worth knowing but does not;
`ok` is fine. The doctor is read-only: it creates no state directory and writes no file, and sends at
most two requests (one inbox peek with `mark_read=false`, one persona directory read). It never shows
the token.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kijito_pull import __version__
from kijito_pull.context import Flags, Settings
from kijito_pull.core import config, paths
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses import registry
from kijito_pull.harnesses.base import resolve
from kijito_pull.harnesses.session import lifecycle, optin

OK = "ok"
WARN = "warn"
FAIL = "fail"
VERDICTS = (OK, WARN, FAIL)

#: The checks that are not a harness's, in the order they run (docs/troubleshooting.md has a section for each).
CORE_CHECK_IDS = ("config", "command", "token", "api_base", "optin", "reachability", "persona", "state_dir",
                  "cursors", "leases", "stop_marker")


def harnesses() -> tuple[tuple[str, str], ...]:
    """(name, executable) of every registered harness that is started as a command (kijito_pull.harnesses.registry)."""
    return tuple((h.name, h.executable) for h in registry.all_harnesses() if h.executable)


def check_ids() -> tuple[str, ...]:
    """Every check id, in the order they run: ours, each harness's wiring, then each harness's own checks."""
    every = registry.all_harnesses()
    return (CORE_CHECK_IDS + tuple(f"harness.{h.name}" for h in every)
            + tuple(check for h in every for check, _ref in h.checks))


def __getattr__(name: str) -> Any:
    """HARNESSES and CHECK_IDS, read from the registry each time (a harness registered later is seen)."""
    if name == "HARNESSES":
        return harnesses()
    if name == "CHECK_IDS":
        return check_ids()
    raise AttributeError(name)


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: str  # ok | warn | fail
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "verdict": self.verdict, "detail": self.detail, "fix": self.fix}


@dataclass
class Context:
    """What the checks read (the environment, the flags) and what earlier checks resolved for later ones."""

    environ: Mapping[str, str]
    cwd: str
    persona_flag: str | None = None
    api_base_flag: str | None = None
    token_file_flag: str | None = None
    auth_header_flag: str | None = None
    timeout: float = 5.0
    #: Builds the API client; tests may replace it. Called with (api_base, token, auth_header, timeout).
    client_factory: Callable[..., Any] | None = None
    #: `wiring(harness, environ, cwd)`; None = `kijito_pull.harnesses.registry.wiring` (read-only).
    wiring: Callable[[str, Mapping[str, str], str], list[Any]] | None = None
    # resolved by the checks, in order
    settings: dict[str, Any] = field(default_factory=dict)
    #: the composition root's resolution (kijito_pull.context.Settings): what every command would use
    resolved: Settings | None = None
    token: str | None = None
    token_problem: str | None = None
    api_base: str | None = None
    auth_header: str | None = None
    optin: optin.OptIn | None = None
    persona: str | None = None
    persona_source: str | None = None
    persona_problem: str | None = None
    reachable: bool = False


# -- helpers ------------------------------------------------------------------------------------------


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or os.path.expanduser("~"))


def _shown(path: str | os.PathLike, environ: Mapping[str, str]) -> str:
    """A path with the home directory written as ~ (shorter, and the same for every user)."""
    text = str(path)
    home = str(_home(environ))
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home):]
    return text


def _inside(path: Path, root: Path) -> bool:
    try:
        a, b = os.path.realpath(path), os.path.realpath(root)
    except (OSError, ValueError):
        return False
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def _which(name: str, environ: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=environ.get("PATH", os.defpath))


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return None


# -- configuration ------------------------------------------------------------------------------------


def _resolved(ctx: Context) -> Settings:
    """The settings every command would resolve, from the same flags (kijito_pull.context)."""
    if ctx.resolved is None:
        ctx.resolved = Settings(ctx.environ, Flags(api_base=ctx.api_base_flag, token_file=ctx.token_file_flag,
                                                   auth_header=ctx.auth_header_flag, timeout=ctx.timeout))
    return ctx.resolved


def check_config(ctx: Context) -> Finding:
    resolved = _resolved(ctx)
    path = resolved.paths.config_file
    try:
        ctx.settings = resolved.file
    except config.ConfigError as exc:
        ctx.settings = resolved.file = {}  # the later checks go on as if there were no file
        return Finding("config", FAIL, str(exc),
                       f"fix the TOML in {_shown(path, ctx.environ)} (see docs/configuration.md), or move it away")
    if not path.exists():
        return Finding("config", OK, f"no config file at {_shown(path, ctx.environ)} (optional)")
    known = config.KNOWN_KEYS
    unknown = sorted(k for k in ctx.settings if k not in known)
    keys = ", ".join(sorted(k for k in ctx.settings if k in known)) or "no settings"
    if unknown:
        return Finding("config", WARN, f"{_shown(path, ctx.environ)}: {keys}; unknown keys ignored: "
                                       f"{', '.join(unknown)}",
                       f"remove or correct them (known keys: {', '.join(known)})")
    return Finding("config", OK, f"{_shown(path, ctx.environ)}: {keys}")


def check_command(ctx: Context) -> Finding:
    """The hooks, the pi extension and the daemon run `kijito-pull` by name: it must be on their PATH."""
    found = _which("kijito-pull", ctx.environ)
    if found is None:
        return Finding("command", WARN,
                       "kijito-pull is not on PATH, so the harness hooks (which run `kijito-pull hook ...`) "
                       "cannot start it",
                       "install it for your user from the kijito-pull checkout or a built wheel (it is not on "
                       "PyPI yet): `uv tool install .` or `pipx install .` (or `pipx install dist/*.whl`), then "
                       "`uv tool update-shell` / `pipx ensurepath`, and restart the harness from that shell")
    here = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "kijito-pull"))
    detail = f"{_shown(found, ctx.environ)} (kijito-pull {__version__}, Python {sys.version.split()[0]})"
    if os.path.exists(here) and os.path.realpath(found) != here:
        return Finding("command", WARN, f"{detail}; but this doctor runs from {_shown(here, ctx.environ)}, another "
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
        ctx.token = _resolved(ctx).token
    except config.ConfigError as exc:
        ctx.token = None
        ctx.token_problem = str(exc)
        if file_path is None:
            return Finding("token", FAIL, f"no token: ${config.TOKEN_ENV} is not set and no token file is configured",
                           f"export {config.TOKEN_ENV}=... where the harness starts, or put token_file = "
                           f"\"/path/to/token\" (chmod 600) in {_shown(_resolved(ctx).paths.config_file, ctx.environ)}"
                           f"; {config.SANDBOX_HINT}")
        mode = _mode(Path(file_path).expanduser())
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
    mode = _mode(Path(file_path).expanduser())
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
        ctx.api_base = _resolved(ctx).api_base
        ctx.auth_header = _resolved(ctx).auth_header
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
        return Finding("optin", OK, f"opted in by {_shown(found.file or '', ctx.environ)}; persona {found.persona} "
                                    f"(from the {found.persona_source})")
    if found.opted_in:
        return Finding("optin", FAIL, f"opted in by {_shown(found.file or '', ctx.environ)}, but {found.problem}",
                       f"add a line 'inbox persona: NAME' to {_shown(found.file or '', ctx.environ)}")
    extra = f" ({found.problem})" if found.problem else ""
    return Finding("optin", WARN,
                   f"{_shown(found.project, ctx.environ)} has not opted in: no 'inbox monitor: raise on start' line "
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


# -- the server -----------------------------------------------------------------------------------------


def _client(ctx: Context) -> Any:
    assert ctx.api_base is not None and ctx.token is not None
    from kijito_pull.context import Context as Wiring

    factory = None
    if ctx.client_factory is not None:  # tests: (api_base, token, auth_header, timeout)
        fake = ctx.client_factory

        def factory(api_base: str, token: str, *, auth_header: str | None, timeout: float, **_: Any) -> Any:
            return fake(api_base, token, auth_header, timeout)
    # One attempt: the doctor reports what a single request meets, it does not retry it away.
    return Wiring(_resolved(ctx), attempts=1, deadline=ctx.timeout, client_factory=factory).new_client()


def check_reachability(ctx: Context) -> Finding:
    """Exactly one peek request (`GET /api/inbox?persona=P&mark_read=false&limit=1`): address, TLS and token."""
    missing = [what for what, bad in (("token", ctx.token is None), ("valid API base", ctx.api_base is None),
                                      ("persona", ctx.persona is None)) if bad]
    if missing:
        return Finding("reachability", WARN, f"not checked: no {' and no '.join(missing)} (see the findings above)",
                       "fix the token, api_base or persona finding first")
    from kijito_pull.core.models import ApiError

    client = _client(ctx)
    started = time.monotonic()
    try:
        page = client.inbox(ctx.persona, limit=1)
    except ApiError as exc:
        return _unreachable(ctx, exc)
    finally:
        client.close()
    ctx.reachable = True
    ms = (time.monotonic() - started) * 1000
    newest = f"newest message {page.newest_id}" if page.newest_id is not None else "the inbox is empty"
    return Finding("reachability", OK, f"{ctx.api_base} accepted the token and answered a peek of "
                                       f"{ctx.persona}'s inbox in {ms:.0f} ms ({newest}; nothing was marked read)")


def _unreachable(ctx: Context, exc: Any) -> Finding:
    text = str(exc)
    status = getattr(exc, "status", None)
    where = ctx.api_base
    if status == 401:
        return Finding("reachability", FAIL, f"{where} rejected the token (401)",
                       "check the token (is it for this API base? expired or revoked?); get a new one and put it "
                       f"in ${config.TOKEN_ENV} or the token file")
    if status == 403:
        return Finding("reachability", FAIL, f"{where} refused the request (403): the API's firewall rejects "
                                             "some clients, or this token may not read this persona",
                       "check that nothing rewrites the request (a proxy, a wrapper changing the User-Agent; "
                       "kijito-pull sends its own), and that the token belongs to the account of persona "
                       f"{ctx.persona}")
    if status == 404:
        return Finding("reachability", FAIL, f"{where}/api/inbox does not exist (404): not a Kijito API, or the "
                                             "inbox is disabled on this server",
                       f"check the API base (the default is {config.DEFAULT_API_BASE})")
    if status is not None and 300 <= status < 400:
        return Finding("reachability", FAIL, f"{text}",
                       "use the final URL as the API base (kijito-pull never follows redirects, so the token "
                       "cannot be carried elsewhere)")
    if status is not None:
        return Finding("reachability", FAIL, f"{where}: {text}",
                       "the server is failing; retry later (nothing is lost: mail is delivered once it answers)")
    if "SSL" in text or "certificate" in text.lower():
        return Finding("reachability", FAIL, f"{where}: TLS failed ({text})",
                       "check the system clock and the certificate store; kijito-pull verifies certificates "
                       "and ignores proxy and CA-bundle environment variables")
    if "timed out" in text:
        return Finding("reachability", FAIL, f"{where}: {text}",
                       "check the network, or raise --timeout; a firewall may be dropping the connection")
    if "connection failed" in text or "cut off" in text:
        return Finding("reachability", FAIL, f"{where}: {text}",
                       "check the network and the API base (is the server running? for the sandbox, is "
                       "`kijito-pull sandbox` still up and is KIJITO_BASE its URL?)")
    return Finding("reachability", FAIL, f"{where}: {text}",
                   "the answer cannot be trusted; check that the API base is a Kijito API")


def check_persona(ctx: Context) -> Finding:
    """The persona is in the account's directory (`GET /api/personas`); inbox names are case-sensitive."""
    if ctx.persona is None:
        if ctx.persona_problem and not ctx.persona_problem.startswith("no persona"):
            return Finding("persona", FAIL, ctx.persona_problem,
                           "use 1-128 letters, digits and . _ @ + -, starting with a letter or digit")
        return Finding("persona", WARN, "no persona to check (none given, no opted-in project, no $KIJITO_PERSONA)",
                       f"pass --persona NAME, run the doctor in an opted-in project, or set ${config.PERSONA_ENV}")
    if not ctx.reachable:
        return Finding("persona", WARN, f"{ctx.persona} (from {ctx.persona_source}); not looked up: the server "
                                        "was not reachable", "fix the reachability finding")
    from kijito_pull.core.models import ApiError

    client = _client(ctx)
    try:
        names = [p.persona for p in client.personas()]
    except ApiError as exc:
        return Finding("persona", WARN, f"{ctx.persona} (from {ctx.persona_source}); the persona directory could "
                                        f"not be read ({exc})",
                       "retry later; the inbox itself answered, so mail can still be pulled")
    finally:
        client.close()
    if ctx.persona in names:
        return Finding("persona", OK, f"{ctx.persona} (from {ctx.persona_source}) is in the account's directory")
    variants = [n for n in names if n.casefold() == ctx.persona.casefold()]
    if variants:
        return Finding("persona", FAIL, f"{ctx.persona} (from {ctx.persona_source}) is not in the directory, but "
                                        f"{', '.join(variants)} is: inbox names are case-sensitive, so mail for "
                                        f"{variants[0]} never reaches {ctx.persona}",
                       f"use the directory's spelling: 'inbox persona: {variants[0]}' or --persona {variants[0]}")
    return Finding("persona", WARN, f"{ctx.persona} (from {ctx.persona_source}) is not in the account's directory "
                                    f"({len(names)} personas): nobody has written to it yet, or the name is wrong",
                   "check the spelling against the directory; it appears there once someone sends it mail")


# -- local state -------------------------------------------------------------------------------------------


def cache_roots(environ: Mapping[str, str]) -> list[Path]:
    """Directories a cache cleaner may empty: the platform's user cache dir and the common places."""
    import platformdirs

    home = _home(environ)
    roots = [Path(platformdirs.user_cache_dir()), home / ".cache", home / "Library" / "Caches", Path("/var/cache")]
    xdg = environ.get("XDG_CACHE_HOME", "").strip()
    if xdg:
        roots.insert(0, Path(xdg).expanduser())
    out: list[Path] = []
    for root in roots:
        if root not in out:
            out.append(root)
    return out


def check_state_dir(ctx: Context) -> list[Finding]:
    directory = Paths(ctx.environ).state_dir
    override = bool(ctx.environ.get(paths.STATE_DIR_ENV, "").strip())
    source = f"${paths.STATE_DIR_ENV}" if override else "the platform's user state dir"
    shown = _shown(directory, ctx.environ)
    for root in cache_roots(ctx.environ):
        if _inside(directory, root):
            fix = (f"point ${paths.STATE_DIR_ENV} outside {_shown(root, ctx.environ)} (or unset it for "
                   f"{_shown(platformdirs_state(), ctx.environ)}), and move the files over so no cursor is lost"
                   if override else "set KIJITO_PULL_STATE_DIR to a directory outside the cache")
            return [Finding("state_dir", FAIL, f"{shown} (from {source}) is inside the cache directory "
                                               f"{_shown(root, ctx.environ)}: a cache cleaner would delete the "
                                               "cursors, and mail past --max-replay would be skipped", fix)]
    if not directory.exists():
        parent = directory
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
        if os.access(parent, os.W_OK | os.X_OK):
            return [Finding("state_dir", OK, f"{shown} (from {source}) does not exist yet; the first pull creates "
                                             "it (mode 0700)")]
        return [Finding("state_dir", FAIL, f"{shown} (from {source}) does not exist and cannot be created: "
                                           f"{_shown(parent, ctx.environ)} is not writable",
                        f"create it yourself (install -d -m 700 {shown}) or set ${paths.STATE_DIR_ENV}")]
    if not directory.is_dir():
        return [Finding("state_dir", FAIL, f"{shown} (from {source}) is not a directory",
                        f"move it away, or set ${paths.STATE_DIR_ENV} to a directory")]
    if not os.access(directory, os.W_OK | os.X_OK):
        return [Finding("state_dir", FAIL, f"{shown} (from {source}) is not writable, so no cursor can move",
                        f"chown/chmod it to you (chmod 700 {shown}) or set ${paths.STATE_DIR_ENV}")]
    loose = _loose_modes(directory)
    if loose:
        listed = ", ".join(f"{_shown(p, ctx.environ)} ({m:04o})" for p, m in loose[:5])
        more = f" and {len(loose) - 5} more" if len(loose) > 5 else ""
        return [Finding("state_dir", WARN, f"{shown}: readable by other users: {listed}{more}",
                        f"chmod -R go-rwx {shown} (kijito-pull tightens its own directories when it next writes)")]
    return [Finding("state_dir", OK, f"{shown} (from {source}): writable, private (directories 0700, files 0600)")]


def platformdirs_state() -> Path:
    return paths.platform_state_dir()


def _loose_modes(directory: Path) -> list[tuple[Path, int]]:
    """Directories and files under the state dir that other users could read or enter (two levels deep)."""
    out = []
    mode = _mode(directory)
    if mode is not None and mode & 0o077:
        out.append((directory, mode))
    try:
        children = sorted(directory.iterdir())
    except OSError:
        return out
    for child in children:
        grand = []
        if child.is_dir() and not child.is_symlink():
            try:
                grand = sorted(child.iterdir())
            except OSError:
                grand = []
        for p in [child, *grand]:
            m = _mode(p)
            if m is not None and m & 0o077 and not p.is_symlink():
                out.append((p, m))
    return out


def check_cursors(ctx: Context) -> Finding:
    """Every cursor: damaged or pinned ones, and who holds each lock (a flock dies with its holder)."""
    from kijito_pull.core.state import StateStore

    directory = Paths(ctx.environ).cursors_dir
    files = sorted(directory.glob("*.json")) if directory.is_dir() else []
    if not files:
        return Finding("cursors", OK, "no cursors yet (the first pull of a persona creates one)")
    problems, held = [], []
    mine = 0
    for path in files:
        try:
            store = StateStore.existing(path)
        except Exception:  # noqa: BLE001 - whatever is wrong with it, it is a damaged file to report
            problems.append(f"{path.name}: unreadable")
            continue
        identity = store.identity
        who = f"{identity.get('persona')}/{identity.get('consumer')}"
        if identity.get("persona") == ctx.persona and identity.get("api_base") == ctx.api_base:
            mine += 1
        loaded = store.load()
        if loaded.corrupt_reason:
            problems.append(f"{who}: damaged ({loaded.corrupt_reason})")
        elif loaded.state is not None and loaded.state.pin:
            problems.append(f"{who}: pinned since {loaded.state.pin.get('since')} ({loaded.state.pin.get('reason')})")
        holder = store.lock_holder()
        if holder is not None:
            alive = bool(holder) and lifecycle.alive(holder, None)
            held.append(f"{who} locked by pid {holder or '?'}" + ("" if alive else " (not a live kijito-pull: "
                                                                  "another process inherited the lock)"))
    summary = f"{len(files)} cursor{'s' if len(files) != 1 else ''}"
    if ctx.persona and ctx.api_base:
        summary += f" ({mine} for {ctx.persona} at {ctx.api_base})"
    if held:
        summary += "; " + "; ".join(held)
    if problems:
        return Finding("cursors", WARN, f"{summary}; " + "; ".join(problems),
                       "a pinned cursor retries its gap at every pull and a damaged one re-delivers what is visible "
                       "(never skips); `kijito-pull status` shows them, and a pull with the server reachable "
                       "usually clears them")
    return Finding("cursors", OK, summary)


def check_leases(ctx: Context) -> Finding:
    leases = lifecycle.all_leases(ctx.environ)
    if not leases:
        return Finding("leases", OK, "no waker leases")
    live = [lease for lease in leases if lease["live"]]
    stale = [lease for lease in leases if not lease["live"]]
    text = f"{len(live)} live waker{'s' if len(live) != 1 else ''}"
    if live:
        text += " (" + ", ".join(f"session {lease['session_id']}: pid {lease.get('pid')}, {lease.get('persona')}"
                                 for lease in live[:5]) + ")"
    if stale:
        names = ", ".join(f"{lease['session_id']} (pid {lease.get('pid')})" for lease in stale[:5])
        return Finding("leases", WARN, f"{text}; {len(stale)} stale lease{'s' if len(stale) != 1 else ''} naming a "
                                       f"process that is gone: {names}",
                       "harmless (the next waker to arm sweeps them); `kijito-pull session status --all` lists "
                       "them, `kijito-pull session stop` in the project clears its own")
    return Finding("leases", OK, text)


def check_stop_marker(ctx: Context) -> Finding:
    project = str(ctx.optin.project) if ctx.optin is not None and ctx.optin.opted_in else os.path.realpath(ctx.cwd)
    persona = ctx.persona or os.path.basename(project)
    marker = lifecycle.stop_marker(ctx.environ, project, persona)
    others = [m for m in lifecycle.all_stop_markers(ctx.environ)
              if not (m.get("project") == lifecycle.project_key(project) and m.get("persona") == persona)]
    elsewhere = f"; {len(others)} other project{'s' if len(others) != 1 else ''} stopped" if others else ""
    if marker is not None:
        return Finding("stop_marker", WARN, f"waking is stopped for {_shown(project, ctx.environ)} / {persona} "
                                            f"since {marker.get('since')} (`kijito-pull session stop`); mail is "
                                            f"still handed over at session start and turn end{elsewhere}",
                       "kijito-pull session start   (in the project)")
    return Finding("stop_marker", OK, f"no stop marker for {_shown(project, ctx.environ)} / {persona}{elsewhere}")


# -- harnesses -------------------------------------------------------------------------------------------


def check_harnesses(ctx: Context) -> list[Finding]:
    """For every registered harness: is it on PATH, is it wired to kijito-pull (and at which scope), and
    does the command each wiring runs exist. A harness's `wiring_check` gives its finding (else the
    one below, for a harness started as a command)."""
    if ctx.wiring is not None:
        wiring = ctx.wiring
    else:
        wiring = registry.wiring
    every = registry.all_harnesses()
    rows: dict[str, list[Any]] = {}
    errors: dict[str, str] = {}
    for harness in every:
        try:
            rows[harness.name] = list(wiring(harness.name, ctx.environ, ctx.cwd))
        except Exception as exc:  # noqa: BLE001 - one harness's broken settings must not hide the others
            rows[harness.name], errors[harness.name] = [], f"{type(exc).__name__}: {exc}"
    wired_any = any(getattr(w, "installed", False) for h in every if h.executable for w in rows[h.name])
    nothing_wired = bool(ctx.optin and ctx.optin.opted_in) and not wired_any
    out = []
    for harness in every:
        finding = resolve(harness.wiring_check) if harness.wiring_check else harness_finding
        out.append(finding(ctx, harness, rows[harness.name], errors.get(harness.name), nothing_wired))
    return out


def harness_finding(ctx: Context, harness: Any, rows: list[Any], error: str | None, nothing_wired: bool) -> Finding:
    """The `harness.<name>` finding of a harness started as a command (`harness.executable`)."""
    exe = harness.executable or harness.name
    return _harness_finding(harness.name, exe, _which(exe, ctx.environ), rows, error, ctx, nothing_wired)


def harness_checks(ctx: Context) -> list[Finding]:
    """Each harness's own checks (e.g. Claude Code's waker), after every wiring finding."""
    out = []
    for harness in registry.all_harnesses():
        for check, ref in harness.checks:
            out.append(_guarded(check, resolve(ref), ctx))
    return out


def shown_where(w: Any, ctx: Context) -> str:
    scope = getattr(w, "scope", None) or "?"
    path = getattr(w, "path", None)
    return f"{scope} ({_shown(path, ctx.environ)})" if path else str(scope)


def _harness_finding(name: str, exe: str, found: str | None, rows: list[Any], error: str | None, ctx: Context,
                     nothing_wired: bool) -> Finding:
    check = f"harness.{name}"
    install = f"kijito-pull install {name} --project   (or --user)"
    if error:
        return Finding(check, WARN, f"cannot tell whether {name} is wired: {error}",
                       f"check {name}'s settings files; `{install}` rewrites its part")
    wired = [w for w in rows if getattr(w, "installed", False)]
    broken = [w for w in wired if getattr(w, "command_exists", True) is False]
    on_path = f"{exe} at {_shown(found, ctx.environ)}" if found else f"{exe} not on PATH"
    if broken:
        w = broken[0]
        return Finding(check, FAIL, f"{on_path}; wired at {shown_where(w, ctx)}, but its hooks run "
                                    f"`{getattr(w, 'command', None) or '?'}`, which does not exist"
                                    + (f" ({w.detail})" if getattr(w, "detail", None) else ""),
                       f"reinstall kijito-pull so that command exists, then `{install}` again")
    if wired:
        where = ", ".join(shown_where(w, ctx) for w in wired)
        notes = "; ".join(str(w.detail) for w in wired if getattr(w, "detail", None))
        return Finding(check, OK, f"{on_path}; wired: {where}" + (f"; {notes}" if notes else ""))
    notes = "; ".join(f"{_shown(w.path, ctx.environ)}: {w.detail}" if getattr(w, "path", None) else str(w.detail)
                      for w in rows if getattr(w, "detail", None))[:600]
    seen = f" ({notes})" if notes else ""
    if not found:
        return Finding(check, OK, f"{on_path}; not wired (nothing to do unless you use {name}){seen}")
    if nothing_wired:
        return Finding(check, FAIL, f"{on_path}, but not wired to kijito-pull, and this project opts in: an agent "
                                    f"started here by {name} is never handed its mail{seen}", install)
    return Finding(check, WARN, f"{on_path}, but not wired to kijito-pull (fine if you do not use it for "
                                f"Kijito mail){seen}", install)


# -- running them ------------------------------------------------------------------------------------------


def run_checks(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []

    def add(result: Finding | Iterable[Finding]) -> None:
        findings.extend([result] if isinstance(result, Finding) else result)

    add(check_config(ctx))
    add(check_command(ctx))
    add(check_token(ctx))
    add(check_api_base(ctx))
    add(check_optin(ctx))
    resolve_persona(ctx)
    add(check_reachability(ctx))
    add(check_persona(ctx))
    add(check_state_dir(ctx))
    add(_guarded("cursors", check_cursors, ctx))
    add(_guarded("leases", check_leases, ctx))
    add(_guarded("stop_marker", check_stop_marker, ctx))
    add(check_harnesses(ctx))
    add(harness_checks(ctx))
    return findings


def _guarded(check: str, fn: Callable[[Context], Finding], ctx: Context) -> Finding:
    """A check of local files that meets something unexpected reports it instead of ending the doctor."""
    try:
        return fn(ctx)
    except Exception as exc:  # noqa: BLE001
        return Finding(check, WARN, f"could not be checked: {type(exc).__name__}: {exc}",
                       "look at the state directory by hand (`kijito-pull status`, `kijito-pull session status --all`)")


def failed(findings: Iterable[Finding]) -> bool:
    return any(f.verdict == FAIL for f in findings)
