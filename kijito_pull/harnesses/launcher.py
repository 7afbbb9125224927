"""The kijito-pull side of the launcher (bin/kijito-pull-launch, shipped with every harness's plugin files):
does this kijito-pull fit the plugin that started it? Standard library only: it runs first in every hook.

The launcher exports `KIJITO_PULL_WANT` (the plugin's version) and `KIJITO_PULL_LAUNCHER` (its own path), then
runs the kijito-pull it finds first (the installing one, else PATH's). `reroute()` (called by cli/early.py
before anything else) compares: a kijito-pull fits when its version is at least the plugin's with the same
major number (a newer kijito-pull keeps every hook an older plugin names). One that does not fit hands the
same argv back to the launcher with `KIJITO_PULL_SKIP_PATH=1`, which goes on to `uvx --from kijito-pull==WANT`
(or says how to install it). Nothing of the hook's stdin has been read by then, so the next program gets it whole.

`MARKER` is the launcher's file name: installers and `doctor` tell our hook commands by it.
"""

from __future__ import annotations

import os
import re

MARKER = "kijito-pull-launch"
WANT, LAUNCHER, SKIP_PATH = "KIJITO_PULL_WANT", "KIJITO_PULL_LAUNCHER", "KIJITO_PULL_SKIP_PATH"
VERSION_LINE = re.compile(r"^KIJITO_PULL_WANT=(\S+)$", re.M)
HERE_LINE = re.compile(r"^HERE=.*  # kijito-pull: the installer writes this line$", re.M)


def release(version: str) -> tuple[int, ...] | None:
    """(1, 2, 3) for "1.2.3" (a pre-release or local tail is dropped), None for what is not a version."""
    match = re.match(r"^(\d+(?:\.\d+)*)", version.strip())
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def fits(have: str, want: str) -> bool:
    """Whether kijito-pull `have` serves a plugin of version `want`: at least it, same major number."""
    a, b = release(have), release(want)
    if a is None or b is None:
        return have.strip() == want.strip()
    return a[0] == b[0] and a >= b


def reroute(argv: list[str], environ: dict | None = None) -> None:
    """Hand `argv` back to the launcher (exec, never returns) when it started this kijito-pull for a plugin
    this version does not fit; else return at once."""
    env = os.environ if environ is None else environ
    want = env.get(WANT)
    if not want or env.get(SKIP_PATH):
        return
    from kijito_pull import __version__

    launcher = env.get(LAUNCHER, "")
    if fits(__version__, want) or not os.path.isfile(launcher):
        return
    os.environ[SKIP_PATH] = "1"
    try:
        os.execv("/bin/sh", ["sh", launcher, *argv[1:]])
    except OSError:
        os.environ.pop(SKIP_PATH, None)  # no shell: this kijito-pull is still better than none


def text_with(template: str, here: str | None) -> str:
    """The launcher's text with the installing kijito-pull's absolute path as its first choice (`here`),
    or none (the plugin-channel copy: PATH, then uvx)."""
    import shlex

    line = f"HERE={shlex.quote(here or '')}  # kijito-pull: the installer writes this line"
    out, n = HERE_LINE.subn(lambda _m: line, template, count=1)
    if n != 1:
        raise ValueError("the launcher has no HERE line")
    return out


def version_of(text: str) -> str | None:
    """The plugin version a launcher's text asks for."""
    match = VERSION_LINE.search(text)
    return match.group(1) if match else None
