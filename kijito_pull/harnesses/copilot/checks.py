"""Copilot CLI's own doctor checks. Listed in `HARNESS.checks`.

    copilot.trust   project hooks (.github/hooks) of ours: `copilot -p` runs them only in a trusted folder and
                    skips them without a word otherwise (copilot/trust.py reads Copilot's own record); FAIL with
                    the fix when it would not trust this repository. User hooks run everywhere: nothing to check
    copilot.push    new mail while a session is open needs kijito-pull's extension (`install copilot --user`)
                    and Copilot CLI's experimental features (`copilot config experimental on` or `copilot
                    --experimental`, kept as "experimental": true in $COPILOT_HOME/settings.json, where Copilot
                    records it): OK when both are there, else WARN naming what is missing and the command
"""

from __future__ import annotations

from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding, shown
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.copilot import installer, trust
from kijito_pull.harnesses.copilot.session import copilot_home

TRUST_CHECK = "copilot.trust"
PUSH_CHECK = "copilot.push"


def check_trust(ctx: Context) -> Finding:
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.installed and w.scope == common.PROJECT]
    if not wired:
        return Finding(TRUST_CHECK, OK, "no kijito-pull hooks in this repository's .github/hooks; nothing to check")
    folder = common.default_project(True, ctx.cwd)
    seen = trust.verdict(ctx.environ, folder)
    if seen.trusted:
        return Finding(TRUST_CHECK, OK, f"Copilot CLI trusts {folder} ({seen.why})")
    return Finding(TRUST_CHECK, FAIL, f"Copilot CLI does not trust {folder} ({seen.why}): `copilot -p` skips its "
                                      f".github/hooks without a word, so no mail reaches headless runs here",
                   "run `kijito-pull install copilot --project --trust` here, answer Copilot's folder dialog with "
                   "\"remember\", or run `kijito-pull install copilot --user` instead")


def check_push(ctx: Context) -> Finding:
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.installed]
    if not wired:
        return Finding(PUSH_CHECK, OK, "kijito-pull's Copilot CLI hooks are not installed here; nothing to check")
    path = installer.extension_path(ctx.environ)
    raw = common.read_bytes(path)
    if raw is None or not raw.startswith(installer.EXTENSION_MARK):
        return Finding(PUSH_CHECK, WARN, f"push unavailable: kijito-pull's extension is not in {path}, so new mail "
                                         f"waits for a session's start or its next stop",
                       "run `kijito-pull install copilot --user`")
    settings = copilot_home(ctx.environ) / "settings.json"
    if not installer.experimental(ctx.environ):
        return Finding(PUSH_CHECK, WARN, f"push is off for you: Copilot CLI loads extensions only with its "
                                         f"experimental features, and {shown(settings, ctx.environ)} does not turn "
                                         f"them on (no \"experimental\": true)", installer.TURN_ON)
    return Finding(PUSH_CHECK, OK, f"push available: the extension ({path}) sends new mail into an open session "
                                   f"(Copilot CLI's experimental features are on in {shown(settings, ctx.environ)})")
