"""The Harness contract: everything kijito-pull needs to know about one agent harness, in one object.

Each harness is one package under kijito_pull/harnesses/ whose `__init__.py` defines `HARNESS`, a
`Harness` (this module), and one line in `kijito_pull.harnesses.registry` names that package. The
`install`, `uninstall`, `doctor` and `hook` commands read only the registry and these objects, so a
new harness is one folder plus one registry line (docs/architecture.md, "where a new harness goes").

A Harness says:

- `name`, `title`: `claude` / "Claude Code". The name is the install target, the doctor check
  `harness.<name>`, and the prefix of every hook name (`claude-stop`), which is how the hook gate
  finds the owner of a hook without loading the other harnesses;
- `hooks`: its `kijito-pull hook NAME` entry points, one `Hook` each (the name, the harness event it
  answers, a help line, and optionally `wants`, a cheap test of the input that lets the gate answer
  "nothing to do" before anything else is loaded); `nothing`: what stdout carries when a hook has
  nothing to say ("" for Claude Code, "{}\\n" for Codex, which rejects empty output);
- `mode`: how a session's mode (interactive | headless) is told from the hook's environment
  (`detect_mode`); `session_env`: the environment variable that names the session when the hook
  input does not; `project_env`: the one that names the project folder when the input has no `cwd`
  (Claude Code's `CLAUDE_PROJECT_DIR`; None: the hook's own working directory);
- `early`: the answers given inside the standard-library gate (e.g. a hook with nothing to do);
  each `Hook` names its `handler(inp, env) -> int`, the work it does (`runtime`: one function for
  every hook that names none);
- `confirmation`: where a hand-over can later be confirmed: "transcript" (the harness keeps a
  transcript we can read back), "session" (the harness session itself answers), or None; `record`:
  for a harness whose hook input names no transcript, or whose record is read by a rule of its own (Qwen
  Code's), `record(data, paths, session_id)`, the `transcript.Transcript` it keeps (or None), found its own
  way (None: the input's `transcript_path`, read for markers);
  `holders`: the session's other holders of hand-overs besides its hooks (Claude Code's pusher, the
  Codex watcher), as (holder key prefix, transcript reader name) pairs: SessionEnd settles each of
  them from where its own reader stopped (kijito_pull.harnesses.handover.session_end);
- `installer`: the module with `install(request)` / `uninstall(request)` returning an
  `installkit.Outcome` (its `result` an `installkit.Result`; failures raise `installkit.InstallError`
  carrying an `ExitCode`), `wiring(environ, cwd)` (the read-only look `doctor` uses) and
  `add_arguments(parser, action)` (the harness's own install/uninstall options); `scopes` (user,
  project, or none) and `project` (what `--project` means: the folder or the repository around it);
- its doctor checks: `wiring_check` (the `harness.<name>` finding; None: the generic one for a
  harness started as `executable`) and `checks`, further `(check id, function)` pairs.

The heavy parts are named, never imported, here: "package.module:function" strings resolved on first
use. This module and every harness package's `__init__.py` are standard library only and cheap (no
`dataclasses`, `typing` or `enum` at run time: plain classes with __slots__), because the hook fast
gate imports them in every project, opted in or not.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time; the hook gate imports this module
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import Any

INTERACTIVE = "interactive"
HEADLESS = "headless"
USER = "user"
PROJECT = "project"
#: What `--project` means for a harness: the folder itself (it is started there) or the repository around it.
FOLDER = "folder"
REPOSITORY = "repository"
#: Where a hand-over can later be confirmed (Harness.confirmation).
TRANSCRIPT = "transcript"
SESSION = "session"


def resolve(ref: str) -> Any:
    """The object a "package.module:attribute" reference names (the module itself without ":attribute").

    `__import__` rather than importlib: importlib is not loaded at start-up and costs a little."""
    module, _, attr = ref.partition(":")
    __import__(module)
    found = sys.modules[module]
    return getattr(found, attr) if attr else found


def headless(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """The mode of a harness whose sessions are never woken from outside: always headless."""
    return HEADLESS, None


class Hook:
    """One `kijito-pull hook NAME` entry point.

    name   `<harness>-<what>`, e.g. claude-stop
    event  the harness event it answers (SessionStart, Stop, ...)
    help   one line for `kijito-pull hook --help` (more lines may follow after a newline)
    wants  None, or a "module:function" reference to `wants(data) -> bool`, asked right after the input
           is read and the project found opted in: False answers "nothing to do" at once
    handler  a "module:function" reference to `handler(inp, env) -> int`, the work of this hook (None: the
           harness's `runtime`); the hook gate runs it inside the hook route's one error boundary
    """

    __slots__ = ("name", "event", "help", "wants", "handler")

    def __init__(self, name: str, event: str, help: str = "", wants: str | None = None,
                 handler: str | None = None):
        self.name = name
        self.event = event
        self.help = help
        self.wants = wants
        self.handler = handler

    def __repr__(self) -> str:
        return f"Hook({self.name!r}, {self.event!r})"


class InstallRequest:
    """What `kijito-pull install|uninstall NAME` asks of a harness's installer (one shape for all).

    scope    "user" or "project" (the harness's own choice when it has no scopes, e.g. the daemon)
    project  the project folder `--project` named, or the harness's default for the current folder
    cwd      the folder the command runs in
    options  the harness's own arguments (from its `add_arguments`), by argparse destination
    """

    __slots__ = ("harness", "action", "scope", "environ", "project", "cwd", "dry_run", "options")

    def __init__(self, harness: str, action: str, *, scope: str = USER, environ: Mapping[str, str],
                 project: Path | None = None, cwd: str = ".", dry_run: bool = False,
                 options: Mapping[str, Any] | None = None):
        self.harness = harness
        self.action = action
        self.scope = scope
        self.environ = environ
        self.project = project
        self.cwd = cwd
        self.dry_run = dry_run
        self.options = dict(options or {})

    def option(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name)
        return default if value is None else value


class Harness:
    """One agent harness (see the module docstring for what each attribute means)."""

    __slots__ = ("name", "title", "executable", "hooks", "nothing", "mode", "session_env", "project_env", "early",
                 "runtime", "confirmation", "record", "holders", "installer", "install_help", "scopes", "project",
                 "wiring_check", "checks")

    def __init__(self, name: str, title: str, *, installer: str, install_help: str,
                 executable: str | None = None, hooks: tuple[Hook, ...] = (), nothing: str = "",
                 mode: str | None = None, session_env: str | None = None, project_env: str | None = None,
                 early: str | None = None,
                 runtime: str | None = None, confirmation: str | None = None, record: str | None = None,
                 holders: tuple[tuple[str, str], ...] = (),
                 scopes: tuple[str, ...] = (USER, PROJECT), project: str = FOLDER,
                 wiring_check: str | None = None, checks: tuple[tuple[str, str], ...] = ()):
        for hook in hooks:
            if not hook.name.startswith(name + "-"):
                raise ValueError(f"hook {hook.name!r} of harness {name!r} must be named {name}-...")
        if runtime is None and any(hook.handler is None for hook in hooks):
            raise ValueError(f"harness {name!r}: every hook needs a handler (or the harness a runtime)")
        self.name = name
        self.title = title
        self.executable = executable
        self.hooks = hooks
        self.nothing = nothing
        self.mode = mode
        self.session_env = session_env
        self.project_env = project_env
        self.early = early
        self.runtime = runtime
        self.confirmation = confirmation
        self.record = record
        self.holders = holders
        self.installer = installer
        self.install_help = install_help
        self.scopes = scopes
        self.project = project
        self.wiring_check = wiring_check
        self.checks = checks

    def __repr__(self) -> str:
        return f"Harness({self.name!r})"

    # -- hooks ------------------------------------------------------------------------------------------

    def hook(self, name: str) -> Hook | None:
        for hook in self.hooks:
            if hook.name == name:
                return hook
        return None

    def handler(self, hook: Hook) -> str:
        """The "module:function" reference that does `hook`'s work."""
        ref = hook.handler or self.runtime
        assert ref is not None  # checked when the harness was made
        return ref

    def references(self) -> dict[str, str]:
        """Every "module[:attribute]" reference this harness holds, by what it is for (the contract test
        resolves each one, so a typo fails the suite instead of a user's hook)."""
        refs = {f"hook {h.name}": self.handler(h) for h in self.hooks}
        refs.update({f"wants of {h.name}": h.wants for h in self.hooks if h.wants})
        for what, ref in (("mode", self.mode), ("early", self.early), ("runtime", self.runtime),
                          ("record", self.record), ("wiring_check", self.wiring_check)):
            if ref:
                refs[what] = ref
        for attr in ("install", "uninstall", "wiring"):
            refs[f"installer {attr}"] = f"{self.installer}:{attr}"
        refs.update({f"check {check}": ref for check, ref in self.checks})
        return refs

    def verify(self) -> list[str]:
        """Resolve every reference this harness holds; the problems found (empty: all resolve to callables).
        This imports the heavy parts, so it runs in tests and `doctor`, never in the hook gate."""
        problems = []
        for what, ref in self.references().items():
            try:
                target = resolve(ref)
            except (ImportError, AttributeError, ValueError) as exc:
                problems.append(f"{self.name}: {what}: {ref!r} does not resolve ({type(exc).__name__}: {exc})")
                continue
            if not callable(target):
                problems.append(f"{self.name}: {what}: {ref!r} is not callable")
        return problems

    def detect_mode(self, environ: Mapping[str, str]) -> tuple[str, str | None]:
        """(interactive | headless, a note about an ignored setting or None)."""
        return resolve(self.mode)(environ) if self.mode else headless(environ)

    # -- install, uninstall, wiring -----------------------------------------------------------------------

    def _installer(self, attr: str) -> Callable[..., Any]:
        return resolve(f"{self.installer}:{attr}")

    def install(self, request: InstallRequest) -> Any:
        """An `installkit.Outcome`; raises `installkit.InstallError`."""
        return self._installer("install")(request)

    def uninstall(self, request: InstallRequest) -> Any:
        return self._installer("uninstall")(request)

    def wiring(self, environ: Mapping[str, str], cwd: str) -> list[Any]:
        """Where this harness is (or could be) wired: `installkit.Wiring` rows, read-only."""
        return list(self._installer("wiring")(environ, cwd))

    def add_arguments(self, parser: Any, action: str) -> None:
        """The harness's own `install`/`uninstall` arguments (the common ones are added by the CLI)."""
        add = getattr(resolve(self.installer), "add_arguments", None)
        if add is not None:
            add(parser, action)

    # -- doctor -----------------------------------------------------------------------------------------

    @property
    def check_ids(self) -> tuple[str, ...]:
        """The doctor check ids this harness answers: its wiring finding, then its own checks."""
        return (f"harness.{self.name}", *(check for check, _ref in self.checks))
