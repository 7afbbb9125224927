"""The daemon's doctor finding (`harness.daemon`): whether a unit or agent is installed, and whether the
command it runs exists. Named by `HARNESS.wiring_check` (kijito_pull.harnesses.daemon) and called by
kijito_pull.doctor.check_harnesses with the rows of `installer.wiring`.
"""

from __future__ import annotations

from typing import Any

from kijito_pull.doctor import FAIL, OK, WARN, Context, Finding, shown_where


def wiring_finding(ctx: Context, harness: Any, rows: list[Any], error: str | None, nothing_wired: bool) -> Finding:
    """The daemon is optional: not installed is fine (it is not counted as "nothing wired")."""
    if error:
        return Finding("harness.daemon", WARN, f"cannot tell whether the daemon is installed: {error}",
                       "check the unit by hand: systemctl --user status 'kijito-pull@*' (Linux), "
                       "launchctl list | grep kijito (macOS)")
    wired = [w for w in rows if getattr(w, "installed", False)]
    broken = [w for w in wired if getattr(w, "command_exists", True) is False]
    if broken:
        w = broken[0]
        return Finding("harness.daemon", FAIL, f"installed at {shown_where(w, ctx)}, but it runs "
                                               f"`{getattr(w, 'command', None) or '?'}`, which does not exist",
                       "kijito-pull install daemon --persona NAME   (renders it again for this installation)")
    if wired:
        notes = "; ".join(str(w.detail) for w in wired if getattr(w, "detail", None))
        return Finding("harness.daemon", OK, "installed: " + ", ".join(shown_where(w, ctx) for w in wired)
                       + (f"; {notes}" if notes else ""))
    return Finding("harness.daemon", OK, "no daemon installed (optional: `kijito-pull install daemon`)")
