"""Qwen Code's own doctor check (`qwen.trust`): will Qwen Code run the project hooks it has been given?

Qwen's folder trust is off unless the user turns it on (`security.folderTrust.enabled` in the user
settings). When it is on, Qwen skips a project's `.qwen/settings.json` hooks in a folder it does not trust,
silently (`qwen -p` still exits 0; measured on 0.24.4), while hooks in the user settings still run. Trust is
recorded in `trustedFolders.json` (`$QWEN_CODE_TRUSTED_FOLDERS_PATH`, else beside the user settings) as
`{"<folder>": "TRUST_FOLDER"}` (`TRUST_PARENT`: its parent; `DO_NOT_TRUST`), the longest rule holding the
folder deciding. Listed in
`HARNESS.checks`; the installer says the same after a `--project` install.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kijito_pull.core.findings import OK, WARN, Context, Finding
from kijito_pull.harnesses import installkit as common

CHECK = "qwen.trust"
FOLDERS_ENV = "QWEN_CODE_TRUSTED_FOLDERS_PATH"
TRUST_FIX = ("run `kijito-pull uninstall qwen --project` and `kijito-pull install qwen --user` (user hooks run in "
             "every folder), or trust this folder in Qwen Code")


def _folder_trust_on(environ: Mapping[str, str]) -> bool:
    from kijito_pull.harnesses.qwen.installer import qwen_dir

    data, _problem = common.read_for_wiring(qwen_dir(environ) / "settings.json")
    security = data.get("security") if isinstance(data, dict) else None
    folder_trust = security.get("folderTrust") if isinstance(security, dict) else None
    return isinstance(folder_trust, dict) and folder_trust.get("enabled") is True


def _holds(parent: str, child: str) -> bool:
    rel = os.path.relpath(child, parent)
    return rel == "." or not (rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel))


def _trusted(environ: Mapping[str, str], folder: Path) -> bool:
    """The longest rule of trustedFolders.json whose folder (its parent for TRUST_PARENT) holds `folder`
    decides (Qwen's `resolveTrustDecision`, read in its 0.24.4 source); no rule: not trusted."""
    from kijito_pull.harnesses.qwen.installer import qwen_dir

    raw = environ.get(FOLDERS_ENV, "").strip()
    path = common.expand(raw, environ) if raw else qwen_dir(environ) / "trustedFolders.json"
    data, _problem = common.read_for_wiring(path)
    here = os.path.realpath(folder)
    best: tuple[int, str] | None = None
    for rule, level in (data.items() if isinstance(data, dict) else ()):
        where = os.path.realpath(os.path.dirname(rule) if level == "TRUST_PARENT" else rule)
        if _holds(where, here) and (best is None or len(rule) > best[0]):
            best = (len(rule), str(level))
    return best is not None and best[1] in ("TRUST_FOLDER", "TRUST_PARENT")


def untrusted(environ: Mapping[str, str], folder: Path) -> str | None:
    """Why Qwen Code would skip project hooks in `folder`, or None when it runs them."""
    if not _folder_trust_on(environ) or _trusted(environ, folder):
        return None
    return (f"Qwen Code's folder trust is on and {folder} is not trusted, so Qwen skips the project's hooks "
            f"there without a word")


def check_trust(ctx: Context) -> Finding:
    from kijito_pull.harnesses.qwen import installer

    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.installed and w.scope == installer.PROJECT]
    if not wired:
        return Finding(CHECK, OK, "no kijito-pull hooks in this folder's .qwen/settings.json; nothing to check")
    folder = common.default_project(False, ctx.cwd)
    why = untrusted(ctx.environ, folder)
    if why is None:
        return Finding(CHECK, OK, f"Qwen Code runs the project hooks in {folder}")
    return Finding(CHECK, WARN, why, TRUST_FIX)
