"""The toy's own doctor check, on findings from core (never kijito_pull.doctor)."""

from kijito_pull.core.findings import OK, WARN, Finding
from tests.harnesses.settingstoy.installer import KIT


def check(ctx):
    rows = KIT.wiring(ctx.environ, ctx.cwd)
    bad = [row for row in rows if row.detail and not row.detail.startswith("hooks find kijito-pull")]  # a note
    if bad:
        return Finding("settingstoy.hooks", WARN, f"{bad[0].path}: {bad[0].detail}", "kijito-pull install settingstoy")
    return Finding("settingstoy.hooks", OK, f"{sum(row.installed for row in rows)} settings file(s) hold our hooks")
