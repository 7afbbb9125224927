"""The project opt-in: a line in AGENTS.md or CLAUDE.md, and which persona the project reads.

    - inbox monitor: raise on start        (case-insensitive; list bullets allowed)
    - inbox persona: river                 (optional; else $KIJITO_PERSONA, else the folder's name)
    - inbox interrupt: urgent              (optional; all | urgent | turn-end, default all)

The interrupt policy says which mail may reach an agent in the middle of a turn (Claude Code's session
inbox socket, pi's `deliverAs: "steer"`): `all` (the default), only mail its sender marked `urgent`,
or none (`turn-end`: everything waits for the turn's end, the Stop hook or pi's followUp). Mail whose
urgency the server does not state counts as not urgent (Kijito's inbox rows do not state it today:
docs/claude.md, docs/pi.md). An unknown value is an `interrupt_problem`
(delivery goes on) and the policy falls back to `turn-end`, the one that interrupts nobody.

Hooks call this on every session start, so it imports nothing beyond the standard library and reads
at most a few small files: a project that has not opted in costs almost nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

FILES = ("AGENTS.md", "CLAUDE.md")
MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32
_BULLET = r"^\s*(?:[-*+]|\d+[.)])?\s*"
_OPT_IN = re.compile(_BULLET + r"inbox monitor\s*:\s*raise on start\s*$", re.IGNORECASE | re.MULTILINE)
_PERSONA = re.compile(_BULLET + r"inbox persona\s*:\s*`?([^`\s]+)`?\s*$", re.IGNORECASE | re.MULTILINE)
_INTERRUPT = re.compile(_BULLET + r"inbox interrupt\s*:\s*`?([^`\s]+)`?\s*$", re.IGNORECASE | re.MULTILINE)
_PERSONA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")


INTERRUPT_ALL = "all"
INTERRUPT_URGENT = "urgent"
INTERRUPT_TURN_END = "turn-end"
INTERRUPT_POLICIES = (INTERRUPT_ALL, INTERRUPT_URGENT, INTERRUPT_TURN_END)
DEFAULT_INTERRUPT = INTERRUPT_ALL


def may_interrupt(policy: str, urgent: bool | None) -> bool:
    """May a message with this urgency reach an agent in the middle of a turn under `policy`?"""
    if policy == INTERRUPT_ALL:
        return True
    if policy == INTERRUPT_URGENT:
        return urgent is True
    return False


def during_a_turn(policy: str) -> str:
    """What a session's first hand-over says a push does while a turn runs, under `policy` ("" for `all`,
    where the push route's own words already say it: between tool calls, at the next model call)."""
    if policy == INTERRUPT_URGENT:
        return "during a turn only mail marked urgent is pushed, the rest is handed over when the turn ends"
    if policy == INTERRUPT_TURN_END:
        return "during a turn nothing is pushed: mail is handed over when the turn ends"
    return ""


@dataclass(frozen=True)
class OptIn:
    """What a project's AGENTS.md (or CLAUDE.md) says: opted in or not, the persona and where it came
    from, the interrupt policy, and any problem with them."""

    opted_in: bool
    project: Path  # the folder whose file opted in (or the starting folder)
    persona: str | None = None
    persona_source: str | None = None  # "file", "env" or "folder"
    file: Path | None = None
    problem: str | None = None  # why the opt-in or persona could not be used (one line)
    interrupt: str = DEFAULT_INTERRUPT  # which mail may interrupt a running turn (INTERRUPT_POLICIES)
    interrupt_source: str = "default"  # "file" or "default"
    interrupt_problem: str | None = None  # an unknown `inbox interrupt:` value (mail still flows, at turn end)


def _candidates(start: Path) -> list[Path]:
    """The starting folder and its parents, up to the repository root (the folder holding .git)."""
    out = []
    folder = start
    for _ in range(MAX_DEPTH):
        out.append(folder)
        if (folder / ".git").exists() or folder.parent == folder:
            break
        folder = folder.parent
    return out


def _read(path: Path) -> str:
    with open(path, "rb") as handle:
        return handle.read(MAX_FILE_BYTES).decode("utf-8", "replace")


def resolve(cwd: str | os.PathLike, environ: Mapping[str, str]) -> OptIn:
    """Find the opt-in for the project containing `cwd`. Never raises: problems come back as `problem`."""
    start = Path(cwd).resolve()
    problems = []
    for folder in _candidates(start):
        for name in FILES:
            path = folder / name
            if not path.is_file():
                continue
            try:
                text = _read(path)
            except OSError as exc:
                problems.append(f"cannot read {path}: {exc.strerror}")
                continue
            if _OPT_IN.search(text):
                return _with_persona(folder, path, text, environ)
    return OptIn(False, start, problem="; ".join(problems) or None)


def _interrupt(text: str, path: Path) -> tuple[str, str, str | None]:
    """(policy, source, problem) from the file's `inbox interrupt:` line."""
    match = _INTERRUPT.search(text)
    if not match:
        return DEFAULT_INTERRUPT, "default", None
    value = match.group(1).lower()
    if value in INTERRUPT_POLICIES:
        return value, "file", None
    return INTERRUPT_TURN_END, "file", (f"'inbox interrupt: {match.group(1)[:40]}' in {path} is not one of "
                                        f"{', '.join(INTERRUPT_POLICIES)}; no mail interrupts a turn until it is")


def _with_persona(folder: Path, path: Path, text: str, environ: Mapping[str, str]) -> OptIn:
    interrupt, interrupt_source, interrupt_problem = _interrupt(text, path)
    match = _PERSONA.search(text)
    if match:
        name, source = match.group(1), "file"
    elif environ.get("KIJITO_PERSONA", "").strip():
        name, source = environ["KIJITO_PERSONA"].strip(), "env"
    else:
        name, source = folder.name, "folder"
    if not _PERSONA_NAME.fullmatch(name):
        return OptIn(True, folder, None, source, path,
                     problem=f"the persona {name[:60]!r} (from the {source}) is not a valid persona name; "
                             f"add a line 'inbox persona: NAME' to {path}",
                     interrupt=interrupt, interrupt_source=interrupt_source, interrupt_problem=interrupt_problem)
    return OptIn(True, folder, name, source, path, interrupt=interrupt, interrupt_source=interrupt_source,
                 interrupt_problem=interrupt_problem)
