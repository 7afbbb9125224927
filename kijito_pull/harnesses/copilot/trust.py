"""Does Copilot CLI trust a folder? Read, and recorded only when asked, the way Copilot CLI itself records it.

Copilot CLI runs a repository's `.github/hooks` in `copilot -p` only in a trusted folder and skips them
without a word otherwise (measured on 1.0.102, docs/copilot.md). A folder is trusted for that when
`COPILOT_ALLOW_ALL=true` or `GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true` (exactly "true"), or when
`trustedFolders` in `$COPILOT_HOME/config.json` (default `~/.copilot/config.json`) lists it or a folder
above it. Answering the terminal UI's folder dialog with "Yes, and remember this folder" appends the folder
there (measured: two-space JSON, the key added at the end). That file starts with `//` comment lines
("This file is managed automatically"): they are kept byte for byte; only the JSON after them is edited.

    verdict(environ, folder)   trusted or not, and why
    record(environ, folder)    add `folder` to trustedFolders (`kijito-pull install copilot --project --trust`
                               only: never silently), remembering the file's bytes from before in
                               `config.json.kijito-pull-trust`
    forget(environ, folder)    uninstall: take out exactly what `record` added; the file's bytes from before
                               come back when nothing else changed in it (else only our entry goes)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.copilot.session import copilot_home
from kijito_pull.harnesses.copilot.session import split_comments as split
from kijito_pull.harnesses.installkit import InstallError

KEY = "trustedFolders"
TRUE_ENVS = ("COPILOT_ALLOW_ALL", "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS")


def config_path(environ: Mapping[str, str]) -> Path:
    return copilot_home(environ) / "config.json"


def record_path(environ: Mapping[str, str]) -> Path:
    return config_path(environ).with_name("config.json.kijito-pull-trust")


@dataclass
class Config:
    """config.json as found: its `//` comment lines (bytes), the JSON after them (parsed), and its bytes."""

    path: Path
    raw: bytes | None
    head: bytes
    data: dict[str, Any]

    @classmethod
    def read(cls, path: Path) -> Config:
        raw = common.read_bytes(path)
        if raw is None:
            return cls(path, None, b"", {})
        head, body = split(raw)
        try:
            data = json.loads(body.decode("utf-8")) if body.strip() else {}
        except ValueError as exc:
            raise InstallError(f"{path} is not valid JSON after its comment lines ({exc}); nothing was changed",
                               ExitCode.USAGE) from None
        if not isinstance(data, dict):
            raise InstallError(f"{path} does not hold a JSON object; nothing was changed", ExitCode.USAGE)
        return cls(path, raw, head, data)

    def folders(self) -> list[str]:
        value = self.data.get(KEY)
        return [f for f in value if isinstance(f, str)] if isinstance(value, list) else []

    def with_data(self, data: dict[str, Any]) -> bytes:
        """The file holding `data`, its comment lines kept; the JSON edited in place where it can be."""
        if self.raw is None:
            return common.dump(data)
        body = self.raw[len(self.head):]
        edited = common.JsonFile(self.path, body, self.data).edited(data) if body.strip() else common.dump(data)
        return self.head + edited


def _covers(trusted: str, folder: Path) -> bool:
    try:
        base = Path(trusted).resolve()
    except (OSError, ValueError):
        return False
    return folder == base or base in folder.parents


@dataclass
class Verdict:
    """Whether Copilot CLI trusts a folder, and by which rule (or why not)."""

    trusted: bool
    why: str


def verdict(environ: Mapping[str, str], folder: Path) -> Verdict:
    for name in TRUE_ENVS:
        if environ.get(name) == "true":
            return Verdict(True, f"${name}=true")
    path = config_path(environ)
    try:
        config = Config.read(path)
    except InstallError as exc:
        return Verdict(False, str(exc))
    here = folder.resolve()
    hit = next((f for f in config.folders() if _covers(f, here)), None)
    if hit is not None:
        return Verdict(True, f"trustedFolders in {path} lists {hit}")
    return Verdict(False, f"trustedFolders in {path} does not list it")


def plan(environ: Mapping[str, str], folder: Path) -> tuple[Config, bytes]:
    """config.json now and with `folder` trusted. Raises InstallError for a file that cannot be parsed."""
    config = Config.read(config_path(environ))
    return config, config.with_data({**config.data, KEY: [*config.folders(), str(folder)]})


def record(environ: Mapping[str, str], folder: Path) -> Path:
    """Trust `folder` as Copilot's dialog does, remembering the bytes from before. Returns the file."""
    config, new = plan(environ, folder)
    memo = {"folder": str(folder), "before": None if config.raw is None else config.raw.decode("utf-8")}
    common.write_bytes(record_path(environ), common.dump(memo), 0o600)
    common.write_bytes(config.path, new, 0o600)
    return config.path


def recorded(environ: Mapping[str, str]) -> dict[str, Any] | None:
    raw = common.read_bytes(record_path(environ))
    try:
        memo = json.loads(raw) if raw else None
    except ValueError:
        return None
    return memo if isinstance(memo, dict) and isinstance(memo.get("folder"), str) else None


def forget(environ: Mapping[str, str], dry_run: bool = False) -> tuple[Path, bytes | None, bytes | None] | None:
    """Undo `record`: (config path, bytes before, bytes after; None: no file), or None when kijito-pull
    recorded no trust. Writes nothing when `dry_run`."""
    memo = recorded(environ)
    if memo is None:
        return None
    config = Config.read(config_path(environ))
    before = memo.get("before")
    folders = [f for f in config.folders() if f != memo["folder"]]
    data = dict(config.data)
    original: dict[str, Any] | None = None
    if isinstance(before, str):
        try:
            original = json.loads(split(before.encode("utf-8"))[1] or b"{}")
        except ValueError:
            original = None
    if folders or (isinstance(original, dict) and KEY in original):
        data[KEY] = folders
    else:
        data.pop(KEY, None)
    if isinstance(before, str) and original == data:
        new: bytes | None = before.encode("utf-8")  # nothing else changed: the bytes from before
    elif before is None and not data:
        new = None
    else:
        new = config.head + common.dump(data) if config.raw is not None else common.dump(data)
    if not dry_run:
        if new is None:
            if config.path.exists():
                config.path.unlink()
        elif new != config.raw:
            common.write_bytes(config.path, new, 0o600)
        os.unlink(record_path(environ))
    return config.path, config.raw, new
