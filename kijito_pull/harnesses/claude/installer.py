"""`kijito-pull install claude`: the plugin through Claude Code's own local-marketplace commands.

    claude plugin marketplace add <data dir>/claude-plugin --scope user|project
    claude plugin install kijito-pull@kijito-pull --scope user|project

The plugin files (manifest, marketplace, hooks) are copied from the package into kijito-pull's data
folder first, so the marketplace path stays the same across upgrades and never points into a
virtual environment. The commands write `extraKnownMarketplaces` and `enabledPlugins` into the
scope's settings file (`~/.claude/settings.json` or `<project>/.claude/settings.json`) and cache the
plugin under `~/.claude/plugins/`. We then put the settings file back in its own key order and style.

Settings alone (without `claude plugin install`) are not enough in Claude Code 2.1.197: a project's
declared marketplace is never loaded by `claude -p`, a user one only from the second start. So the
`claude` command is required; without it the install stops with the manual steps.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses import sourceflags
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.installkit import PROJECT, USER, Outcome, Result, Wiring

MARKETPLACE = "kijito-pull"
PLUGIN = "kijito-pull"
PLUGIN_ID = f"{PLUGIN}@{MARKETPLACE}"
NAME = "claude"
LAUNCHER = "bin/kijito-pull-launch"  # what the plugin's hooks run: ${CLAUDE_PLUGIN_ROOT}/<this> hook NAME


def config_dir(environ: Mapping[str, str]) -> Path:
    raw = environ.get("CLAUDE_CONFIG_DIR", "").strip()
    return common.expand(raw, environ) if raw else common.home(environ) / ".claude"


def settings_path(scope: str, environ: Mapping[str, str], project: Path) -> Path:
    if scope == USER:
        return config_dir(environ) / "settings.json"
    return project / ".claude" / "settings.json"


def plugin_dir(environ: Mapping[str, str]) -> Path:
    """Where the plugin files are kept for Claude Code (the local marketplace's path)."""
    return common.data_dir(environ) / "claude-plugin"


def _installed_plugins(environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        data = json.loads((config_dir(environ) / "plugins" / "installed_plugins.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    plugins = data.get("plugins") if isinstance(data, dict) else None
    return plugins if isinstance(plugins, dict) else {}


def cached_installs(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """Claude Code's own record of where kijito-pull@kijito-pull is installed (scope, projectPath)."""
    rows = _installed_plugins(environ).get(PLUGIN_ID)
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _cached_for(scope: str, project: Path, environ: Mapping[str, str]) -> bool:
    for row in cached_installs(environ):
        if row.get("scope") != scope:
            continue
        if scope == USER or _same_path(row.get("projectPath"), project):
            return True
    return False


def _same_path(a: Any, b: Path) -> bool:
    if not isinstance(a, str):
        return False
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


# -- reading the settings ----------------------------------------------------------------------------------


def enabled_ids(data: Any) -> list[str]:
    """The kijito-pull plugin ids enabled in one settings object (from any marketplace)."""
    enabled = data.get("enabledPlugins") if isinstance(data, dict) else None
    if not isinstance(enabled, dict):
        return []
    return [k for k, v in enabled.items() if isinstance(k, str) and k.split("@", 1)[0] == PLUGIN and v is True]


def marketplace_source(data: Any, name: str = MARKETPLACE) -> Any:
    markets = data.get("extraKnownMarketplaces") if isinstance(data, dict) else None
    entry = markets.get(name) if isinstance(markets, dict) else None
    return entry.get("source") if isinstance(entry, dict) else None


def our_source(environ: Mapping[str, str]) -> dict[str, str]:
    return {"source": "directory", "path": str(plugin_dir(environ))}


def with_ours(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """`data` with the two entries the marketplace commands write (what --dry-run shows)."""
    out = json.loads(json.dumps(data))
    markets = out.get("extraKnownMarketplaces")
    if not isinstance(markets, dict):
        markets = out["extraKnownMarketplaces"] = {}
    markets[MARKETPLACE] = {"source": our_source(environ)}
    enabled = out.get("enabledPlugins")
    if not isinstance(enabled, dict):
        enabled = out["enabledPlugins"] = {}
    enabled[PLUGIN_ID] = True
    return out


def without_ours(data: dict[str, Any], environ: Mapping[str, str], keep_marketplace: bool = False) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    enabled = out.get("enabledPlugins")
    if isinstance(enabled, dict):
        enabled.pop(PLUGIN_ID, None)
    markets = out.get("extraKnownMarketplaces")
    if isinstance(markets, dict) and not keep_marketplace and marketplace_source(out) == our_source(environ):
        markets.pop(MARKETPLACE, None)
    return out


def is_ours(data: Any, environ: Mapping[str, str]) -> bool:
    return PLUGIN_ID in enabled_ids(data) and marketplace_source(data) == our_source(environ)


# -- wiring (read-only, for doctor) -----------------------------------------------------------------------


def _plugin_root(where: Any, environ: Mapping[str, str]) -> Path | None:
    """The plugin folder Claude Code runs the hooks from: a directory marketplace's path, else its cache."""
    if isinstance(where, str):
        return Path(where)
    paths = [r.get("installPath") for r in cached_installs(environ) if isinstance(r.get("installPath"), str)]
    return Path(paths[0]) if paths else None


def wiring(environ: Mapping[str, str], cwd: str) -> list[Wiring]:
    from kijito_pull.harnesses import plugin_files

    command, exists, _how = plugin_files.how_hooks_find(None, environ)
    out = []
    here = Path(os.path.abspath(cwd))
    places = []
    for folder in common.project_dirs(cwd):
        places += [(PROJECT, folder, settings_path(PROJECT, environ, folder)),
                   ("local", folder, folder / ".claude" / "settings.local.json")]
    places.append((USER, here, settings_path(USER, environ, here)))
    for scope, project, path in places:
        data, problem = common.read_for_wiring(path)
        if problem is not None:
            out.append(Wiring(NAME, scope, False, str(path), command, exists, problem))
            continue
        ids = enabled_ids(data)
        details = []
        if ids:
            source = marketplace_source(data, ids[0].split("@", 1)[1]) if "@" in ids[0] else None
            where = source.get("path") if isinstance(source, dict) else None
            if isinstance(where, str):
                details.append(f"plugin from {where}")
                if not (Path(where) / ".claude-plugin" / "plugin.json").is_file():
                    details.append(f"but {where} has no plugin any more (run `kijito-pull install claude "
                                   f"--{'user' if scope == USER else 'project'}` again)")
            if scope in (USER, PROJECT) and ids[0] == PLUGIN_ID and not _cached_for(scope, project, environ):
                details.append("enabled in the settings but not in Claude Code's plugin cache "
                               "(`claude plugin list` does not show it)")
            root = _plugin_root(where, environ)
            command, exists, how = plugin_files.how_hooks_find(root / LAUNCHER if root else None, environ)
            details.append(f"hooks find kijito-pull {how}")
            if project != here and scope != USER:
                details.append(f"Claude Code reads it when started in {project}, not in {here}")
        elif path.exists() and scope != "local":
            details.append("no kijito-pull plugin enabled here")
        if ids or path.exists():
            out.append(Wiring(NAME, scope, bool(ids), str(path), command, exists, "; ".join(details)))
    return out


# -- install / uninstall -----------------------------------------------------------------------------------


MANUAL = """\
Claude Code's `claude` command is not on PATH{where}. Install Claude Code, or do it by hand:
  1. copy the plugin files: kijito-pull install claude --dry-run shows where ({plugin})
  2. claude plugin marketplace add {plugin} --scope {scope}
  3. claude plugin install {plugin_id} --scope {scope}
(or pass the claude executable with --bin PATH)"""


def _claude(environ: Mapping[str, str], bin_path: str | None) -> str | None:
    return common.which(bin_path, environ) if bin_path else common.which("claude", environ)


def add_arguments(parser: Any, action: str) -> None:
    parser.add_argument("--bin", metavar="PATH", help="the claude executable (default: `claude` on PATH)")
    if action == "install":
        sourceflags.add_source_arguments(parser)


def hooks_with(raw: bytes, tail: list[str]) -> bytes:
    """The plugin's hooks.json with `tail` (--source URL --consumer NAME) after each `kijito-pull hook NAME`."""
    data = json.loads(raw)
    for groups in data.get("hooks", {}).values():
        for group in groups:
            for handler in group.get("hooks", []):
                handler["command"] = f"{handler['command']} {shlex.join(tail)}"
    return (json.dumps(data, indent=2) + "\n").encode()


def install(request: InstallRequest) -> Outcome:
    from kijito_pull.harnesses import plugin_files

    outcome, file = common.begin(request, settings_path)
    scope, environ, project, path = request.scope, request.environ, request.project, outcome.path
    folder, files = plugin_dir(environ), plugin_files.claude_plugin_files()
    # --source / --consumer: on each hook's command line, in the one plugin copy every scope loads
    tail = sourceflags.source_flags(request)
    contents = {LAUNCHER: plugin_files.launcher_contents()}  # the launcher tries this installation first
    if tail:
        contents["hooks/hooks.json"] = hooks_with(files["hooks/hooks.json"].read_bytes(), tail)
    stale = common.materialize(folder, files, dry_run=True, contents=contents)
    claude = _claude(environ, request.option("bin"))
    market = [claude or "claude", "plugin", "marketplace", "add", str(folder), "--scope", scope]
    plug = [claude or "claude", "plugin", "install", PLUGIN_ID, "--scope", scope]
    done = is_ours(file.data, environ) and _cached_for(scope, project, environ)
    if done and not stale:
        outcome.result = Result.ALREADY_INSTALLED
        return outcome
    if done:  # a newer kijito-pull: new plugin files, same wiring
        outcome.commands = [[claude or "claude", "plugin", "update", PLUGIN_ID, "--scope", scope]]
    else:
        outcome.commands = [market, plug]
    outcome.notes.append(f"plugin files: {folder}" + (f" ({', '.join(stale)} new)" if stale else ""))
    twins = [i for i in enabled_ids(file.data) if i != PLUGIN_ID]
    if twins:
        outcome.notes.append(f"{path} also enables {twins[0]}: its hooks would run as well as these; "
                             f"`claude plugin uninstall {twins[0]} --scope {scope}` removes it")
    expected = with_ours(file.data, environ)
    expected_bytes = file.edited(expected)
    outcome.diffs.append(common.diff(path, file.raw, expected_bytes))
    if common.dry_run_or_manual(outcome, request.dry_run, claude, "claude",
                                lambda: MANUAL.format(where="", plugin=folder, scope=scope, plugin_id=PLUGIN_ID)):
        return outcome
    common.materialize(folder, files, contents=contents)
    common.run_all(outcome.commands, environ, project)
    # Back in the file's own order and style (the commands rewrite it in theirs): what --dry-run showed.
    bak = common.keep_style_after(file, expected, lambda data: is_ours(data, environ),
                                  f"Claude Code did not record the plugin in {path}; run `claude plugin list` to "
                                  f"see why", ours_already=bool(enabled_ids(file.data)))
    if bak:
        outcome.backups.append(bak)
    outcome.result = Result.INSTALLED
    return outcome


def uninstall(request: InstallRequest) -> Outcome:
    outcome, file = common.begin(request, settings_path)
    scope, environ, project, path = request.scope, request.environ, request.project, outcome.path
    cached = _cached_for(scope, project, environ)
    in_settings = PLUGIN_ID in enabled_ids(file.data) or marketplace_source(file.data) == our_source(environ)
    if not cached and not in_settings:
        outcome.result = Result.NOT_INSTALLED
        return outcome
    claude = _claude(environ, request.option("bin"))
    others = [r for r in cached_installs(environ)
              if not (r.get("scope") == scope and (scope == USER or _same_path(r.get("projectPath"), project)))]
    if cached:
        outcome.commands.append([claude or "claude", "plugin", "uninstall", PLUGIN_ID, "--scope", scope])
    remove_market = not others and marketplace_source(file.data) == our_source(environ)
    if remove_market:
        outcome.commands.append([claude or "claude", "plugin", "marketplace", "remove", MARKETPLACE, "--scope", scope])
    if request.dry_run:
        result = without_ours(file.data, environ)
        new, how = common.restore_after_uninstall(file, result, dry_run=True)
        outcome.diffs.append(common.diff(path, file.raw, new))
        outcome.result = Result.WOULD_UNINSTALL
        if claude is None:
            outcome.notes.append("the `claude` command is not on PATH: only the settings file would be edited")
        return outcome
    if claude is not None:
        common.run_all(outcome.commands, environ, project, tolerate=lambda _n, ran: "not found" in ran.output
                       or "not installed" in ran.output.lower())
    else:
        outcome.notes.append("the `claude` command is not on PATH: the settings were edited, but Claude Code's "
                             "plugin cache (~/.claude/plugins) still lists kijito-pull until `claude plugin "
                             f"uninstall {PLUGIN_ID} --scope {scope}` runs")
        outcome.commands = []
    now = common.read_json(path)
    _new, how = common.restore_after_uninstall(file, without_ours(now.data, environ))
    common.note_restored(outcome, how, "entries")
    if not others and claude is not None and not cached_installs(environ):
        _remove_plugin_dir(environ)
    outcome.result = Result.UNINSTALLED
    return outcome


def _remove_plugin_dir(environ: Mapping[str, str]) -> None:
    """The copied plugin files, once no Claude Code scope uses them any more (only if nothing else is there)."""
    import shutil

    from kijito_pull.harnesses import plugin_files

    folder = plugin_dir(environ)
    ours = {Path(rel) for rel in plugin_files.CLAUDE_FILES + plugin_files.CLAUDE_OPTIONAL}
    try:
        found = {p.relative_to(folder) for p in folder.rglob("*") if not p.is_dir()}
    except OSError:
        return
    if found <= ours:
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.parent.rmdir()  # kijito-pull's data folder, when nothing else is in it
        except OSError:
            pass
