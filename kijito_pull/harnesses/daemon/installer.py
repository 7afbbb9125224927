"""`kijito-pull install daemon --persona P`: `kijito-pull watch` supervised by the system, per persona.

Linux (systemd user manager):
    ~/.config/systemd/user/kijito-pull@.service      rendered by kijito_pull.harnesses.daemon.supervision (one template)
    systemctl --user daemon-reload
    systemctl --user enable --now kijito-pull@P
    loginctl show-user $USER -p Linger               (said, not changed: without lingering the unit
                                                      stops when you log out)
macOS (launchd):
    ~/Library/LaunchAgents/com.kijito.pull.P.plist
    launchctl bootstrap gui/$UID <plist>

Either reads the token from a 0600 file (~/.config/kijito-pull/token, or ~/Library/Application
Support/kijito-pull/token): never from the unit, its environment or a command line.

The watch runs with its own consumer, `daemon` (`--consumer NAME` names another): a cursor is keyed by
(API base, persona, consumer), and the agent harnesses (the Claude Code and Codex hooks, the pi child,
`--once`) share the `agent` one, where the first to deliver wins. A daemon on that cursor would take the
agents' mail into its events file. `installed` reads back which consumer an installed unit runs with
(a unit from before `--consumer` existed has none: it runs with the config file's, else `agent`);
kijito_pull.harnesses.daemon.checks flags a daemon that shares the agents' cursor.

`install daemon --relay`, the relay variant, is daemon/relayinstall.py, on the steps shared here
(`service_commands`, `finish`, `finish_uninstall`).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kijito_pull.core import config
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installfolders
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.installkit import USER, InstallError, Outcome, Result, Wiring

NAME = "daemon"

SYSTEMD = "systemd"
LAUNCHD = "launchd"
UNIT_NAME = "kijito-pull@.service"


def default_system() -> str:
    return LAUNCHD if sys.platform == "darwin" else SYSTEMD


def unit_dir(environ: Mapping[str, str]) -> Path:
    return common.config_home(environ) / "systemd" / "user"


def unit_path(environ: Mapping[str, str]) -> Path:
    return unit_dir(environ) / UNIT_NAME


def agents_dir(environ: Mapping[str, str]) -> Path:
    return common.home(environ) / "Library" / "LaunchAgents"


def token_path(system: str, environ: Mapping[str, str]) -> Path:
    from kijito_pull.harnesses.daemon import supervision

    return common.home(environ) / supervision.token_file(system)


def relay_unit_path(environ: Mapping[str, str]) -> Path:
    from kijito_pull.harnesses.daemon import supervision

    return unit_dir(environ) / supervision.RELAY_UNIT


def relay_plist_path(environ: Mapping[str, str]) -> Path:
    from kijito_pull.harnesses.daemon import supervision

    return agents_dir(environ) / supervision.RELAY_PLIST


def instance(persona: str) -> str:
    return f"kijito-pull@{persona}.service"


def enabled_personas(environ: Mapping[str, str]) -> list[str]:
    """Instances enabled with `systemctl --user enable` (their links under the unit dir's *.wants/)."""
    found = set()
    base = unit_dir(environ)
    try:
        wants = [d for d in base.iterdir() if d.name.endswith(".wants") and d.is_dir()]
    except OSError:
        return []
    for folder in wants:
        for link in folder.glob("kijito-pull@*.service"):
            found.add(link.name[len("kijito-pull@"):-len(".service")])
    return sorted(found)


class Installed:
    """One installed daemon file, read back: what it runs and for which personas.

    personas  the personas it watches (systemd: the instances enabled; launchd: the plist's --persona)
    consumer  the `--consumer` its watch is given; None when it has none (it then runs with the config
              file's consumer, else `agent`: the agent harnesses' cursor)
    argv      its command (systemd: ExecStart split as a shell would, specifiers left as written)
    """

    __slots__ = ("system", "path", "personas", "consumer", "argv")

    def __init__(self, system: str, path: Path, personas: list[str], consumer: str | None, argv: list[str]):
        self.system = system
        self.path = path
        self.personas = personas
        self.consumer = consumer
        self.argv = argv

    def __repr__(self) -> str:
        return f"Installed({self.system!r}, {str(self.path)!r}, {self.personas!r}, consumer={self.consumer!r})"


def installed(environ: Mapping[str, str]) -> list[Installed]:
    """Every daemon file installed for this user (read-only): the systemd template, each launchd plist."""
    from kijito_pull.harnesses.daemon import supervision

    out = []
    unit = unit_path(environ)
    text = read_text(unit)
    if text is not None:
        argv = split_line(exec_start(text))
        out.append(Installed(SYSTEMD, unit, enabled_personas(environ),
                             supervision.watch_option(argv, "--consumer"), argv))
    try:
        plists = sorted(agents_dir(environ).glob("com.kijito.pull.*.plist"))
    except OSError:
        plists = []
    for plist in plists:
        argv = plist_arguments(read_text(plist) or "")
        persona = supervision.watch_option(argv, "--persona")
        out.append(Installed(LAUNCHD, plist, [persona] if persona else [],
                             supervision.watch_option(argv, "--consumer"), argv))
    return out


def agent_consumer(environ: Mapping[str, str]) -> str:
    """The consumer the agent harnesses use: the config file's `consumer`, else `agent` (what the hooks
    and a watch without --consumer read)."""
    try:
        name = config.load_config_file(environ).get("consumer")
        return config.validate_consumer(str(name or config.DEFAULT_CONSUMER))
    except config.ConfigError:
        return config.DEFAULT_CONSUMER


def split_line(line: str | None) -> list[str]:
    try:
        return shlex.split(line) if line else []
    except ValueError:
        return []


def plist_arguments(text: str) -> list[str]:
    import plistlib

    try:
        found = plistlib.loads(text.encode("utf-8")).get("ProgramArguments")
    except Exception:  # noqa: BLE001 - a damaged plist has no arguments we can trust
        return []
    return [str(w) for w in found] if isinstance(found, list) else []


def _consumer_shown(consumer: str | None) -> str:
    return f"consumer {consumer}" if consumer else "no --consumer (the config file's consumer, else agent)"


def exec_start(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            return line.split("=", 1)[1].strip()
    return None


def _plist_program(text: str) -> str | None:
    match = re.search(r"<key>ProgramArguments</key>\s*<array>\s*<string>([^<]*)</string>", text)
    if not match:
        return None
    from xml.sax.saxutils import unescape

    return unescape(match.group(1))


# -- wiring (read-only, for doctor) -----------------------------------------------------------------------


def wiring(environ: Mapping[str, str], cwd: str) -> list[Wiring]:
    from kijito_pull.harnesses.daemon import supervision

    out = []
    unit = unit_path(environ)
    text = read_text(unit)
    if text is not None:
        line = exec_start(text)
        try:
            first = shlex.split(line)[0] if line else None
        except (ValueError, IndexError):
            first = None
        command, exists = (common.which(first, environ) or first, common.which(first, environ) is not None) \
            if first else (None, False)
        personas = enabled_personas(environ)
        detail = (f"enabled for {', '.join(personas)}" if personas
                  else "not enabled for any persona (`kijito-pull install daemon --persona NAME`)")
        detail += "; " + _consumer_shown(supervision.watch_option(split_line(line), "--consumer"))
        if not token_path(SYSTEMD, environ).is_file():
            detail += f"; no token file at {token_path(SYSTEMD, environ)}"
        out.append(Wiring(NAME, USER, True, str(unit), command, exists, detail))
    try:
        plists = sorted(agents_dir(environ).glob("com.kijito.pull.*.plist"))
    except OSError:
        plists = []
    for plist in plists:
        text = read_text(plist) or ""
        program = _plist_program(text)
        exists = bool(program) and common.which(program, environ) is not None
        consumer = supervision.watch_option(plist_arguments(text), "--consumer")
        out.append(Wiring(NAME, USER, True, str(plist), program, exists, f"launchd agent; {_consumer_shown(consumer)}"))
    from kijito_pull.harnesses.daemon import relayinstall

    return out + relayinstall.wiring(environ)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text("utf-8", "replace")
    except OSError:
        return None


# -- install / uninstall -----------------------------------------------------------------------------------


def resolve_persona(persona: str | None, environ: Mapping[str, str], cwd: str) -> str:
    if not persona:
        persona = environ.get("KIJITO_PERSONA", "").strip() or None
    if not persona:
        from kijito_pull.harnesses.session import optin

        found = optin.resolve(cwd, environ)
        persona = found.persona if found.opted_in and found.persona else None
    if not persona:
        raise InstallError("which persona? Pass --persona NAME (or set KIJITO_PERSONA, or run this in a project "
                           "that opts in with an `inbox persona:` line)", ExitCode.USAGE)
    try:
        return config.validate_persona(persona)
    except config.ConfigError as exc:
        raise InstallError(str(exc), ExitCode.USAGE) from None


def _user(environ: Mapping[str, str]) -> str:
    name = environ.get("USER") or environ.get("LOGNAME")
    if name:
        return name
    import getpass

    return getpass.getuser()


def lingering(environ: Mapping[str, str], cwd: Path) -> str:
    """One sentence on whether the user's units keep running after logout."""
    loginctl = common.which("loginctl", environ)
    user = _user(environ)
    if loginctl is None:
        return "lingering: cannot tell (no loginctl)"
    ran = common.run([loginctl, "show-user", user, "-p", "Linger"], environ, cwd, 15)
    value = ran.output.strip().partition("=")[2].strip().lower() if ran.code == 0 else ""
    if value == "yes":
        return "lingering is on: the unit keeps running when you log out"
    if value == "no":
        return (f"lingering is off: the unit stops when you log out; `loginctl enable-linger {user}` keeps it "
                f"running")
    first = ran.output.strip().splitlines()[0][:200] if ran.output.strip() else "loginctl failed"
    return f"lingering: cannot tell ({first})"


def token_note(system: str, environ: Mapping[str, str]) -> str | None:
    path = token_path(system, environ)
    if path.is_file():
        mode = path.stat().st_mode & 0o077
        return None if not mode else f"{path} is readable by others: chmod 600 {shlex.quote(str(path))}"
    return (f"no token file at {path}: the service exits with status 2 until it exists. Create it with\n"
            f"    install -d -m 700 {shlex.quote(str(path.parent))}\n"
            f"    (umask 077; printf '%s\\n' \"$KIJITOMON_TOKEN\" > {shlex.quote(str(path))})")


def api_base_note(environ: Mapping[str, str]) -> str:
    """The API base the service will use: its command has no --api-base and the supervisor does not pass on
    this shell's $KIJITO_BASE, so it is the config file's api_base, else the default."""
    try:
        file_value = config.load_config_file(environ).get("api_base")
        base = config.resolve_api_base(None, {}, file_value)
    except config.ConfigError as exc:
        return f"API base: none usable ({exc}); the service exits with status 2 until that is fixed"
    note = f"API base: {base} ({'the config file' if file_value else 'the default'}"
    shell = environ.get(config.BASE_ENV, "").strip()
    if shell and shell.rstrip("/") != base:
        note += (f"; ${config.BASE_ENV}={shell} in this shell does not reach the service: put "
                 f"api_base = \"{shell}\" in the config file to use it")
    return note + ")"


def add_arguments(parser: Any, action: str) -> None:
    parser.add_argument("--persona", metavar="NAME", action="append",
                        help="the persona to watch (default: $KIJITO_PERSONA, else this project's); with --relay, "
                             "a persona to relay (repeatable; default: every persona of the account)")
    parser.add_argument("--system", choices=(SYSTEMD, LAUNCHD),
                        help="the supervisor (default: launchd on macOS, else systemd)")
    parser.add_argument("--relay", action="store_true",
                        help="the relay variant: `kijito-pull relay --redis URL` supervised (one per user; "
                             "docs/fleets.md) instead of a watch")
    if action == "install":
        parser.add_argument("--redis", metavar="URL",
                            help="with --relay: redis://HOST:PORT/DB to append to (no password in it)")
        parser.add_argument("--redis-password-file", metavar="FILE",
                            help="with --relay: the relay reads the Redis password from FILE (mode 0600); "
                                 "without it, from the config file's redis_password_file, if any")
        from kijito_pull.harnesses.daemon.supervision import DAEMON_CONSUMER

        parser.add_argument("--consumer", metavar="NAME",
                            help=f"the consumer group of the daemon's cursor (default {DAEMON_CONSUMER!r}: its own, "
                                 f"so it never takes the mail the agent harnesses, consumer "
                                 f"{config.DEFAULT_CONSUMER!r}, are waiting for)")


def resolve_consumer(consumer: str | None) -> str:
    from kijito_pull.harnesses.daemon.supervision import DAEMON_CONSUMER

    try:
        return config.validate_consumer(DAEMON_CONSUMER if consumer is None else str(consumer))
    except config.ConfigError as exc:
        raise InstallError(f"--consumer: {exc}", ExitCode.USAGE) from None


def _target(request: InstallRequest) -> tuple[Mapping[str, str], str, str, str, bool]:
    """(environ, cwd, system, persona, dry_run) of a request; the daemon has no scope and no project."""
    system = request.option("system") or default_system()
    given = request.option("persona") or []
    if isinstance(given, str):
        given = [given]
    if len(given) > 1:
        raise InstallError("one --persona per watch (each persona is an instance of its own); several go with "
                           "--relay", ExitCode.USAGE)
    persona = resolve_persona(given[0] if given else None, request.environ, request.cwd)
    return request.environ, request.cwd, system, persona, request.dry_run


def _consumer_notes(consumer: str, environ: Mapping[str, str]) -> list[str]:
    from kijito_pull.harnesses.daemon.supervision import DAEMON_CONSUMER

    agents = agent_consumer(environ)
    if consumer == agents:
        advice = (f"Leave out --consumer (the daemon's own is {DAEMON_CONSUMER})" if agents != DAEMON_CONSUMER
                  else "Pass --consumer with a name of the daemon's own")
        return [f"WARNING: consumer {consumer} is the one the agent harnesses use (the Claude Code and Codex "
                f"hooks, the pi extension): the daemon shares their cursor and takes their mail into its events "
                f"file, so the agent never sees it. {advice} unless that is what you want; "
                f"`kijito-pull doctor` reports it as a failure."]
    return [f"consumer: {consumer} (the daemon's own cursor; the agent harnesses keep theirs, {agents})"]


def service_commands(outcome: Outcome, system: str, name: str, path: Path, changed: bool, existed: bool,
                      restart: list[str], environ: Mapping[str, str], here: Path) -> tuple[str | None, bool]:
    """(the service manager found on PATH, whether the service already runs as asked), the commands an
    install runs appended to `outcome`: under systemd reload a changed unit, enable and start `name`, and
    `restart` the units that ran the old file; under launchd boot a changed agent out and in again
    (`name` is then the job's label)."""
    if system == SYSTEMD:
        tool = common.which("systemctl", environ)
        ctl = [tool or "systemctl", "--user"]
        running = tool is not None and not changed and _query(ctl + ["is-enabled", name], environ, here) == "enabled" \
            and _query(ctl + ["is-active", name], environ, here) == "active"
        if changed:
            outcome.commands.append(ctl + ["daemon-reload"])
        outcome.commands.append(ctl + ["enable", "--now", name])
        if changed and existed:
            outcome.commands.append(ctl + ["try-restart", *restart])  # a running one keeps its old command
        return tool, running
    tool = common.which("launchctl", environ)
    domain = f"gui/{os.getuid()}"
    job = f"{domain}/{name}"
    loaded = tool is not None and common.run([tool, "print", job], environ, here, 15).code == 0
    if loaded and changed:
        outcome.commands.append([tool or "launchctl", "bootout", job])
    outcome.commands.append([tool or "launchctl", "bootstrap", domain, str(path)])
    return tool, loaded and not changed


def finish(outcome: Outcome, system: str, running: bool, dry_run: bool, changed: bool, before: bytes | None,
            path: Path, text: bytes, tool: str | None, environ: Mapping[str, str], here: Path) -> Outcome:
    """The end every install shares: nothing to do, a dry run, or the file written and the commands run."""
    if running:
        outcome.commands = []
        outcome.result = Result.ALREADY_INSTALLED
    elif dry_run:
        outcome.result = Result.WOULD_INSTALL
    if system == SYSTEMD:
        outcome.notes.append(lingering(environ, here))
    else:
        outcome.notes.append("launchd runs the agent while you are logged in")
    if running or dry_run:
        return outcome
    if tool is None:
        what = "systemctl (systemd)" if system == SYSTEMD else "launchctl (launchd)"
        raise InstallError(f"{what} is not on PATH: save the unit with `kijito-pull install daemon --dry-run` "
                           f"and follow the steps in its header (or pass --system)", ExitCode.USAGE)
    if changed:
        if before is not None:
            bak = common.timestamped_backup(path)
            common.write_bytes(bak, before)
            outcome.backups.append(bak)
        common.write_bytes(path, text, 0o644)
    try:
        common.run_all(outcome.commands, environ, here, 60)
    except InstallError as exc:
        raise _rolled_back(exc, outcome, system, path, before if changed else text, environ, here) from None
    outcome.result = Result.INSTALLED
    return outcome


NO_USER_BUS = ("Failed to connect to bus", "DBUS_SESSION_BUS_ADDRESS", "No medium found", "Failed to connect to user")


def _rolled_back(exc: InstallError, outcome: Outcome, system: str, path: Path, before: bytes | None,
                 environ: Mapping[str, str], here: Path) -> InstallError:
    """A service command failed: the file goes back to what it was (no unit nothing runs is left behind),
    with the folders made for it, and the error says what happened and what the user must do."""
    if before is None:
        _unlink(path)
    elif common.read_bytes(path) != before:
        common.write_bytes(path, before)
    for bak in outcome.backups:
        _unlink(bak)
    installfolders.remove_made()
    undone = f"{path} was {'removed' if before is None else 'put back as it was'}; nothing is installed"
    if system == SYSTEMD and any(sign in str(exc) for sign in NO_USER_BUS):
        return InstallError(
            f"there is no systemd user session here (systemctl --user cannot reach its bus: a container, or a "
            f"shell from su/sudo/ssh without a login session), so the daemon cannot be enabled; {undone}. Run "
            f"`kijito-pull install daemon` again from a normal login (or after `loginctl enable-linger "
            f"{_user(environ)}` and a new login), or run `kijito-pull watch --persona ...` under the supervisor "
            f"you have", ExitCode.SOURCE_FAILED)
    if system == SYSTEMD:
        common.run([common.which("systemctl", environ) or "systemctl", "--user", "daemon-reload"], environ, here, 60)
    return InstallError(f"{exc}; {undone}", exc.code)


def install(request: InstallRequest) -> Outcome:
    from kijito_pull.harnesses.daemon import supervision

    if request.option("relay"):
        from kijito_pull.harnesses.daemon import relayinstall

        return relayinstall.install(request)
    for flag in ("redis", "redis_password_file"):
        if request.option(flag):
            raise InstallError(f"--{flag.replace('_', '-')} goes with --relay", ExitCode.USAGE)
    environ, cwd, system, persona, dry_run = _target(request)
    consumer = resolve_consumer(request.option("consumer"))
    here = Path(cwd)
    if system == SYSTEMD:
        path = unit_path(environ)
        text = supervision.render_systemd(consumer=consumer).encode("utf-8")
        name = instance(persona)
    else:
        path = agents_dir(environ) / supervision.launchd_filename(persona)
        text = supervision.render_launchd(None, persona, str(common.home(environ)), consumer=consumer).encode("utf-8")
        name = supervision.launchd_label(persona)
    outcome = Outcome(NAME, USER, "install", path=path)
    before = common.read_bytes(path)
    changed = before != text
    # `enable --now` leaves a running instance on the old command (say, the agents' consumer): restart
    # the ones that run, every persona's, since they all share this one template.
    others = [p for p in enabled_personas(environ) if p != persona] if system == SYSTEMD else []
    restart = list(dict.fromkeys(instance(p) for p in [persona, *others]))
    tool, running = service_commands(outcome, system, name, path, changed, before is not None, restart,
                                      environ, here)
    if changed and before is not None and others:
        outcome.notes.append(f"the unit is one template for every persona: {', '.join(others)} also "
                             f"run{'s' if len(others) == 1 else ''} with consumer {consumer} from now on")
    outcome.diffs.append(common.diff(path, before, text))
    outcome.notes[:0] = _consumer_notes(consumer, environ)
    note = token_note(system, environ)
    if note:
        outcome.notes.append(note)
    outcome.notes.append(api_base_note(environ))
    return finish(outcome, system, running, dry_run, changed, before, path, text, tool, environ, here)


def _query(argv: list[str], environ: Mapping[str, str], cwd: Path) -> str:
    ran = common.run(argv, environ, cwd, 15)
    return ran.output.strip().splitlines()[0] if ran.output.strip() else ""


def uninstall(request: InstallRequest) -> Outcome:
    from kijito_pull.harnesses.daemon import supervision

    if request.option("relay"):
        from kijito_pull.harnesses.daemon import relayinstall

        return relayinstall.uninstall(request)
    environ, cwd, system, persona, dry_run = _target(request)
    here = Path(cwd)
    if system == SYSTEMD:
        path = unit_path(environ)
        tool = common.which("systemctl", environ)
        ctl = [tool or "systemctl", "--user"]
        others = [p for p in enabled_personas(environ) if p != persona]
        outcome = Outcome(NAME, USER, "uninstall", path=path)
        if not path.exists() and persona not in enabled_personas(environ):
            outcome.result = Result.NOT_INSTALLED
            return outcome
        outcome.commands.append(ctl + ["disable", "--now", instance(persona)])
        remove = not others and path.exists()
        if remove:
            outcome.commands.append(ctl + ["daemon-reload"])
            outcome.diffs.append(common.diff(path, common.read_bytes(path), None))
        else:
            outcome.notes.append(f"{path} stays: still enabled for {', '.join(others)}")
    else:
        path = agents_dir(environ) / supervision.launchd_filename(persona)
        tool = common.which("launchctl", environ)
        outcome = Outcome(NAME, USER, "uninstall", path=path)
        if not path.exists():
            outcome.result = Result.NOT_INSTALLED
            return outcome
        label = supervision.launchd_label(persona)
        outcome.commands.append([tool or "launchctl", "bootout", f"gui/{os.getuid()}/{label}"])
        remove = True
        outcome.diffs.append(common.diff(path, common.read_bytes(path), None))
    return finish_uninstall(outcome, system, tool, path, remove, dry_run, environ, here, "the events file")


def finish_uninstall(outcome: Outcome, system: str, tool: str | None, path: Path, remove: bool, dry_run: bool,
                     environ: Mapping[str, str], here: Path, kept: str) -> Outcome:
    """The end every uninstall shares: what is kept, a dry run, or the commands run and the file removed
    (under systemd before its daemon-reload)."""
    outcome.notes.append(f"kept: the token file ({token_path(system, environ)}) and {kept}")
    if dry_run:
        outcome.result = Result.WOULD_UNINSTALL
        return outcome
    if tool is None:
        raise InstallError(("systemctl" if system == SYSTEMD else "launchctl") + " is not on PATH", ExitCode.USAGE)

    def before(argv: Sequence[str]) -> None:
        if remove and system == SYSTEMD and argv[-1] == "daemon-reload":
            _unlink(path)

    # The first command (disable / bootout) may fail harmlessly: the unit was not enabled or loaded.
    common.run_all(outcome.commands, environ, here, 60, tolerate=lambda n, _ran: n == 0, before=before)
    if remove and system == LAUNCHD:
        _unlink(path)
    outcome.result = Result.UNINSTALLED
    return outcome


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
