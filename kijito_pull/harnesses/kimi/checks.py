"""Kimi Code CLI's own doctor check (`kimi.config`): does Kimi accept the config.toml that holds kijito-pull's
hooks? Kimi validates the whole file when a session starts, and a file it rejects runs no hook; its own
validator is `kimi doctor config FILE` (exit 0: valid; 1: the issues on stderr, one per line). When `wiring` finds
hooks of ours, this check asks it (a few seconds: one Kimi start) and fails with Kimi's first issue and the fix.
Listed in `HARNESS.checks`.
"""

from __future__ import annotations

import subprocess

from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding
from kijito_pull.harnesses import installkit
from kijito_pull.harnesses.kimi import installer

CHECK = "kimi.config"
TIMEOUT = 30.0


def check_config(ctx: Context) -> Finding:
    wired = [w for w in installer.wiring(ctx.environ, ctx.cwd) if w.command is not None]  # any hook of ours
    if not wired:
        return Finding(CHECK, OK, "no kijito-pull hooks in Kimi Code CLI's config.toml; nothing to check")
    path = wired[0].path
    kimi = installkit.which("kimi", ctx.environ)
    if kimi is None:
        return Finding(CHECK, WARN, f"kijito-pull's hooks are in {path}, but `kimi` is not on PATH, so whether Kimi "
                                    f"accepts that file cannot be asked",
                       "put `kimi` on PATH and run doctor again")
    try:
        # our token (and every other Kijito setting: the Redis password) never reaches another program
        done = subprocess.run([kimi, "doctor", "config", str(path)], env=installkit.child_environ(ctx.environ),
                              capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return Finding(CHECK, WARN, f"could not ask Kimi Code CLI about {path}: {exc}",
                       f"run `kimi doctor config {path}` by hand")
    text = done.stdout + done.stderr  # Kimi reports the issues on stderr
    said = " ".join(text.split())
    if done.returncode == 0:
        return Finding(CHECK, OK, f"Kimi Code CLI accepts {path}, which holds kijito-pull's hooks")
    issues = [line.strip() for line in text.splitlines() if ":" in line and line.startswith("    ")]
    if done.returncode == 1 and "Kimi doctor" in said:
        first = issues[0][:200] if issues else said[-200:]
        return Finding(CHECK, FAIL, f"Kimi Code CLI rejects {path} ({first}): it starts no session with it, so no "
                                    f"hook runs and no mail reaches its sessions",
                       f"fix {path} (`kimi doctor config {path}` lists every issue), then run "
                       f"`kijito-pull install kimi --user` again")
    return Finding(CHECK, WARN, f"`kimi doctor config` did not answer (exit {done.returncode}): {said[-300:]}",
                   f"run `kimi doctor config {path}` by hand")
