"""Codex's own doctor check (`codex.trust`): will Codex run the kijito-pull hooks it has been given?

Codex skips untrusted hooks, hooks modified since they were trusted, and every hook of a project it does
not trust, all without a word (kijito_pull.harnesses.codex.trust). This check asks Codex itself
(`codex app-server`, about a quarter of a second) about every hooks.json of ours that `wiring` finds for
this folder, and fails with the fix when Codex would skip one. Listed in `HARNESS.checks`.
"""

from __future__ import annotations

from pathlib import Path

from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding
from kijito_pull.harnesses import installkit
from kijito_pull.harnesses.codex import installer, trust

CHECK = "codex.trust"


def check_trust(ctx: Context) -> Finding:
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.installed]
    if not wired:
        return Finding(CHECK, OK, "no kijito-pull hooks in Codex's hooks.json here; nothing to check")
    codex = installer.codex_path(ctx.environ)
    files = [Path(w.path) for w in wired]
    scope = "--project" if any(w.scope == installkit.PROJECT for w in wired) else "--user"
    if codex is None:
        return Finding(CHECK, WARN, "kijito-pull's Codex hooks are installed, but `codex` is not on PATH, so whether "
                                    "Codex trusts them cannot be asked",
                       "put `codex` on PATH (or set $KIJITO_PULL_CODEX) and run doctor again")
    project = installkit.project_root(ctx.cwd)
    try:
        found = trust.look(codex, str(project), ctx.environ, files, is_ours=installer.is_ours)
    except trust.AppServerError as exc:
        return Finding(CHECK, WARN, f"could not ask Codex whether it trusts kijito-pull's hooks: {exc}",
                       "run `codex app-server` by hand to see why; trust the hooks in Codex's /hooks")
    problem = found.problem()
    if problem:
        return Finding(CHECK, FAIL, f"{problem}: Codex does not run them, so no mail reaches its sessions",
                       found.fix(scope))
    where = ", ".join(sorted({h.source_path for h in found.ours}))
    return Finding(CHECK, OK, f"Codex trusts kijito-pull's {len(found.ours)} hooks ({where})")
