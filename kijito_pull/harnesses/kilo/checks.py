"""Kilo's doctor checks: OpenCode's (kijito_pull.harnesses.opencode.checks) with Kilo's names.

    kilo.plugin   the plugin is wired, `kilo` is there, `@kilocode/plugin` is installed where Kilo looks
    kilo.push     new mail reaches a session at once only when its server listens, with KILO_SERVER_PASSWORD
"""

from kijito_pull.core.findings import Context, Finding
from kijito_pull.harnesses.opencode import checks
from kijito_pull.harnesses.opencode.variant import KILO


def check_plugin(ctx: Context) -> Finding:
    return checks.check_plugin(ctx, KILO)


def check_push(ctx: Context) -> Finding:
    return checks.check_push(ctx, KILO)
