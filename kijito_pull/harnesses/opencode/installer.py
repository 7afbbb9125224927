"""`kijito-pull install opencode`: the plugin in OpenCode's plugin folder, and `@opencode-ai/plugin` beside it.

    --user      ~/.config/opencode/plugin/kijito-pull.js   ($XDG_CONFIG_HOME/opencode when set)
    --project   <project>/.opencode/plugin/kijito-pull.js

The plugin is kijito-pull's own file (extensions/opencode/kijito-pull.js) with one line written: the
command that runs this installation of kijito-pull (`--command` to choose another). OpenCode loads every
`*.js` in those folders at start, with no trust prompt (measured on 1.18.33).

At every start OpenCode also makes sure `@opencode-ai/plugin` is installed in each of its config folders,
with npm; offline that fails only after about 70 s, during which nothing happens (measured). So where it is
missing in the folder we install to, the install runs OpenCode's own step first:
`npm install --save-exact @opencode-ai/plugin@<OpenCode's version>` there (npm's cache is used when it has
the package). What that folder held before (package.json, package-lock.json, node_modules) is noted beside
the plugin (`plugin/.kijito-pull-before.json`), and uninstall gives it back byte for byte: the plugin file
removed, npm's files restored or removed, the folders we made removed when empty. Without npm on PATH the
install stops before it writes anything. The sequence (diff, dry run, the note of what was there, npm, the
write, the result) is the kit's (kijito_pull.harnesses.installflow); this module is OpenCode's paths, its
plugin file and its npm step.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installflow as flow
from kijito_pull.harnesses import installfolders, plugin_files
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.installkit import PROJECT, USER, InstallError, Outcome, Result, Wiring
from kijito_pull.harnesses.opencode.variant import OPENCODE, Variant, for_name

NAME = OPENCODE.name
PLUGIN = "kijito-pull.js"
DEPENDENCY = OPENCODE.dependency
MARK = "kijito-pull for OpenCode"  # the plugin's first line: a file without it is not ours
COMMAND_LINE = re.compile(r'^const COMMAND = .*; // kijito-pull: the installer writes this line$', re.M)
NPM_FILES = ("package.json", "package-lock.json")


def config_dir(scope: str, environ: Mapping[str, str], project: Path, variant: Variant = OPENCODE) -> Path:
    """The config folder of a scope (where its plugin/ folder and node_modules are)."""
    if scope == USER:
        xdg = environ.get("XDG_CONFIG_HOME", "").strip()
        base = common.expand(xdg, environ) if xdg else common.home(environ) / ".config"
        return base / variant.config
    return project / f".{variant.config}"


def plugin_path(scope: str, environ: Mapping[str, str], project: Path, variant: Variant = OPENCODE) -> Path:
    return config_dir(scope, environ, project, variant) / "plugin" / PLUGIN


def has_dependency(folder: Path, variant: Variant = OPENCODE) -> bool:
    """Is `@opencode-ai/plugin` (Kilo: `@kilocode/plugin`) installed in this config folder (it then starts
    without waiting)?"""
    return (folder / "node_modules" / variant.dependency / "package.json").is_file()


def _manifest(folder: Path) -> Path:
    """Where the install notes what `folder` held before it: beside the plugin (OpenCode loads only *.js and
    *.ts there), so uninstall finds it and nothing is left anywhere else."""
    return folder / "plugin" / ".kijito-pull-before.json"


def plugin_bytes(prefix: list[str]) -> bytes:
    text = plugin_files.opencode_plugin().read_text("utf-8")
    line = f"const COMMAND = {json.dumps(prefix)}; // kijito-pull: the installer writes this line"
    text, n = COMMAND_LINE.subn(lambda _m: line, text, count=1)
    if n != 1:
        raise InstallError("the shipped OpenCode plugin has no COMMAND line; reinstall kijito-pull")
    return text.encode("utf-8")


def is_ours(raw: bytes | None) -> bool:
    return raw is not None and MARK.encode() in raw[:200]


def command_of(raw: bytes | None) -> list[str] | None:
    match = COMMAND_LINE.search((raw or b"").decode("utf-8", "replace"))
    if match is None:
        return None
    try:
        words = json.loads(match.group(0).split("=", 1)[1].split(";", 1)[0])
    except ValueError:
        return None
    return words if isinstance(words, list) and all(isinstance(w, str) for w in words) and words else None


def opencode_version(environ: Mapping[str, str], cwd: Path,
                     variant: Variant = OPENCODE) -> tuple[str | None, str | None]:
    """(`opencode`'s (`kilo`'s) version, the executable) or (None, why not)."""
    exe = common.which(environ.get(variant.command_env, "").strip() or variant.executable, environ)
    if exe is None:
        return None, f"the `{variant.executable}` command is not on PATH"
    ran = common.run([exe, "--version"], environ, cwd, timeout=60)
    version = ran.output.strip().splitlines()[-1].strip() if ran.code == 0 and ran.output.strip() else ""
    if not re.fullmatch(r"\d+\.\d+\.\d+[\w.-]*", version):
        return None, f"`{exe} --version` did not give a version (exit {ran.code})"
    return version, exe


def npm_command(version: str, variant: Variant = OPENCODE) -> list[str]:
    return ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--save-exact",
            f"{variant.dependency}@{variant.dependency_version or version}"]


# -- wiring (read-only, for doctor) -----------------------------------------------------------------------


def wiring(environ: Mapping[str, str], cwd: str, variant: Variant = OPENCODE) -> list[Wiring]:
    project = common.default_project(False, cwd)
    out = []
    for scope in (PROJECT, USER):
        path = plugin_path(scope, environ, project, variant)
        raw = common.read_bytes(path)
        if raw is None:
            continue
        if not is_ours(raw):
            out.append(Wiring(variant.name, scope, False, str(path), None, False,
                              "a file that is not kijito-pull's plugin"))
            continue
        words = command_of(raw)
        command, exists = common.command_executable(shlex.join(words) if words else None, environ)
        details = []
        if not exists:
            details.append(f"`{command}` does not exist: run `kijito-pull install {variant.name} --{scope}` again")
        if not has_dependency(path.parent.parent, variant):
            details.append(f"{variant.dependency} is not installed in {path.parent.parent}: {variant.title} waits "
                           f"about 70 s at every start offline; run `kijito-pull install {variant.name} --{scope}` "
                           f"again")
        out.append(Wiring(variant.name, scope, True, str(path), command, exists, "; ".join(details)))
    return out


# -- install / uninstall -----------------------------------------------------------------------------------


def add_arguments(parser: Any, action: str) -> None:
    if action == "install":
        flow.add_command_argument(parser, runs="the plugin")


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _unb64(text: Any) -> bytes | None:
    return base64.b64decode(text) if isinstance(text, str) else None


def _before(folder: Path, path: Path) -> dict[str, Any]:
    """What the folder held before the install touched it: npm's files and which folders existed."""
    return {"folder": str(folder), "folder_existed": folder.is_dir(), "plugin_dir_existed": path.parent.is_dir(),
            "node_modules_existed": (folder / "node_modules").exists(),
            "files": {name: _b64(common.read_bytes(folder / name)) for name in NPM_FILES}}


def _begin(request: InstallRequest) -> tuple[Outcome, Path, bytes | None]:
    """The outcome of a request, the plugin file it is about, and that file's bytes (None: absent)."""
    project = request.project if request.project is not None else common.default_project(False, request.cwd)
    path = plugin_path(request.scope, request.environ, project, for_name(request.harness))
    return Outcome(request.harness, request.scope, request.action, path=path), path, common.read_bytes(path)


def install(request: InstallRequest) -> Outcome:
    outcome, path, raw = _begin(request)
    variant = for_name(request.harness)
    folder = path.parent.parent
    if raw is not None and not is_ours(raw):
        raise InstallError(f"{path} exists and is not kijito-pull's plugin; move it away first", ExitCode.USAGE)
    given = request.option("command")  # else the launcher: this installation, then PATH, then uvx
    prefix = flow.command_prefix(given) if given else plugin_files.launcher_command(request.environ, request.dry_run)
    new = plugin_bytes(prefix)
    if given:
        flow.note_command(outcome, prefix, request.environ, runs="the plugin")
    npm: list[str] | None = None
    if not has_dependency(folder, variant):
        version, why = opencode_version(request.environ, Path(request.cwd), variant)
        if version is None:
            outcome.notes.append(f"{variant.dependency} is not installed in {folder} and {why}, so it is not "
                                 f"installed either: {variant.title} installs it at its next start (offline it "
                                 f"waits about 70 s first); run `{flow.again(request)}` again once "
                                 f"`{variant.executable}` is on PATH")
        else:
            npm = npm_command(version, variant)
            outcome.commands.append(npm)
            outcome.notes.append(f"in {folder}: `{common.shown(npm)}` ({variant.title}'s own start-up "
                                 f"step, done now so it does not wait for it; npm writes package.json, "
                                 f"package-lock.json and node_modules/, which uninstall gives back)")
    if raw == new and npm is None:
        outcome.result = Result.ALREADY_INSTALLED
        return outcome

    def note_before() -> None:
        """The folder as it was before the first install, for uninstall (a record of our own, not a backup)."""
        manifest = _manifest(folder)
        if raw is None and not manifest.exists():
            common.write_bytes(manifest, json.dumps(_before(folder, path)).encode(), 0o600)

    def check_npm() -> None:
        """Before anything is written: npm must be there to run the step planned (a dry run says so)."""
        if npm is None or shutil.which("npm", path=request.environ.get("PATH")) is not None:
            return
        missing = f"npm is not on PATH, so {variant.dependency} cannot be installed in {folder}"
        if request.dry_run:
            outcome.notes.append(f"{missing}: the real install would stop here")
            return
        raise InstallError(f"{missing}; install npm ({variant.title} needs it too) and run this again", ExitCode.USAGE)

    def run_npm() -> None:
        if npm is not None:
            installfolders.make_dirs(folder)
            common.run_all([npm], request.environ, folder, timeout=300)

    return flow.install_tail(outcome, request.dry_run, raw, new, plan=check_npm, back_up=note_before,
                             prepare=run_npm, update=raw is not None)


def _rmdir(folder: Path) -> None:
    try:
        folder.rmdir()  # only when empty: anything of OpenCode's own in it stays
    except OSError:
        pass


def uninstall(request: InstallRequest) -> Outcome:
    outcome, path, raw = _begin(request)
    folder = path.parent.parent
    if not is_ours(raw):
        outcome.result = Result.NOT_INSTALLED
        return outcome
    manifest = _manifest(folder)
    try:
        before = json.loads(manifest.read_bytes())
    except (OSError, ValueError):
        before = None
    outcome.diffs.append(common.diff(path, raw, None))
    restore: dict[str, bytes | None] = {}
    if isinstance(before, dict) and isinstance(before.get("files"), dict):
        for name in NPM_FILES:
            now, then = common.read_bytes(folder / name), _unb64(before["files"].get(name))
            if now != then:
                restore[name] = then
                outcome.diffs.append(common.diff(folder / name, now, then))
        if not before.get("node_modules_existed") and (folder / "node_modules").exists():
            outcome.notes.append(f"{folder / 'node_modules'} is removed (npm made it at install)")
    else:
        outcome.notes.append(f"no record of {folder} before the install: npm's files there are left as they are")

    def undo() -> None:
        path.unlink()
        manifest.unlink(missing_ok=True)
        if not isinstance(before, dict):
            return
        for name, then in restore.items():
            if then is None:
                (folder / name).unlink(missing_ok=True)
            else:
                common.write_bytes(folder / name, then)
        if not before.get("node_modules_existed"):
            shutil.rmtree(folder / "node_modules", ignore_errors=True)
        if not before.get("plugin_dir_existed"):
            _rmdir(path.parent)
        if not before.get("folder_existed"):
            _rmdir(folder)
        outcome.notes.append(f"{folder} given back as it was before the install")

    return flow.uninstall_tail(outcome, request.dry_run, undo)
