"""The report of an unexpected error: what a person sends with a bug report, written where only they read it.

Contract: `write(paths, exc, argv, secrets)` writes the full traceback of an exception kijito-pull did not
anticipate (not a `core.errors.KijitoPullError`) to a new file under the state directory's `crashes/`
(the directory 0700, the file 0600, created exclusively and without following a link) and says where
(for the one line that names it); the newest `KEEP` reports are kept. Nothing secret is written: each
of `secrets` (the token, a Redis password) is replaced, and so is whatever looks like a credential (an
Authorization header, a bearer token, a password in a URL). `write` never raises: a report that cannot
be written is said instead.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import traceback
from collections.abc import Iterable, Sequence

from kijito_pull import __version__
from kijito_pull.core.errors import first_line
from kijito_pull.core.files import StateError, ensure_private_dir
from kijito_pull.core.paths import Paths

KEEP = 20
REDACTED = "[redacted]"
_CREDENTIALS = (
    (re.compile(r"(?i)(authorization|x-api-key|token)(\s*[:=]\s*)(\S+)"), r"\1\2" + REDACTED),
    (re.compile(r"(?i)\bbearer\s+\S+"), "Bearer " + REDACTED),
    (re.compile(r"(://[^/\s:@]*:)[^@\s/]+@"), r"\1" + REDACTED + "@"),
)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with each secret (4 characters or more) and anything shaped like a credential replaced."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


def write(paths: Paths, exc: BaseException, argv: Sequence[str], secrets: Iterable[str]) -> str:
    """Write the report of `exc` (module docstring) and say where, in words for the one line that names it:
    "the full report is in PATH", or why it could not be written. Never raises."""
    try:
        return f"the full report is in {_write(paths, exc, argv, secrets)}"
    except (StateError, OSError) as err:
        return f"its report could not be written ({first_line(err)})"


def _write(paths: Paths, exc: BaseException, argv: Sequence[str], secrets: Iterable[str]) -> str:
    folder = paths.crashes_dir
    ensure_private_dir(folder, root=paths.state_dir)
    now = datetime.datetime.now(datetime.timezone.utc)
    path = folder / f"crash-{now:%Y%m%dT%H%M%S}Z-{os.getpid()}.txt"
    body = "".join([
        f"kijito-pull {__version__}, Python {platform.python_version()} on {platform.platform()}\n",
        f"time: {now.isoformat(timespec='seconds')}\n",
        f"command: kijito-pull {' '.join(argv)}\n\n",
        *traceback.format_exception(type(exc), exc, exc.__traceback__),
    ])
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        raise StateError(f"{folder}: {err.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as out:
        out.write(scrub(body, secrets))
    _prune(folder)
    return str(path)


def _prune(folder) -> None:  # noqa: ANN001 - a Path
    try:
        reports = sorted(p for p in folder.iterdir() if p.name.startswith("crash-"))
    except OSError:
        return
    for old in reports[:-KEEP]:
        try:
            old.unlink()
        except OSError:
            pass
