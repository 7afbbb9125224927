"""The daemon's doctor findings.

`harness.daemon` (`wiring_finding`): whether a unit or agent is installed (the watch's, and the relay
variant's `kijito-pull-relay.service` / `com.kijito.pull-relay.plist`, with what it relays), and whether
the command it runs exists. Named by `HARNESS.wiring_check` (kijito_pull.harnesses.daemon) and called by
kijito_pull.doctor.check_harnesses with the rows of `installer.wiring`.

`daemon.consumer` (`check_consumer`, in `HARNESS.checks`): whether an installed daemon shares the agent
harnesses' cursor. A cursor is keyed by (API base, persona, consumer); the hooks, the pi child and
`--once` share one consumer (the config file's `consumer`, else `agent`), where the first to deliver
wins. A daemon whose watch runs with that consumer (a unit rendered before the daemon had its own, or
installed with `--consumer agent`) takes the agents' mail into its events file and the agent never sees
it. It lives here, not in kijito_pull.doctor, because the only consumer of the other kind that the
doctor can find installed is the daemon's unit.
"""

from __future__ import annotations

import json
from typing import Any

from kijito_pull.core import paths
from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding, shown, shown_where
from kijito_pull.harnesses.daemon import installer
from kijito_pull.harnesses.daemon.supervision import DAEMON_CONSUMER


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


def agent_personas(ctx: Context, agents: str) -> dict[str, str]:
    """The personas an agent harness serves on this machine, as far as the doctor can tell, each with how
    it knows: the persona of this check (the opted-in project's, what its hooks use), the persona of any
    Claude Code waker lease, and any cursor of the agents' consumer holding pending hand-overs (only a
    harness session's hand-over is pending; a script's never is)."""
    found: dict[str, str] = {}
    if ctx.persona:
        found[ctx.persona] = f"this project's persona, from {ctx.persona_source or '?'}"
    from kijito_pull.harnesses.session import lifecycle

    for lease in lifecycle.all_leases(ctx.environ):
        persona = lease.get("persona")
        if isinstance(persona, str) and persona not in found:
            found[persona] = f"Claude Code session {lease.get('session_id')} has a waker for it"
    directory = paths.state_dir(ctx.environ) / "cursors"
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
            identity = data.get("identity") or {}
        except (OSError, ValueError, AttributeError):
            continue
        persona = identity.get("persona") if isinstance(identity, dict) else None
        if (isinstance(persona, str) and persona not in found and identity.get("consumer") == agents
                and data.get("pending")):
            found[persona] = f"its {agents} cursor holds hand-overs pending with an agent session"
    return found


def _fix(unit: installer.Installed, persona: str, agents: str) -> str:
    system = "" if unit.system == installer.default_system() else f" --system {unit.system}"
    own = "" if agents != DAEMON_CONSUMER else " --consumer kijito-daemon"
    return (f"kijito-pull install daemon --persona {persona}{system}{own}   (renders the unit again with the "
            f"daemon's own consumer{'' if own else ', ' + DAEMON_CONSUMER}, and restarts it)")


def check_consumer(ctx: Context) -> Finding:
    """FAIL when an installed daemon watches, with the agent harnesses' consumer, a persona an agent harness
    serves: the two kinds of consumer share one cursor, and the first to deliver takes the mail."""
    units = installer.installed(ctx.environ)
    if not units:
        return Finding("daemon.consumer", OK, "no daemon installed")
    agents = installer.agent_consumer(ctx.environ)
    served = agent_personas(ctx, agents)
    shared: list[tuple[installer.Installed, str]] = []
    own: list[str] = []
    for unit in units:
        consumer = unit.consumer or agents  # a watch without --consumer reads the same config file as the hooks
        for persona in unit.personas:
            if consumer == agents:
                shared.append((unit, persona))
            else:
                own.append(f"{persona} ({consumer})")
    failing = [(u, p) for u, p in shared if p in served]
    if failing:
        unit, persona = failing[0]
        how = (f"with no --consumer, so with consumer {agents} (the config file's, else the default)"
               if unit.consumer is None else f"with --consumer {agents}")
        return Finding("daemon.consumer", FAIL,
                       f"the daemon at {shown(unit.path, ctx.environ)} watches {persona} {how}, the agent harnesses' "
                       f"consumer, and an agent harness serves {persona} ({served[persona]}): they share one cursor, "
                       f"the first to pull takes the mail, and what the daemon takes goes to its events file, never "
                       f"to the agent"
                       + (f"; also {', '.join(p for _, p in failing[1:])}" if failing[1:] else ""),
                       _fix(unit, persona, agents))
    if shared:
        unit, persona = shared[0]
        names = ", ".join(p for _, p in shared)
        return Finding("daemon.consumer", WARN,
                       f"the daemon watches {names} with consumer {agents}, the one the agent harnesses use; no agent "
                       f"harness is known to serve {'it' if len(shared) == 1 else 'them'} here, but one that does "
                       f"would share its cursor with the daemon and lose mail to it",
                       _fix(unit, persona, agents))
    if own:
        return Finding("daemon.consumer", OK, f"the daemon has its own cursor: {', '.join(own)}; the agent harnesses "
                                              f"use {agents}")
    return Finding("daemon.consumer", OK, "a daemon unit is installed but watches no persona (none enabled)")
