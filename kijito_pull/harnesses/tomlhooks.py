"""The harness kit for a harness whose hooks are `[[hooks]]` tables in a TOML config file (Kimi Code CLI's
config.toml), the TOML twin of kijito_pull.harnesses.settingshooks:

    [[hooks]]
    event = "UserPromptSubmit"
    command = "<kijito-pull> hook kimi-prompt"
    timeout = 15

`TomlHooks(harness, path_of, hooks=...)` gives such a harness its installer contract
(kijito_pull.harnesses.base): `install`, `uninstall`, `wiring` and `add_arguments` (`--command`, `--source`,
`--consumer`, from the settings kit, which also names our hooks and their command lines; the command is
`--command`, else kijito-pull's launcher, as the settings kit's). There is no TOML
writer in the standard library, and the file is the user's, so it is edited as text, never re-serialized:

- install appends one table per event of ours at the end (each after a blank line), having first taken out
  any table of ours already there (a kijito-pull that moved); every other byte of the file stays;
- uninstall takes our tables out (each with the blank lines just before it); a table ends at its last key
  line, so a comment or blank line after it is left to what follows;
- every edit is checked by parsing the result: it must hold exactly what the edit meant (the user's
  settings, their hooks in their order, then ours), else nothing is written and the user is told what to
  change by hand (a `hooks = [...]` array written inline, a multi-line string that looks like a table);
- the install's backup gives the file back byte for byte when nothing else changed
  (installkit.back_up_before_install; the same `FILE.kijito-pull.bak` as the JSON kit's), and a file the
  install created is removed again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installflow as flow
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses import plugin_files, sourceflags
from kijito_pull.harnesses.installkit import USER, InstallError, Outcome, Result, Wiring
from kijito_pull.harnesses.settingshooks import SettingsHooks

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

_HEADER = re.compile(r"^[ \t]*\[")
_OUR_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*hooks[ \t]*\]\][ \t]*(#.*)?$")
_QUIET = re.compile(r"^[ \t]*(#.*)?$")  # a blank or comment-only line


def parse(raw: bytes | None, path: Path) -> dict[str, Any]:
    """The file's content ({} when absent or empty); InstallError for a file that is not TOML (it is never
    rewritten then)."""
    if raw is None:
        return {}
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); fix or move it, then run this again (nothing was "
                           f"changed)", ExitCode.USAGE) from None


def _string(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes are TOML's, but for DEL, which TOML wants escaped)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _table(entry: Mapping[str, Any]) -> str:
    """One hook of ours as the `[[hooks]]` table install writes (and asks the user to write when it cannot)."""
    return (f"[[hooks]]\nevent = {_string(entry['event'])}\ncommand = {_string(entry['command'])}\n"
            f"timeout = {entry['timeout']}\n")


class TomlHooks:
    """One harness's hooks as `[[hooks]]` tables in one TOML file (see the module docstring)."""

    def __init__(self, harness: Any, path_of: Callable[[str, Mapping[str, str], Path], Path], *,
                 hooks: Sequence[str] | None = None, timeout: int = 15, timeouts: Mapping[str, int] | None = None):
        self.name = harness.name
        self.path_of = path_of
        self.names = SettingsHooks(harness, path_of, hooks=hooks)  # our hooks' names, events and command lines
        self.events = self.names.events
        self.timeout = timeout
        self.timeouts = dict(timeouts or {})
        self.add_arguments = self.names.add_arguments

    # -- reading ---------------------------------------------------------------------------------------------

    @staticmethod
    def entries(data: Mapping[str, Any]) -> list[Any]:
        found = data.get("hooks", [])
        return found if isinstance(found, list) else []

    def is_ours(self, entry: Any) -> bool:
        return isinstance(entry, dict) and self.names.hook_name(entry.get("command")) is not None

    def wanted(self, prefix: Sequence[str], tail: Sequence[str]) -> list[dict[str, Any]]:
        return [{"event": event, "command": self.names.command_line(prefix, hook, tail),
                 "timeout": self.timeouts.get(event, self.timeout)} for event, hook in self.events.items()]

    def is_installed(self, data: Mapping[str, Any], prefix: Sequence[str], tail: Sequence[str]) -> bool:
        return [e for e in self.entries(data) if self.is_ours(e)] == self.wanted(prefix, tail)

    # -- the text edit ----------------------------------------------------------------------------------------

    def without_ours(self, text: str) -> str:
        """`text` without our `[[hooks]]` tables (each with the blank lines just before it)."""
        lines = text.splitlines(keepends=True)
        out: list[str] = []
        i = 0
        while i < len(lines):
            if not _OUR_HEADER.match(lines[i]):
                out.append(lines[i])
                i += 1
                continue
            end = i + 1
            while end < len(lines) and not _HEADER.match(lines[end]):
                end += 1
            while end > i + 1 and _QUIET.match(lines[end - 1]):
                end -= 1  # what follows the table's last key line is left to what comes after
            try:
                table = tomllib.loads("".join(lines[i + 1:end]))
            except tomllib.TOMLDecodeError:
                table = None
            if table is not None and self.is_ours(table):
                while out and not out[-1].strip():
                    out.pop()
                i = end
                continue
            out.extend(lines[i:end])
            i = end
        return "".join(out)

    def with_ours(self, text: str, prefix: Sequence[str], tail: Sequence[str]) -> str:
        base = self.without_ours(text)
        if base and not base.endswith("\n"):
            base += "\n"
        blocks = [_table(entry) for entry in self.wanted(prefix, tail)]
        return base + "".join(("\n" if base or n else "") + block for n, block in enumerate(blocks))

    def checked(self, path: Path, new: str, data: Mapping[str, Any], ours: list[dict[str, Any]]) -> bytes:
        """`new`, once it parses to `data` with its hooks of ours replaced by `ours` (else InstallError)."""
        expected = dict(data)
        hooks = [e for e in self.entries(data) if not self.is_ours(e)] + ours
        if hooks:
            expected["hooks"] = hooks
        else:
            expected.pop("hooks", None)
        try:
            got = tomllib.loads(new)
        except tomllib.TOMLDecodeError:
            got = None
        if got != expected:
            block = "".join(f"\n{_table(e)}" for e in ours)
            want = f"these tables at its end:\n{block}" if ours else "kijito-pull's [[hooks]] tables"
            raise InstallError(f"{path} is written in a way kijito-pull cannot edit safely (e.g. `hooks` as an "
                               f"inline array); nothing was changed. Edit it by hand: "
                               f"{'add' if ours else 'remove'} {want}", ExitCode.USAGE)
        return new.encode("utf-8")

    # -- install / uninstall ------------------------------------------------------------------------------------

    def _begin(self, request: Any) -> tuple[Outcome, bytes | None, dict[str, Any]]:
        path = self.path_of(request.scope, request.environ, request.project)
        outcome = Outcome(request.harness, request.scope, request.action, path=path)
        if path.is_dir():
            raise InstallError(f"{path} is a directory, not a config file", ExitCode.USAGE)
        raw = common.read_bytes(path)
        if raw is not None and raw.startswith(b"\xef\xbb\xbf"):
            raise InstallError(f"{path} starts with a byte order mark, which TOML does not allow; nothing was "
                               f"changed", ExitCode.USAGE)
        return outcome, raw, parse(raw, path)

    def install(self, request: Any) -> Outcome:
        outcome, raw, data = self._begin(request)
        given = request.option("command")
        # --command as given; else the launcher (this installation first, then PATH, then uvx), as the JSON kit's
        prefix = self.names.prefix(given) if given else plugin_files.launcher_command(request.environ, request.dry_run)
        tail = sourceflags.source_flags(request)
        if self.is_installed(data, prefix, tail):
            outcome.result = Result.ALREADY_INSTALLED
            return outcome
        text = (raw or b"").decode("utf-8")
        new = self.checked(outcome.path, self.with_ours(text, prefix, tail), data, self.wanted(prefix, tail))
        ours_already = any(self.is_ours(e) for e in self.entries(data))
        return flow.install_tail(outcome, request.dry_run, raw, new,
                                 plan=lambda: given and flow.note_command(outcome, prefix, request.environ),
                                 back_up=lambda: common.back_up_before_install(outcome.path, raw, ours_already))

    def uninstall(self, request: Any) -> Outcome:
        outcome, raw, data = self._begin(request)
        if raw is None or not any(self.is_ours(e) for e in self.entries(data)):
            outcome.result = Result.NOT_INSTALLED
            return outcome
        new = self.checked(outcome.path, self.without_ours(raw.decode("utf-8")), data, [])
        path = outcome.path
        saved = common.read_bytes(common.backup_path(path))
        if saved is not None and _parses_to(saved, tomllib.loads(new.decode("utf-8"))):
            final: bytes | None = saved
            how = common.Restored("restored")
        elif saved is None and not new.strip():
            final, how = None, common.Restored("removed")
        else:
            final, how = new, common.Restored("edited")
        outcome.diffs.append(common.diff(path, raw, final))

        def undo() -> None:
            if how.how == "restored":
                common.write_bytes(path, saved or b"")
                common.backup_path(path).unlink()
            elif how.how == "removed":
                path.unlink()
            else:
                how.backup = common.timestamped_backup(path)
                common.write_bytes(how.backup, raw or b"")
                common.write_bytes(path, new)
            common.note_restored(outcome, how, "hooks")

        return flow.uninstall_tail(outcome, request.dry_run, undo)

    # -- wiring (read-only, for doctor) ---------------------------------------------------------------------

    def wiring(self, environ: Mapping[str, str], cwd: str) -> list[Wiring]:
        path = self.path_of(USER, environ, Path(cwd))
        try:
            data = parse(common.read_bytes(path), path)
        except InstallError as exc:
            return [Wiring(self.name, USER, False, str(path), None, False, str(exc))]
        found = [e for e in self.entries(data) if self.is_ours(e)]
        if not found:
            return [Wiring(self.name, USER, False, str(path), None, False, "no kijito-pull hooks here")] \
                if path.exists() else []
        command, exists, how = plugin_files.hooks_command(found[0].get("command"), environ)
        again = f"run `kijito-pull install {self.name} --user` again"
        details = []
        missing = [e for e, hook in self.events.items()
                   if not any(f.get("event") == e and self.names.hook_name(f.get("command")) == hook for f in found)]
        if missing:
            details.append(f"no kijito-pull hook on {', '.join(missing)} ({again})")
        misplaced = sorted({str(f.get("event")) for f in found
                            if self.events.get(f.get("event")) != self.names.hook_name(f.get("command"))})
        if misplaced:
            details.append(f"a kijito-pull hook is on the wrong event ({', '.join(misplaced)}): {again}")
        if how is not None:
            details.append(f"hooks find kijito-pull {how}")
        elif not exists:
            details.append(f"`{command}` does not exist: {again}")
        return [Wiring(self.name, USER, not missing, str(path), command, exists, "; ".join(details))]


def _parses_to(raw: bytes, content: Any) -> bool:
    try:
        return tomllib.loads(raw.decode("utf-8")) == content
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


__all__ = ["TomlHooks", "parse"]
