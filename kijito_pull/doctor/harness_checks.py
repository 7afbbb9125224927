"""The doctor's harness findings: `harness.<name>` for every registered harness (is it on PATH, is it
wired to kijito-pull and where, does the command its wiring runs exist), then each harness's own checks
(`Harness.checks`). Which harnesses exist comes from kijito_pull.harnesses.registry alone."""

from __future__ import annotations

from typing import Any

from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding, guarded, shown, shown_where
from kijito_pull.doctor.config_checks import which
from kijito_pull.harnesses import registry
from kijito_pull.harnesses.base import resolve


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
    scopes = "--project   (or --user)" if "project" in harness.scopes else "--user"  # Kimi: user config only
    return _harness_finding(harness.name, exe, which(exe, ctx.environ), rows, error, ctx, nothing_wired, scopes)


def harness_checks(ctx: Context) -> list[Finding]:
    """Each harness's own checks (e.g. Claude Code's waker), after every wiring finding."""
    out = []
    for harness in registry.all_harnesses():
        for check, ref in harness.checks:
            out.append(guarded(check, resolve(ref), ctx))
    return out



def _harness_finding(name: str, exe: str, found: str | None, rows: list[Any], error: str | None, ctx: Context,
                     nothing_wired: bool, scopes: str = "--project   (or --user)") -> Finding:
    check = f"harness.{name}"
    install = f"kijito-pull install {name} {scopes}"
    if error:
        return Finding(check, WARN, f"cannot tell whether {name} is wired: {error}",
                       f"check {name}'s settings files; `{install}` rewrites its part")
    wired = [w for w in rows if getattr(w, "installed", False)]
    broken = [w for w in wired if getattr(w, "command_exists", True) is False]
    on_path = f"{exe} at {shown(found, ctx.environ)}" if found else f"{exe} not on PATH"
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
    notes = "; ".join(f"{shown(w.path, ctx.environ)}: {w.detail}" if getattr(w, "path", None) else str(w.detail)
                      for w in rows if getattr(w, "detail", None))[:600]
    seen = f" ({notes})" if notes else ""
    if not found:
        return Finding(check, OK, f"{on_path}; not wired (nothing to do unless you use {name}){seen}")
    if nothing_wired:
        return Finding(check, FAIL, f"{on_path}, but not wired to kijito-pull, and this project opts in: an agent "
                                    f"started here by {name} is never handed its mail{seen}", install)
    return Finding(check, WARN, f"{on_path}, but not wired to kijito-pull (fine if you do not use it for "
                                f"Kijito mail){seen}", install)
