"""Supervision templates for `kijito-pull watch`: a systemd user template unit and a launchd agent.

Both are package data (kijito_pull/harnesses/daemon/templates/) rendered here with absolute paths, so nobody edits a
path by hand. The token is never in either file, their environment or the command line: the
command reads it with `--token-file` from a 0600 file next to config.toml (~/.config/kijito-pull/token
on Linux, ~/Library/Application Support/kijito-pull/token on macOS).

The watch runs with its own consumer (`--consumer daemon` unless the install names another), so its
cursor is not the one the agent harnesses share (`agent`): a daemon on that cursor would take the
agents' mail into its events file, and the agent would never see it (docs/configuration.md).

`rendered_watch_argv` returns the exact argv the rendered files run, so a test can run that command
(with `--self-test`) and keep the templates in step with the CLI.

The relay variant (`install daemon --relay`, docs/fleets.md): one `kijito-pull relay --redis URL
[--persona P ...]` per user, `kijito-pull-relay.service` (Type=notify with WatchdogSec: the relay speaks
sd_notify, core/sdnotify.py) or the launchd agent `com.kijito.pull-relay`. The Redis URL in it never
holds a password (refused before rendering, context.refuse_password_in_argv); the password is read
from `--redis-password-file` when the install names one, else as the relay reads it anyway (the
config file's redis_password_file). `rendered_relay_argv` is its exact argv.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from importlib import resources
from xml.sax.saxutils import escape

from kijito_pull.harnesses.installkit import this_command
from kijito_pull.sinks.eventsfile import safe_name

SYSTEMD_UNIT = "kijito-pull@.service"
LAUNCHD_TEMPLATE = "com.kijito.pull.PERSONA.plist"
LAUNCHD_LABEL_PREFIX = "com.kijito.pull."
RELAY_UNIT = "kijito-pull-relay.service"
RELAY_LABEL = "com.kijito.pull-relay"  # not under LAUNCHD_LABEL_PREFIX: a persona named "relay" has its own
RELAY_PLIST = RELAY_LABEL + ".plist"

#: The daemon's own consumer group: named after what reads it (the supervised service), and never the
#: agent harnesses' `agent`, so the two kinds of consumer never share one cursor.
DAEMON_CONSUMER = "daemon"

SYSTEMD = "systemd"
LAUNCHD = "launchd"

# Where each system's files go, relative to the home directory; the same places platformdirs uses
# for kijito-pull's config and state on that system.
_LAYOUT = {
    SYSTEMD: {"token": ".config/kijito-pull/token",
              "events": ".local/state/kijito-pull/events/{persona}.ndjson"},
    LAUNCHD: {"token": "Library/Application Support/kijito-pull/token",
              "events": "Library/Application Support/kijito-pull/events/{persona}.ndjson"},
}


def token_file(system: str) -> str:
    """Where the unit of `system` (systemd, launchd) reads the token from, relative to the home folder."""
    return _LAYOUT[system]["token"]


_LAUNCHD_LOG = "Library/Logs/kijito-pull.{name}.log"

def default_command() -> list[str]:
    """The command that runs this installation of kijito-pull (installkit.this_command, the one place)."""
    return this_command()


def _command(executable: str | Sequence[str] | None) -> list[str]:
    """A str is one executable path; a sequence is a command prefix (e.g. python -m kijito_pull)."""
    if executable is None:
        return default_command()
    words = [executable] if isinstance(executable, str) else list(executable)
    if not words or not os.path.isabs(words[0]):
        raise ValueError("the executable must be an absolute path")
    return words


def _watch_argv(command: Sequence[str], persona: str, consumer: str | None, token_file: str,
                events_template: str, extra_args: Sequence[str]) -> list[str]:
    """`consumer` None renders the watch without --consumer (as versions before it had one did)."""
    return [*command, "watch", "--persona", persona, *(["--consumer", consumer] if consumer else []),
            "--token-file", token_file, "--events-file-template", events_template, *extra_args]


def rendered_watch_argv(executable: str | Sequence[str] | None, persona: str, home: str,
                        extra_args: Sequence[str] = (), system: str = SYSTEMD,
                        consumer: str | None = DAEMON_CONSUMER) -> list[str]:
    """The argv the rendered unit (system="systemd") or plist ("launchd") runs for `persona`.

    For systemd that is ExecStart with its specifiers expanded as systemd does for the instance
    `kijito-pull@PERSONA.service` of a user whose home is `home`.
    """
    layout = _LAYOUT[system]
    return _watch_argv(_command(executable), persona, consumer, os.path.join(home, layout["token"]),
                       os.path.join(home, layout["events"]), extra_args)


def _relay_argv(command: Sequence[str], redis_url: str, personas: Sequence[str], token_file: str,
                password_file: str | None) -> list[str]:
    return [*command, "relay", "--redis", redis_url, *[w for p in personas for w in ("--persona", p)],
            "--token-file", token_file, *(["--redis-password-file", password_file] if password_file else [])]


def rendered_relay_argv(executable: str | Sequence[str] | None, redis_url: str, personas: Sequence[str],
                        home: str, password_file: str | None = None, system: str = SYSTEMD) -> list[str]:
    """The argv the rendered relay unit (system="systemd", %h expanded to `home`) or plist runs."""
    return _relay_argv(_command(executable), redis_url, personas, os.path.join(home, token_file(system)),
                       password_file)


def watch_option(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` (`--flag VALUE` or `--flag=VALUE`) in a watch argv, the last one winning as
    argparse does; None when it is absent."""
    found = None
    for n, word in enumerate(argv):
        if word == flag and n + 1 < len(argv):
            found = argv[n + 1]
        elif word.startswith(flag + "="):
            found = word[len(flag) + 1:]
    return found


def _template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


# -- systemd -------------------------------------------------------------------------------------

_SYSTEMD_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./{}-]+")


def _systemd_word(word: str, specifiers: bool = False, executable: bool = False) -> str:
    """One ExecStart word. Literal words have % (and in arguments $) doubled so nothing expands.

    systemd expands variables only in arguments, so `$$` would stay doubled in the executable; and
    it rejects an executable name holding quotes or backslashes, so those are refused here.
    """
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in word):
        raise ValueError(f"control character in a command word: {word!r}")
    if executable and any(c in word for c in "\"'\\"):
        raise ValueError(f"systemd cannot run an executable whose path holds quotes or backslashes: {word!r}")
    if not specifiers:
        word = word.replace("%", "%%")
    if not executable:
        word = word.replace("$", "$$")
    if word == ";":
        return "\\;"  # a lone ; separates commands, quoted or not; systemd documents \; for a literal one
    if _SYSTEMD_BARE.fullmatch(word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_systemd(executable: str | Sequence[str] | None = None, extra_args: Sequence[str] = (),
                   consumer: str | None = DAEMON_CONSUMER) -> str:
    """The text of `kijito-pull@.service`: the instance name (%i) is the persona, %h the home."""
    layout = _LAYOUT[SYSTEMD]
    command = [_systemd_word(w, executable=(n == 0)) for n, w in enumerate(_command(executable))]
    argv = _watch_argv(command, "%i", _systemd_word(consumer) if consumer else None,
                       _systemd_word("%h/" + layout["token"], specifiers=True),
                       _systemd_word("%h/" + layout["events"], specifiers=True),
                       [_systemd_word(w) for w in extra_args])
    return _fill(_template(SYSTEMD_UNIT), {"EXEC_START": " ".join(argv)})


def render_systemd_relay(executable: str | Sequence[str] | None, redis_url: str, personas: Sequence[str],
                         password_file: str | None = None) -> str:
    """The text of `kijito-pull-relay.service`: the relay for `personas` (none: every persona of the account)."""
    command = [_systemd_word(w, executable=(n == 0)) for n, w in enumerate(_command(executable))]
    argv = _relay_argv(command, _systemd_word(redis_url), [_systemd_word(p) for p in personas],
                       _systemd_word("%h/" + token_file(SYSTEMD), specifiers=True),
                       _systemd_word(password_file) if password_file else None)
    return _fill(_template(RELAY_UNIT), {"EXEC_START": " ".join(argv)})


# -- launchd -------------------------------------------------------------------------------------

def launchd_label(persona: str) -> str:
    return LAUNCHD_LABEL_PREFIX + safe_name(persona)


def launchd_filename(persona: str) -> str:
    """The file name under ~/Library/LaunchAgents/ (the label, as launchd expects)."""
    return launchd_label(persona) + ".plist"


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str) -> str:
    if _XML_INVALID.search(text):
        raise ValueError(f"a character XML cannot carry: {text!r}")
    return escape(text)


def render_launchd(executable: str | Sequence[str] | None, persona: str, home: str,
                   extra_args: Sequence[str] = (), consumer: str | None = DAEMON_CONSUMER) -> str:
    """The text of ~/Library/LaunchAgents/com.kijito.pull.PERSONA.plist for one persona."""
    argv = rendered_watch_argv(executable, persona, home, extra_args, system=LAUNCHD, consumer=consumer)
    arguments = "\n".join(f"\t\t<string>{_xml_text(word)}</string>" for word in argv)
    stderr_path = os.path.join(home, _LAUNCHD_LOG.format(name=safe_name(persona)))
    values = {"LABEL": _xml_text(launchd_label(persona)), "STDERR_PATH": _xml_text(stderr_path),
              "PROGRAM_ARGUMENTS": arguments}
    return _fill(_template(LAUNCHD_TEMPLATE), values)


def render_launchd_relay(executable: str | Sequence[str] | None, redis_url: str, personas: Sequence[str],
                         home: str, password_file: str | None = None) -> str:
    """The text of ~/Library/LaunchAgents/com.kijito.pull-relay.plist."""
    argv = rendered_relay_argv(executable, redis_url, personas, home, password_file, system=LAUNCHD)
    arguments = "\n".join(f"\t\t<string>{_xml_text(word)}</string>" for word in argv)
    values = {"LABEL": _xml_text(RELAY_LABEL), "PROGRAM_ARGUMENTS": arguments,
              "STDERR_PATH": _xml_text(os.path.join(home, "Library/Logs/kijito-pull-relay.log"))}
    return _fill(_template(RELAY_PLIST), values)


def _fill(template: str, values: dict[str, str]) -> str:
    """Replace @NAME@ placeholders in one pass, so a value can never be taken for a placeholder."""
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], template)
