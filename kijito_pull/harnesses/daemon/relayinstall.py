"""`kijito-pull install daemon --relay --redis URL [--persona P ...] [--redis-password-file FILE]`: the
relay variant of the daemon (docs/fleets.md), `kijito-pull relay` supervised instead of a watch, one per user:

    ~/.config/systemd/user/kijito-pull-relay.service   (Type=notify, WatchdogSec; systemctl --user enable
                                                       --now kijito-pull-relay)
    ~/Library/LaunchAgents/com.kijito.pull-relay.plist

A URL with a password in it is refused (exit 2) before anything is written: the unit's command line is
readable by every user. `uninstall daemon --relay` removes the file and stops the relay. The steps every
daemon install and uninstall share (the service manager's commands, the end) are daemon/installer.py's.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from kijito_pull.core import config
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.harnesses import installkit as common
from kijito_pull.harnesses.base import InstallRequest
from kijito_pull.harnesses.daemon import installer
from kijito_pull.harnesses.installkit import USER, InstallError, Outcome, Result, Wiring


def wiring(environ: Mapping[str, str]) -> list[Wiring]:
    """The relay variant's unit and plist, when installed: what they relay, and what they would miss."""
    from kijito_pull.harnesses.daemon import supervision

    out = []
    places = ((installer.SYSTEMD, installer.relay_unit_path(environ)),
              (installer.LAUNCHD, installer.relay_plist_path(environ)))
    for system, path in places:
        text = installer.read_text(path)
        if text is None:
            continue
        argv = installer.split_line(installer.exec_start(text)) if system == installer.SYSTEMD \
            else installer.plist_arguments(text)
        first = argv[0] if argv else None
        found = common.which(first, environ) if first else None
        personas = [argv[n + 1] for n, w in enumerate(argv[:-1]) if w == "--persona"]
        url = supervision.watch_option(argv, "--redis") or "?"
        detail = (f"relay to {safe_url(url)} for {', '.join(personas) if personas else 'every persona of the account'}"
                  f" ({'systemd, Type=notify' if system == installer.SYSTEMD else 'launchd agent'})")
        password = supervision.watch_option(argv, "--redis-password-file")
        if password and not Path(password).is_file():
            detail += f"; no Redis password file at {password}"
        if not installer.token_path(system, environ).is_file():
            detail += f"; no token file at {installer.token_path(system, environ)}"
        out.append(Wiring(installer.NAME, USER, True, str(path), found or first, found is not None, detail))
    return out


def safe_url(url: str) -> str:
    from kijito_pull.sources import redis_streams

    try:
        return redis_streams.safe_url(url)
    except ValueError:
        return "an unreadable Redis URL"


def relay_request(request: InstallRequest) -> tuple[str, list[str], str | None]:
    """(Redis URL, personas, absolute password file or None) of `install daemon --relay`; InstallError
    (exit 2) for a missing or wrong URL, one with a password in it, a bad persona or --consumer."""
    from kijito_pull.context import refuse_password_in_argv
    from kijito_pull.sources import redis_streams

    url = request.option("redis")
    if not url:
        raise InstallError("--relay needs --redis redis://HOST:PORT/DB", ExitCode.USAGE)
    if request.option("consumer") is not None:
        raise InstallError("--consumer names a watch's cursor; the relay keeps its own (consumer relay)",
                           ExitCode.USAGE)
    try:
        redis_streams.check_url(url)
        refuse_password_in_argv(url, "--redis")
        personas = list(dict.fromkeys(config.validate_persona(p) for p in request.option("persona") or []))
    except (ValueError, config.ConfigError) as exc:
        raise InstallError(str(exc), ExitCode.USAGE) from None
    password = request.option("redis_password_file")
    if password:
        password = os.path.abspath(os.path.join(request.cwd, os.path.expanduser(password)))
    return url, personas, password


def password_note(path: str | None) -> str | None:
    if path is None:
        return ("Redis password: none given (--redis-password-file FILE); the relay reads the config file's "
                "redis_password_file if it has one, else connects without a password")
    if not os.path.isfile(path):
        return f"no Redis password file at {path}: the service exits with status 2 until it exists (mode 0600)"
    if os.stat(path).st_mode & 0o077:
        return f"{path} is readable by others: chmod 600 {shlex.quote(path)} (the relay refuses it until then)"
    return f"Redis password: from {path} (never in the unit)"


def install(request: InstallRequest) -> Outcome:
    from kijito_pull.harnesses.daemon import supervision

    environ, here, dry_run = request.environ, Path(request.cwd), request.dry_run
    system = request.option("system") or installer.default_system()
    url, personas, password = relay_request(request)
    if system == installer.SYSTEMD:
        path = installer.relay_unit_path(environ)
        text = supervision.render_systemd_relay(None, url, personas, password).encode("utf-8")
        name = supervision.RELAY_UNIT
    else:
        path = installer.relay_plist_path(environ)
        text = supervision.render_launchd_relay(None, url, personas, str(common.home(environ)),
                                                password).encode("utf-8")
        name = supervision.RELAY_LABEL
    outcome = Outcome(installer.NAME, USER, "install", path=path)
    before = common.read_bytes(path)
    changed = before != text
    tool, running = installer.service_commands(outcome, system, name, path, changed, before is not None, [name],
                                      environ, here)
    outcome.diffs.append(common.diff(path, before, text))
    which = ", ".join(personas) if personas else "every persona of the account (--persona installer.NAME to name them)"
    outcome.notes.append(f"relay to {safe_url(url)} for {which}")
    for note in (password_note(password), installer.token_note(system, environ), installer.api_base_note(environ)):
        if note:
            outcome.notes.append(note)
    return installer.finish(outcome, system, running, dry_run, changed, before, path, text, tool, environ, here)


def uninstall(request: InstallRequest) -> Outcome:
    """`uninstall daemon --relay`: the relay's unit or plist removed and the relay stopped."""
    from kijito_pull.harnesses.daemon import supervision

    environ, dry_run = request.environ, request.dry_run
    system = request.option("system") or installer.default_system()
    path = installer.relay_unit_path(environ) if system == installer.SYSTEMD else installer.relay_plist_path(environ)
    outcome = Outcome(installer.NAME, USER, "uninstall", path=path)
    if not path.exists():
        outcome.result = Result.NOT_INSTALLED
        return outcome
    if system == installer.SYSTEMD:
        tool = common.which("systemctl", environ)
        outcome.commands.append([tool or "systemctl", "--user", "disable", "--now", supervision.RELAY_UNIT])
        outcome.commands.append([tool or "systemctl", "--user", "daemon-reload"])
    else:
        tool = common.which("launchctl", environ)
        outcome.commands.append([tool or "launchctl", "bootout", f"gui/{os.getuid()}/{supervision.RELAY_LABEL}"])
    outcome.diffs.append(common.diff(path, common.read_bytes(path), None))
    return installer.finish_uninstall(outcome, system, tool, path, True, dry_run, environ, Path(request.cwd),
                                      "the Redis streams and the relay's cursor")
