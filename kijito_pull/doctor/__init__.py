"""`kijito-pull doctor`: why mail is or is not reaching the agent, one check at a time.

Every check is a small function taking the shared `Context` and returning one or more `Finding`s
(kijito_pull.core.findings: a stable check id, a verdict, what was found and a fix; docs/
troubleshooting.md has a section per id). The checks live beside this module, one module per kind:

    config_checks    config, command, token, api_base, optin (and the persona the rest look at)
    server_checks    reachability, persona (the only two requests)
    source_checks    source, source.redis, source.stream, source.persistence, source.group: only with a
                     Redis source (--source, $KIJITO_PULL_SOURCE, config source), which then replace the
                     two Kijito requests (consumers of a Redis source send Kijito nothing)
    local_checks     state_dir, cursors, leases, stop_marker
    harness_checks   harness.<name> for every registered harness, then each harness's own checks

The doctor is read-only: it creates no state directory and writes no file, and sends at most two
requests (one inbox peek with `mark_read=false`, one persona directory read), none with a Redis source.
It never shows the token.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kijito_pull.core.findings import FAIL, OK, VERDICTS, WARN, Context, Finding, failed, guarded
from kijito_pull.doctor.config_checks import (
    check_api_base,
    check_command,
    check_config,
    check_optin,
    check_token,
    resolve_persona,
)
from kijito_pull.doctor.harness_checks import check_harnesses, harness_checks
from kijito_pull.doctor.local_checks import check_cursors, check_leases, check_state_dir, check_stop_marker
from kijito_pull.doctor.server_checks import check_persona, check_reachability, refused_token
from kijito_pull.doctor.source_checks import SOURCE_CHECK_IDS, check_source, configured
from kijito_pull.harnesses import registry

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


def run_checks(ctx: Context) -> list[Finding]:
    """Every check, in order (`check_ids`); `ctx` keeps what they resolved (e.g. `reachable`)."""
    findings: list[Finding] = []

    def add(result: Finding | Iterable[Finding]) -> None:
        findings.extend([result] if isinstance(result, Finding) else result)

    add(check_config(ctx))
    add(check_command(ctx))
    add(check_token(ctx))
    add(check_api_base(ctx))
    add(check_optin(ctx))
    resolve_persona(ctx)
    if configured(ctx):  # a Redis source: what consumers use is Redis, and Kijito is sent nothing
        at = next(n for n, f in enumerate(findings) if f.check == "token")
        if ctx.token is None and findings[at].detail.startswith("no token"):
            findings[at] = Finding("token", OK, "no token: not needed to read a Redis source (the relay holds it)")
        add(Finding("reachability", OK, "not checked: the source is Redis, and its consumers send Kijito nothing "
                                        "(the relay's connection to Kijito is checked where it runs)"))
        add(Finding("persona", OK, f"{ctx.persona} (from {ctx.persona_source}); not looked up in Kijito's directory: "
                                   f"the source is Redis" if ctx.persona else
                    "no persona given (the source.* findings say what that leaves unchecked)"))
        add(check_source(ctx))
    else:
        add(check_reachability(ctx))
        if ctx.token_refused:  # the server answered and refused the token: the token finding says so
            at = next(n for n, f in enumerate(findings) if f.check == "token")
            findings[at] = refused_token(ctx, findings[at])
        add(check_persona(ctx))
    add(check_state_dir(ctx))
    add(guarded("cursors", check_cursors, ctx))
    add(guarded("leases", check_leases, ctx))
    add(guarded("stop_marker", check_stop_marker, ctx))
    add(check_harnesses(ctx))
    add(harness_checks(ctx))
    return findings


__all__ = ["CORE_CHECK_IDS", "SOURCE_CHECK_IDS",
           "FAIL", "OK", "VERDICTS", "WARN", "Context", "Finding", "check_harnesses", "check_ids",
           "check_optin", "failed", "harnesses", "run_checks"]
