"""Doctor findings: the verdict levels, `Finding`, the check `Context` and the small helpers every check
shares (kijito_pull.doctor's own checks and each harness's `checks.py` alike).

A check is a function taking the shared `Context` and returning one `Finding` (or a list of them): a
stable check id (docs/troubleshooting.md has a section per id), a verdict, what was found and a fix.
`fail` means something would stop mail reaching the agent; `warn` is worth knowing but does not; `ok`
is fine. This module sits in core, below every entry point, so a harness's checks import it and never
the doctor (which imports the harnesses). Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OK = "ok"
WARN = "warn"
FAIL = "fail"
VERDICTS = (OK, WARN, FAIL)


@dataclass(frozen=True)
class Finding:
    """One check's verdict: what was found, and the fix when it is not ok."""

    check: str
    verdict: str  # ok | warn | fail
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "verdict": self.verdict, "detail": self.detail, "fix": self.fix}


@dataclass
class Context:
    """What the checks read (the environment, the flags) and what earlier checks resolved for later ones."""

    environ: Mapping[str, str]
    cwd: str
    persona_flag: str | None = None
    api_base_flag: str | None = None
    token_file_flag: str | None = None
    auth_header_flag: str | None = None
    #: a Redis source's flags (`doctor --source URL --consumer G --redis-password-file FILE`)
    source_flag: str | None = None
    consumer_flag: str | None = None
    redis_password_file_flag: str | None = None
    timeout: float = 5.0
    #: Builds the API client; tests may replace it. Called with (api_base, token, auth_header, timeout).
    client_factory: Callable[..., Any] | None = None
    #: `wiring(harness, environ, cwd)`; None = `kijito_pull.harnesses.registry.wiring` (read-only).
    wiring: Callable[[str, Mapping[str, str], str], list[Any]] | None = None
    # resolved by the checks, in order
    settings: dict[str, Any] = field(default_factory=dict)
    #: the composition root's resolution (a kijito_pull.context.Settings): what every command would use
    resolved: Any = None
    token: str | None = None
    token_problem: str | None = None
    api_base: str | None = None
    auth_header: str | None = None
    #: the project's opt-in (a kijito_pull.harnesses.session.optin.OptIn), once the optin check ran
    optin: Any = None
    persona: str | None = None
    persona_source: str | None = None
    persona_problem: str | None = None
    #: the reachability check's outcome: None not checked, True the server accepted the token's peek
    reachable: bool | None = None
    #: the reachability check found the token refused (401/403): a token problem, not the network's
    token_refused: bool = False
    #: a Redis source's shown URL (kijito_pull.doctor.source_checks), None without one; and whether it
    #: answered PING
    source: str | None = None
    source_reachable: bool = False


def home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or os.path.expanduser("~"))


def shown(path: str | os.PathLike, environ: Mapping[str, str]) -> str:
    """A path with the home directory written as ~ (shorter, and the same for every user)."""
    text = str(path)
    root = str(home(environ))
    if root not in ("", "/") and (text == root or text.startswith(root + os.sep)):
        return "~" + text[len(root):]
    return text


def shown_where(w: Any, ctx: Context) -> str:
    """A wiring row (`installkit.Wiring`) as "scope (~/path)"."""
    scope = getattr(w, "scope", None) or "?"
    path = getattr(w, "path", None)
    return f"{scope} ({shown(path, ctx.environ)})" if path else str(scope)


def guarded(check: str, fn: Callable[[Context], Finding], ctx: Context) -> Finding:
    """A check of local files that meets something unexpected reports it instead of ending the doctor."""
    try:
        return fn(ctx)
    except Exception as exc:  # noqa: BLE001
        return Finding(check, WARN, f"could not be checked: {type(exc).__name__}: {exc}",
                       "look at the state directory by hand (`kijito-pull status`, `kijito-pull session status --all`)")


def failed(findings: Iterable[Finding]) -> bool:
    return any(f.verdict == FAIL for f in findings)
