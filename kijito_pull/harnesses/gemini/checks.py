"""Gemini CLI's own doctor check (`gemini.trust`): will Gemini CLI run the kijito-pull hooks it has been given?

Gemini CLI runs no hook in a folder it does not trust: `gemini -p` refuses to start there (exit 55) and the
TUI asks first (kijito_pull.harnesses.gemini.trust). When `wiring` finds hooks of ours for this folder,
this check reads Gemini's own trust rules for it, and fails with the fix when Gemini would not trust it.
Listed in `HARNESS.checks`.
"""

from __future__ import annotations

from kijito_pull.core.findings import FAIL, OK, Context, Finding
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.gemini import installer, trust

CHECK = "gemini.trust"


def check_trust(ctx: Context) -> Finding:
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.installed]
    if not wired:
        return Finding(CHECK, OK, "no kijito-pull hooks in Gemini CLI's settings here; nothing to check")
    folder = common.default_project(False, ctx.cwd)
    seen = trust.verdict(ctx.environ, folder)
    if seen.trusted:
        return Finding(CHECK, OK, f"Gemini CLI trusts {folder} ({seen.why})")
    scope = "--project" if any(w.scope == installer.PROJECT for w in wired) else "--user"
    return Finding(CHECK, FAIL, f"Gemini CLI does not trust {folder} ({seen.why}): it runs none of kijito-pull's "
                                f"hooks here (`gemini -p` exits 55; the TUI asks first), so no mail reaches its "
                                f"sessions",
                   f"run `kijito-pull install gemini {scope} --trust` here, or trust the folder when Gemini asks")
