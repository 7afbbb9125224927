"""The folders an install created, so that its uninstall removes them again once they are empty.

Contract: every folder an installer makes goes through `make_dirs`, which notes the ones that did not exist
(a `~/.copilot`, a `~/.config`, a `~/.local/share` in a fresh HOME). `installflow.settle_folders` then
records them per harness in kijito-pull's data folder (`install-folders.json`, 0600, beside the plugin
copies; computed from the environment's HOME) after an install, and after
that harness's uninstall removes each recorded folder that is empty (deepest first) and forgets them all (a
folder something else has put a file in is in use: it stays, for good). Only folders kijito-pull created
are ever removed; a folder that existed before the install is never recorded. The record removes itself, and
the folders it had to create for itself, when no folder is left in it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from kijito_pull.core import files
from kijito_pull.core.paths import Paths

RECORD = "install-folders.json"
MAX_RECORD_BYTES = 1024 * 1024
OWN = ""  # the record's key for the state folders made to hold the record itself

_made: list[Path] = []  # folders made since the last `take()`, outermost first


def missing(folder: Path) -> list[Path]:
    """The folders `folder` and its parents that do not exist yet, outermost first."""
    out = []
    p = Path(os.path.abspath(folder))
    while not os.path.lexists(p) and p != p.parent:
        out.append(p)
        p = p.parent
    return out[::-1]


def make_dirs(folder: Path) -> None:
    """`mkdir -p folder`, noting each folder it made."""
    new = missing(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _made.extend(new)


def take() -> list[Path]:
    """The folders made since the last call, and forget them."""
    out = list(_made)
    _made.clear()
    return out


def remove_made() -> list[str]:
    """After a failed install rolled its files back: remove the folders made since the last `take()` that
    are empty (deepest first), and forget them; the list of those removed."""
    removed, _ = _remove_empty(str(f) for f in take())
    return removed


def _path(environ: Mapping[str, str]) -> Path:
    # Beside the plugin copies, in the data folder of this environment's HOME: about that HOME's folders.
    return Paths(environ).data_dir / RECORD


def _load(path: Path) -> dict[str, list[str]]:
    try:  # not through a link, not a FIFO: a one-line StateError, as for every state file
        fd = files.open_regular(path, os.O_RDONLY, "install record")
    except FileNotFoundError:
        return {}
    try:
        with os.fdopen(fd, "rb") as handle:
            data = json.loads(handle.read(MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: [f for f in v if isinstance(f, str)] for k, v in data.items() if isinstance(v, list)}


def _save(path: Path, data: dict[str, list[str]]) -> None:
    made = missing(path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    if made:
        data.setdefault(OWN, []).extend(str(f) for f in made)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


def record(environ: Mapping[str, str], harness: str, folders: Iterable[Path]) -> None:
    """Remember that `harness`'s install created `folders`."""
    new = [str(f) for f in folders]
    if not new:
        return
    path = _path(environ)
    data = _load(path)
    known = data.setdefault(harness, [])
    known.extend(f for f in new if f not in known)
    _save(path, data)


def _remove_empty(folders: Iterable[str]) -> tuple[list[str], list[str]]:
    """rmdir each folder that is empty, deepest first: (removed, kept)."""
    removed, kept = [], []
    for folder in sorted(set(folders), key=lambda f: len(Path(f).parts), reverse=True):
        try:
            os.rmdir(folder)
            removed.append(folder)
        except FileNotFoundError:
            pass  # gone already: nothing left to remember
        except OSError:
            kept.append(folder)  # not empty (or not ours to remove now): stays, and stays recorded
    return removed, kept


def remove_created(environ: Mapping[str, str], harness: str) -> list[str]:
    """After `harness`'s uninstall: remove the folders its install created that are empty now; the list of
    those removed, outermost first."""
    path = _path(environ)
    data = _load(path)
    if harness not in data:
        return []
    folders = data.pop(harness)
    if any(k != OWN for k in data):
        removed, _ = _remove_empty(folders)
        _save(path, data)
        return removed[::-1]
    # The last harness recorded: the record goes first, so the folder holding it can go too.
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    removed, _ = _remove_empty([*folders, *data.get(OWN, [])])
    return [f for f in removed[::-1] if f in folders]
