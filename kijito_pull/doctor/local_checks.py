"""The doctor's checks of local state: the state directory (outside any cache, writable, private), the
cursors (damaged, restored, pinned, and who holds each lock), the waker leases and the stop marker.
Read-only: nothing here creates or changes a file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kijito_pull.core import lockholder, paths
from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding, home, shown
from kijito_pull.core.paths import Paths
from kijito_pull.doctor.config_checks import file_mode
from kijito_pull.harnesses.session import lifecycle


def inside(path: Path, root: Path) -> bool:
    try:
        a, b = os.path.realpath(path), os.path.realpath(root)
    except (OSError, ValueError):
        return False
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def cache_roots(environ: Mapping[str, str]) -> list[Path]:
    """Directories a cache cleaner may empty: the platform's user cache dir and the common places."""
    import platformdirs

    base = home(environ)
    roots = [Path(platformdirs.user_cache_dir()), base / ".cache", base / "Library" / "Caches", Path("/var/cache")]
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
    where = shown(directory, ctx.environ)
    for root in cache_roots(ctx.environ):
        if inside(directory, root):
            fix = (f"point ${paths.STATE_DIR_ENV} outside {shown(root, ctx.environ)} (or unset it for "
                   f"{shown(platformdirs_state(), ctx.environ)}), and move the files over so no cursor is lost"
                   if override else "set KIJITO_PULL_STATE_DIR to a directory outside the cache")
            return [Finding("state_dir", FAIL, f"{where} (from {source}) is inside the cache directory "
                                               f"{shown(root, ctx.environ)}: a cache cleaner would delete the "
                                               "cursors, and mail past --max-replay would be skipped", fix)]
    if not directory.exists():
        parent = directory
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
        if os.access(parent, os.W_OK | os.X_OK):
            return [Finding("state_dir", OK, f"{where} (from {source}) does not exist yet; the first pull creates "
                                             "it (mode 0700)")]
        return [Finding("state_dir", FAIL, f"{where} (from {source}) does not exist and cannot be created: "
                                           f"{shown(parent, ctx.environ)} is not writable",
                        f"create it yourself (install -d -m 700 {where}) or set ${paths.STATE_DIR_ENV}")]
    if not directory.is_dir():
        return [Finding("state_dir", FAIL, f"{where} (from {source}) is not a directory",
                        f"move it away, or set ${paths.STATE_DIR_ENV} to a directory")]
    if not os.access(directory, os.W_OK | os.X_OK):
        return [Finding("state_dir", FAIL, f"{where} (from {source}) is not writable, so no cursor can move",
                        f"chown/chmod it to you (chmod 700 {where}) or set ${paths.STATE_DIR_ENV}")]
    loose = loose_modes(directory)
    if loose:
        listed = ", ".join(f"{shown(p, ctx.environ)} ({m:04o})" for p, m in loose[:5])
        more = f" and {len(loose) - 5} more" if len(loose) > 5 else ""
        return [Finding("state_dir", WARN, f"{where}: readable by other users: {listed}{more}",
                        f"chmod -R go-rwx {where} (kijito-pull tightens its own directories when it next writes)")]
    return [Finding("state_dir", OK, f"{where} (from {source}): writable, private (directories 0700, files 0600)")]


def platformdirs_state() -> Path:
    return paths.platform_state_dir()


def loose_modes(directory: Path) -> list[tuple[Path, int]]:
    """Directories and files under the state dir that other users could read or enter (two levels deep)."""
    out = []
    mode = file_mode(directory)
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
            m = file_mode(p)
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
        elif loaded.restored:
            problems.append(f"{who}: damaged ({loaded.restored}), restored from its last good copy (.prev); the "
                            "next pull rewrites it")
        if loaded.state is not None and loaded.state.pin:
            problems.append(f"{who}: pinned since {loaded.state.pin.get('since')} ({loaded.state.pin.get('reason')})")
        holder = store.lock_holder()
        if holder is not None:
            # never the pid of a locker that exited: the process that inherited its lock (core/lockholder.py)
            held.append(f"{who} locked by {lockholder.holder(store.lock_path, holder).describe()}")
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
        return Finding("stop_marker", WARN, f"waking is stopped for {shown(project, ctx.environ)} / {persona} "
                                            f"since {marker.get('since')} (`kijito-pull session stop`); mail is "
                                            f"still handed over at session start and turn end{elsewhere}",
                       "kijito-pull session start   (in the project)")
    return Finding("stop_marker", OK, f"no stop marker for {shown(project, ctx.environ)} / {persona}{elsewhere}")
