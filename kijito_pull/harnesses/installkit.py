"""What every installer shares: the typed results of the install contract (Result, Outcome,
InstallError, Wiring; see kijito_pull.harnesses.base), where things are, JSON files edited without
clobbering, backups, running the harness's own commands, and the undo that gives a settings file
back byte for byte.

Standard library and kijito_pull.core only (doctor imports the read-only half). All paths come from the `environ` passed
in (HOME, XDG_*, the harnesses' own overrides), never from this process's environment, so tests and
`doctor` can look at another home.
"""

from __future__ import annotations

import difflib
import enum
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kijito_pull.core.errors import KijitoPullError
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.core.paths import Paths
from kijito_pull.harnesses import installfolders

APP = "kijito-pull"
USER = "user"
PROJECT = "project"
SCOPES = (USER, PROJECT)


class InstallError(KijitoPullError):
    """Something the user has to fix (a settings file we cannot parse, a harness command that failed).

    `code` (also its `exit_code`): ExitCode.USAGE when the user must change something first (nothing was
    run), else ExitCode.SOURCE_FAILED (a harness command failed)."""

    def __init__(self, message: str, code: ExitCode = ExitCode.SOURCE_FAILED):
        super().__init__(message, exit_code=code)
        self.code = ExitCode(code)

    def text(self) -> str:
        """All of it: after its one line, what to do by hand (the harness is missing, ...)."""
        return str(self).rstrip("\n")


class Result(str, enum.Enum):
    """What an install or uninstall did (or, with --dry-run, would do). A str, so it compares to its value."""

    UNCHANGED = "unchanged"
    INSTALLED = "installed"
    UPDATED = "updated"
    ALREADY_INSTALLED = "already_installed"
    UNINSTALLED = "uninstalled"
    NOT_INSTALLED = "not_installed"
    WOULD_INSTALL = "would_install"
    WOULD_UPDATE = "would_update"
    WOULD_UNINSTALL = "would_uninstall"

    @property
    def text(self) -> str:
        """The words `kijito-pull install` prints for it."""
        return _RESULT_TEXT.get(self, self.value)

    @property
    def would(self) -> bool:
        """A dry run's answer: what the real run would do."""
        return self.value.startswith("would")


_RESULT_TEXT = {
    Result.INSTALLED: "installed",
    Result.UPDATED: "updated (new plugin files)",
    Result.ALREADY_INSTALLED: "already installed, nothing changed",
    Result.UNINSTALLED: "uninstalled",
    Result.NOT_INSTALLED: "not installed, nothing changed",
    Result.WOULD_INSTALL: "dry run, nothing changed; install would:",
    Result.WOULD_UPDATE: "dry run, nothing changed; install would refresh the plugin files",
    Result.WOULD_UNINSTALL: "dry run, nothing changed; uninstall would:",
}


@dataclass(frozen=True)
class Wiring:
    """One place where a harness is (or could be) wired to kijito-pull (the read-only look `doctor` asks).

    harness         the harness's registry name ("claude", "pi", "codex", "daemon", ...)
    scope           "user", "project" ("local" for Claude Code's settings.local.json)
    installed       kijito-pull is wired here
    path            the settings / hooks / unit file (or the extension file) looked at
    command         the kijito-pull executable the hooks run, resolved to an absolute path where it
                    can be (else the word as written)
    command_exists  that executable exists (False: the hooks fail with "not found")
    detail          anything else worth saying, plain text ("" when nothing)
    """

    harness: str
    scope: str
    installed: bool
    path: str | None
    command: str | None
    command_exists: bool
    detail: str = ""


# -- where things are ------------------------------------------------------------------------------------


# Every location comes from kijito_pull.core.paths.Paths; these are the installers' short spellings.


def home(environ: Mapping[str, str]) -> Path:
    return Paths(environ).home


def expand(path: str, environ: Mapping[str, str]) -> Path:
    return Paths(environ).expand(path)


def project_root(cwd: str | os.PathLike) -> Path:
    """The repository root above `cwd` (the nearest folder with a .git), else `cwd` itself: where Codex
    looks for `.codex/`, and where Claude Code and pi are normally started."""
    start = Path(os.path.abspath(cwd))
    folder = start
    for _ in range(256):
        if (folder / ".git").exists():
            return folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return start


def default_project(repository: bool, cwd: str | os.PathLike) -> Path:
    """The project `--project` means (Harness.project): the repository around `cwd` for a harness that
    looks there (Codex: <repo>/.codex/hooks.json); else the folder itself, the one the harness is
    started in (measured: Claude Code 2.1.197 started in a subfolder does not load a plugin installed
    for the repository root, which is also what `claude plugin install --scope project` run there does)."""
    return project_root(cwd) if repository else Path(os.path.abspath(cwd))


def project_dirs(cwd: str | os.PathLike) -> list[Path]:
    """The folders whose project settings apply around `cwd`, for the read-only wiring look: `cwd`,
    and the repository root above it when that is another folder."""
    here = Path(os.path.abspath(cwd))
    root = project_root(here)
    return [here] if root == here else [here, root]


def data_dir(environ: Mapping[str, str]) -> Path:
    """Where the installers keep the copies of the plugin files the harnesses load (Paths.data_dir)."""
    return Paths(environ).data_dir


def config_home(environ: Mapping[str, str]) -> Path:
    return Paths(environ).config_home


def child_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a harness's own command that kijito-pull runs (`opencode export`, `qwen sessions
    controllers add`): every Kijito setting left out, the token and the Redis password with them."""
    return {k: v for k, v in environ.items() if not k.upper().startswith(("KIJITO", "KIJITOMON"))}


def which(name: str, environ: Mapping[str, str]) -> str | None:
    """`name` resolved on the PATH of `environ` (an absolute path that is an executable file, or None)."""
    if os.sep in name:
        path = os.path.expanduser(name)
        return os.path.abspath(path) if os.path.isfile(path) and os.access(path, os.X_OK) else None
    found = shutil.which(name, path=environ.get("PATH", os.defpath))
    return os.path.abspath(found) if found else None


def command_executable(command: str | None, environ: Mapping[str, str]) -> tuple[str | None, bool]:
    """(the executable a shell command line runs, resolved where possible; whether it exists)."""
    if not command:
        return None, False
    try:
        words = shlex.split(command)
    except ValueError:
        return command, False
    if not words:
        return None, False
    found = which(words[0], environ)
    return (found or words[0]), found is not None


def this_command() -> list[str]:
    """The command that runs this installation of kijito-pull, as absolute argv words: the `kijito-pull`
    script beside this interpreter first (the installation doing the install, also under pipx), else the
    one on PATH, else `python -m kijito_pull` with this interpreter."""
    import sys

    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "kijito-pull")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside]
    found = shutil.which("kijito-pull")
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "kijito_pull"]


# -- JSON files that people also edit ---------------------------------------------------------------------


@dataclass
class JsonFile:
    """A JSON settings file as found: its bytes (None: absent), parsed value, and how it was written."""

    path: Path
    raw: bytes | None
    data: Any
    indent: str | int | None = 2
    compact: bool = False
    newline: bool = True

    @property
    def exists(self) -> bool:
        return self.raw is not None

    def text(self, data: Any) -> bytes:
        """`data` written the way this file was written (indent, separators, final newline)."""
        return dump(data, self.indent, self.compact, self.newline)

    def edited(self, data: Any) -> bytes:
        """This file changed to hold `data`: only the added or changed parts are written (the rest of
        the text stays byte for byte), else the whole file again in its own key order and style.
        A file that did not exist is written in the harnesses' usual style (2-space indent)."""
        if self.raw is None:
            return dump(data)
        from kijito_pull.harnesses import jsontext

        if not self.raw.startswith(b"\xef\xbb\xbf"):
            text = self.raw.decode("utf-8", "replace")
            unit = self.indent if self.indent is not None else 2
            patched = jsontext.patch(text, self.data, data, unit) if text.strip() else None
            if patched is not None:
                return patched.encode("utf-8")
        return self.text(reorder_like(data, self.data))


def dump(data: Any, indent: str | int | None = 2, compact: bool = False, newline: bool = True) -> bytes:
    if indent is None:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":") if compact else None)
    else:
        text = json.dumps(data, ensure_ascii=False, indent=indent)
    return (text + ("\n" if newline else "")).encode("utf-8")


def read_json(path: Path, default: Any = None) -> JsonFile:
    """Read a JSON object file. Absent → `default` (an empty object unless told). Raises InstallError
    for a file that is not a JSON object (we never rewrite what we cannot parse)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return JsonFile(path, None, {} if default is None else default)
    except IsADirectoryError:
        raise InstallError(f"{path} is a directory, not a settings file", ExitCode.USAGE) from None
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror or exc}", ExitCode.USAGE) from None
    text = raw.decode("utf-8-sig", "replace")
    if not text.strip():
        return JsonFile(path, raw, {} if default is None else default)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); fix or move it, then run this again "
                           f"(nothing was changed)", ExitCode.USAGE) from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} holds a JSON {type(data).__name__}, not an object; nothing was changed",
                           ExitCode.USAGE)
    indent, compact = _style(text)
    return JsonFile(path, raw, data, indent, compact, text.endswith("\n"))


def read_for_wiring(path: Path) -> tuple[Any, str | None]:
    """A settings file's parsed content for the read-only wiring look: (data, None), or (None, why not)."""
    try:
        return read_json(path).data, None
    except InstallError as exc:
        return None, str(exc)


def _style(text: str) -> tuple[str | int | None, bool]:
    match = re.search(r"\n([ \t]+)\S", text)
    if match:
        lead = match.group(1)
        return ("\t" if "\t" in lead else len(lead)), False
    if "\n" in text.strip():
        return 2, False
    return None, bool(re.search(r"[\[{,:]\S", text)) and not re.search(r"[,:] ", text)


def reorder_like(new: Any, old: Any) -> Any:
    """`new` with the keys of every object in the order `old` had them (keys `old` lacks come after,
    in `new`'s order): a harness tool that rewrote the file in its own order is put back in the user's."""
    if isinstance(new, dict) and isinstance(old, dict):
        out = {k: reorder_like(new[k], old[k]) for k in old if k in new}
        out.update({k: v for k, v in new.items() if k not in out})
        return out
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [reorder_like(a, b) for a, b in zip(new, old)]
    return new


def prune_empty(data: Any, reference: Any) -> Any:
    """`data` without the empty objects and lists that `reference` does not have at the same place
    (what removing our entries leaves behind, e.g. `"enabledPlugins": {}`)."""
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        ref = reference.get(key) if isinstance(reference, dict) else None
        value = prune_empty(value, ref) if isinstance(value, dict) else value
        if isinstance(value, (dict, list)) and not value and not (isinstance(reference, dict) and key in reference):
            continue
        out[key] = value
    return out


def diff(path: Path, before: bytes | None, after: bytes | None) -> str:
    """A unified diff of one file (empty when nothing changes)."""
    if before == after:
        return ""
    a = (before or b"").decode("utf-8", "replace").splitlines(keepends=True)
    b = (after or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lines = list(difflib.unified_diff(a, b, "/dev/null" if before is None else str(path),
                                      "/dev/null" if after is None else str(path)))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write atomically (temp file + rename), keeping the file's mode when it existed; the folders it
    makes for it are noted (installfolders), so the uninstall removes them again."""
    installfolders.make_dirs(path.parent)
    try:
        keep = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        keep = mode if mode is not None else 0o644
    tmp = path.with_name(f".{path.name}.kijito-pull-{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


backup_path = Paths.backup
timestamped_backup = Paths.timestamped_backup


def back_up_before_install(path: Path, before: bytes | None, ours_already: bool) -> Path | None:
    """Keep the bytes a file had before an install changed it.

    `FILE.kijito-pull.bak` holds the file as it was before kijito-pull was first added to it; uninstall
    gives those bytes back when our entries were the only change. When the file did not exist, a stale
    backup is removed (so uninstall knows to remove the file). When the file already had our entries
    (an update of our own install), the first backup is kept and this state goes to a timestamped one."""
    bak = backup_path(path)
    if before is None:
        if not ours_already:
            try:
                bak.unlink()
            except FileNotFoundError:
                pass
        return None
    target = timestamped_backup(path) if ours_already else bak
    write_bytes(target, before)
    return target


@dataclass
class Restored:
    """How an uninstall put a settings file right: restored from the backup, removed, or edited."""

    how: str  # "restored" (byte for byte from the backup), "removed" (the file we created), "edited"
    backup: Path | None = None


def restore_after_uninstall(file: JsonFile, result: Any, dry_run: bool = False,
                            theirs: Sequence[str] = ()) -> tuple[bytes | None, Restored]:
    """Put a settings file right once our entries are out of `result` (its parsed content now).

    `file` is the file as it was before the uninstall began (a harness command may have rewritten it
    since): its style and key order are kept, and its bytes are what a backup keeps.
    - the backup made at install time parses to the same content: its bytes, byte for byte (and the
      backup is removed, as the file now equals it);
    - no backup (the file did not exist before we added to it) and nothing else is left (but the top-level
      keys in `theirs`, which the harness writes into any settings file itself): no file;
    - otherwise (someone changed other settings meanwhile): `result`, in the file's own key order and
      style, with the file as it was kept in a timestamped backup.
    Writes nothing when `dry_run`; returns (new bytes or None for no file, what happened)."""
    bak = backup_path(file.path)
    saved = read_bytes(bak)
    original: Any = None
    if saved is not None:
        try:
            original = json.loads(saved.decode("utf-8-sig")) if saved.strip() else {}
        except ValueError:
            original = None
        if isinstance(original, dict) and prune_empty(result, original) == original:
            if not dry_run:
                if read_bytes(file.path) != saved:
                    write_bytes(file.path, saved)
                bak.unlink()
            return saved, Restored("restored")
    pruned = prune_empty(result, original if isinstance(original, dict) else None)
    if saved is None and isinstance(pruned, dict) and not set(pruned) - set(theirs):
        if not dry_run and file.path.exists():
            file.path.unlink()
            _remove_empty_dir(file.path.parent)
        return None, Restored("removed")
    new = file.edited(pruned)
    target = None
    if not dry_run:
        if file.raw is not None and new != file.raw:
            target = timestamped_backup(file.path)
            write_bytes(target, file.raw)
        if read_bytes(file.path) != new:
            write_bytes(file.path, new)
    return new, Restored("edited", target)


def _remove_empty_dir(folder: Path) -> None:
    """A harness's own dot-folder (.codex, .claude, .pi, ...) left empty by the removal of the only file in
    it; any other folder (e.g. a $CODEX_HOME named otherwise) stays."""
    if folder.name.startswith(".") and folder.name not in (".", ".."):
        try:
            folder.rmdir()
        except OSError:
            pass


# -- running harness commands -------------------------------------------------------------------------------


@dataclass
class Ran:
    """One command an installer ran: its argv, exit status and output."""

    argv: list[str]
    code: int
    output: str


on_run: Callable[[list[str]], Any] | None = None  # set by the CLI on a terminal: says what runs (progress)


def run(argv: Sequence[str], environ: Mapping[str, str], cwd: Path, timeout: float = 180.0) -> Ran:
    import subprocess

    if on_run is not None and len(argv) > 1 and argv[1] not in ("--version", "print", "is-enabled", "is-active",
                                                                 "show-user"):
        on_run(list(argv))

    try:
        proc = subprocess.run(list(argv), env=dict(environ), cwd=str(cwd), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        return Ran(list(argv), 127, str(exc))
    except subprocess.TimeoutExpired:
        return Ran(list(argv), 124, f"timed out after {timeout:g} s")
    except OSError as exc:
        return Ran(list(argv), 126, str(exc))
    return Ran(list(argv), proc.returncode, (proc.stdout + proc.stderr).strip())


def shown(argv: Sequence[str]) -> str:
    return shlex.join(list(argv))


def run_all(commands: Sequence[Sequence[str]], environ: Mapping[str, str], cwd: Path, timeout: float = 180.0, *,
            tolerate: Callable[[int, Ran], bool] | None = None,
            before: Callable[[Sequence[str]], Any] | None = None) -> None:
    """Run a harness's commands in order. The first that fails, unless `tolerate(index, ran)` excuses it,
    raises InstallError with its output. `before(argv)` runs just before each command."""
    for n, argv in enumerate(commands):
        if before is not None:
            before(argv)
        ran = run(argv, environ, cwd, timeout)
        if ran.code != 0 and not (tolerate is not None and tolerate(n, ran)):
            raise InstallError(f"`{shown(argv)}` failed (exit {ran.code}): {ran.output[-800:]}",
                               ExitCode.SOURCE_FAILED)


def dry_run_or_manual(outcome: Outcome, dry_run: bool, tool: str | None, name: str,
                      manual: Callable[[], str]) -> bool:
    """For an install through the harness's own command (`name`, found at `tool` or None): a dry run
    stops here, saying when the command is missing; a real run without it raises InstallError with the
    `manual()` steps. True: stop and return the outcome."""
    if dry_run:
        outcome.result = Result.WOULD_INSTALL
        if tool is None:
            outcome.notes.append(f"the `{name}` command is not on PATH: the real install would stop here")
        return True
    if tool is None:
        raise InstallError(manual(), ExitCode.USAGE)
    return False


def keep_style_after(file: JsonFile, expected: Any, recorded: Callable[[Any], bool], missing: str,
                     ours_already: bool) -> Path | None:
    """After a harness's own command added our entry to a settings file: check it is there (else
    InstallError `missing`), put the file back in its own key order and style (what --dry-run showed,
    `expected`), and keep the bytes it had before. Returns the backup made, if any."""
    after = read_json(file.path)
    if not recorded(after.data):
        raise InstallError(missing, ExitCode.SOURCE_FAILED)
    final = file.edited(reorder_like(after.data, expected))
    if final != after.raw:
        write_bytes(file.path, final)
    if final != file.raw:
        return back_up_before_install(file.path, file.raw, ours_already=ours_already)
    return None


def note_restored(outcome: Outcome, how: Restored, what: str) -> None:
    """Say how an uninstall left a settings file (`what`: the kind of entry removed, e.g. "hooks")."""
    path = outcome.path
    outcome.notes.append({"restored": f"{path} restored byte for byte from before the install",
                          "removed": f"{path} removed (it did not exist before the install)",
                          "edited": f"kijito-pull's {what} removed from {path}"}[how.how])
    if how.backup:
        outcome.backups.append(how.backup)


# -- results --------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What an install or uninstall did (or, with --dry-run, would do)."""

    harness: str
    scope: str
    action: str  # install | uninstall
    result: Result = Result.UNCHANGED
    path: Path | None = None
    commands: list[list[str]] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    backups: list[Path] = field(default_factory=list)
    code: ExitCode = ExitCode.OK
    changed: list[str] = field(default_factory=list)  # what an install whose hooks were in place still changed


def headline(outcome: Outcome) -> str:
    """The words `kijito-pull install` prints for an outcome: its result's, except that an install whose
    hooks were already in place but which still changed something (trust recorded) says what it changed,
    never "nothing changed"."""
    result = Result(outcome.result)
    if result is Result.ALREADY_INSTALLED and outcome.changed:
        return f"already installed; changed: {', '.join(outcome.changed)}"
    return result.text


def begin(request: Any, path_of: Callable[[str, Mapping[str, str], Path], Path]) -> tuple[Outcome, JsonFile]:
    """The start every settings-file installer shares: an Outcome for the request's scope and the file
    `path_of(scope, environ, project)` names, read (InstallError if it cannot be parsed)."""
    path = path_of(request.scope, request.environ, request.project)
    return Outcome(request.harness, request.scope, request.action, path=path), read_json(path)


def materialize(dest: Path, files: Mapping[str, Path], dry_run: bool = False,
                contents: Mapping[str, bytes] | None = None) -> list[str]:
    """Copy `files` (relative name -> source) under `dest`, a name in `contents` written with those bytes
    instead (a name under bin/ is made executable); returns the names that changed."""
    changed = []
    for rel, src in files.items():
        target = dest / rel
        data = (contents or {}).get(rel) or src.read_bytes()
        if read_bytes(target) != data:
            changed.append(rel)
            if not dry_run:
                write_bytes(target, data, 0o755 if rel.startswith("bin/") else 0o644)  # bin/: the launcher
    return changed
