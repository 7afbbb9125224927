"""`kijito-pull exec -- COMMAND ...`: run an agent command with the inbox's waiting mail in its input.

For runs where no hook can do it: `claude -p --bare` (announced as a future default for `-p`) runs no
hooks, not even `--settings` ones, and binds no inbox socket, so the plugin never sees such a run.

    kijito-pull exec -- claude -p --bare "fix the build"

1. Unseen mail for the persona (`--persona`, else the project's opt-in, else $KIJITO_PERSONA) is
   rendered as one hand-over (core.render.hand_over: data, not instructions, each message with its
   `kijito-ref:` marker) and recorded as a *pending* hand-over held by this process, so no hook or
   other session hands it over meanwhile.
2. The command runs with that text on its stdin (Claude Code's `-p` appends piped stdin to the prompt),
   or, if an argument is exactly `{kijito-mail}`, with the text as that argument instead (no shell is
   ever involved). Its stdout and stderr are the command's own. The Kijito token ($KIJITOMON_TOKEN) is
   removed from its environment (hooks of a run without --bare read `token_file` from the config file).
3. The hand-over is acknowledged only if the command exits 0 (for `claude -p`: the model answered the
   prompt that carried the mail); otherwise, or if it is killed, the mail is unseen again. While the
   command runs, this process renews its hold where the source asks it to (MailSource.renew: a Redis
   group, whose members on other hosts cannot see this process), so a run on a machine that died is
   claimed back after the group's --claim-after rather than at the end of the 6 h hold.
4. Afterwards the inbox is checked again: mail that arrived during the run is not handed to a run that
   is over, nor is waiting mail that did not fit in the run's input (one hand-over shows what fits); both
   are announced on stderr and wait for the next run (or `kijito-pull --once`).

Exit status: the command's own (128 + N when a signal N ended it, as a shell reports it); 2 for a usage
or configuration error; 1 when the inbox could not be read before the run (the command is not started
then, unless `--run-anyway`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import threading
import uuid
from collections.abc import Sequence

from kijito_pull.cli import options
from kijito_pull.context import Context
from kijito_pull.core import config, process
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.environment import Environment
from kijito_pull.core.errors import SourceFailed
from kijito_pull.core.models import Message
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import BatchSink

PLACEHOLDER = "{kijito-mail}"
EXEC_TTL = 6 * 3600.0  # a run may take hours; a dead exec process releases its hand-over at once anyway


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "exec", help="run an agent command with the waiting mail in its input (e.g. claude -p --bare)",
        description="Run COMMAND with the persona's unseen mail handed over in its input: on stdin, or as the "
                    f"argument that is exactly {PLACEHOLDER}. The mail is acknowledged only if COMMAND exits 0; "
                    "mail that arrives during the run is announced afterwards and waits for the next run.",
        epilog="example: kijito-pull exec -- claude -p --bare \"fix the build\"")
    options.add_personas(parser, many=False)
    options.add_connection(parser)
    options.add_consumer(parser)
    options.add_source(parser)
    parser.add_argument("--run-anyway", action="store_true",
                        help="run COMMAND even when the inbox cannot be read (without mail)")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    parser.set_defaults(run=run)


def _persona_flag(args: argparse.Namespace, env: Environment) -> None:
    """No --persona: the project's opt-in persona (the same one its hooks read), if it has opted in."""
    if args.persona:
        return
    from kijito_pull.harnesses.session import optin

    found = optin.resolve(env.cwd or os.getcwd(), env.environ)
    if found.opted_in and found.persona:
        args.persona = found.persona


def run(args: argparse.Namespace, env: Environment) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise config.ConfigError("exec: no command given (kijito-pull exec -- COMMAND ...)")
    if shutil.which(command[0]) is None and not os.path.isfile(command[0]):
        env.error(f"exec: {command[0]}: command not found")
        return 127
    _persona_flag(args, env)
    settings = options.settings(args, env)
    persona = settings.personas[0]
    ctx = Context(settings)
    me = process.me()
    holder = Holder(f"exec:{uuid.uuid4().hex[:12]}", me.pid, me.start, ttl=EXEC_TTL, renews=True)
    sink = ExecSink(command, env)
    with ctx:
        engine = ctx.engine(persona)
        done = threading.Event()
        keeper = threading.Thread(target=_keep_holding, args=(engine, holder, done, env), name="exec-renew",
                                  daemon=True)
        keeper.start()
        try:
            # The hand-over loop records the mail as pending with this process, releases the cursor's lock,
            # runs the command (ExecSink.write) and settles by its exit status.
            report = pull_through(engine, engine.factory, sink, holder=holder)
        except SourceFailed as exc:
            if sink.code is not None:  # the command ran; settling its hand-over failed: its status is ours
                env.error(f"exec: {persona}: the hand-over could not be settled after the run ({exc}); what the "
                          f"command was handed is claimed back and handed over again")
                return sink.code
            if not args.run_anyway:  # the command must not run; cli/main.py says why and exits 1
                exc.within(f"exec: {persona}: the inbox could not be read", "not running the command")
                raise
            env.error(f"exec: {persona}: the inbox could not be read ({exc}); running without mail")
            report = None
        finally:
            done.set()
        if sink.code is None:  # no mail to hand over (or none could be read): run it all the same
            sink.run("")
        code = sink.code if sink.code is not None else 127
        ids = sink.ids
        if ids and report is not None and report.refused is not None:
            env.error(f"exec: {command[0]} {_ended(sink.raw)}; the {len(ids)} message(s) it was handed are "
                      f"unseen again")
        before = set(sink.offered)  # unseen before the run
        try:
            waiting = engine.unseen(exclude=ids)  # not what it was just handed
        except SourceFailed as exc:  # the run is over: its status stands, the check is only a note
            env.error(f"exec: {persona}: the inbox could not be checked after the run ({exc})")
            return code
        left = [i for i in waiting if i in before]
        late = [i for i in waiting if i not in before]
        if left:
            env.error(f"exec: {len(left)} more message(s) for {persona} did not fit in this run's input (ids "
                      f"{_listed(left)}); they wait for the next run (`kijito-pull --once --persona {persona}` "
                      f"prints them)")
        if late:
            env.error(f"exec: {len(late)} new message(s) for {persona} arrived during the run (ids "
                      f"{_listed(late)}); they wait for the next run (`kijito-pull --once --persona {persona}` "
                      f"prints them)")
    return code


class ExecSink(BatchSink):
    """The command's input: one hand-over, written after the lock is released by running the command
    with it (`writes_unlocked`); taken only if the command exits 0."""

    writes_unlocked = True

    def __init__(self, command: list[str], env: Environment):
        super().__init__()
        self.command = command
        self.env = env
        self.offered: list[int] = []  # unseen before the run
        self.ids: list[int] = []  # handed to the command
        self.raw: int = 0  # the command's raw status (-N: ended by signal N)
        self.code: int | None = None  # its exit status as a shell reports it; None: it has not run

    def select(self, pending: Sequence[Message]) -> list[Message]:
        self.offered = [m.id for m in pending]
        return list(pending)

    def write(self, text: str, shown: Sequence[Message]) -> bool:
        self.ids = [m.id for m in shown]
        self.env.error(f"exec: handing {len(self.ids)} message(s) to {self.command[0]} (ids "
                       f"{', '.join(map(str, self.ids))})")
        return self.run(text) == 0

    def run(self, text: str) -> int:
        self.raw = _run_command(self.command, text, self.env)
        self.code = 128 - self.raw if self.raw < 0 else self.raw  # ended by signal N: 128 + N, as a shell does
        return self.code


def _keep_holding(engine, holder: Holder, done: threading.Event, env: Environment) -> None:  # noqa: ANN001
    """Until `done`: renew the holder's hold as often as the source asks (never, for a local cursor). A
    failed renewal is said once and tried again: the worst it costs is the mail handed over twice."""
    period, said = 1.0, False
    while not done.wait(period):
        try:
            due = engine.renew(holder)
        except SourceFailed as exc:
            if not said:
                env.error(f"exec: the hold on the mail could not be renewed ({exc}); trying again")
                said = True
            continue
        if due is None:
            return
        period = due


def _listed(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (", ..." if len(ids) > 20 else "")


def _run_command(command: list[str], text: str, env: Environment) -> int:
    """Run the command (no shell) with the mail on stdin or in place of the placeholder argument."""
    # Our token and Redis password are not the agent's business; its own credentials (ANTHROPIC_*,
    # CLAUDE_CODE_OAUTH_TOKEN...) stay.
    child_env = config.without_secrets(env.environ)
    argv = [text if arg == PLACEHOLDER else arg for arg in command]
    stdin_text = None if PLACEHOLDER in command else text
    try:
        proc = subprocess.Popen(argv, env=child_env, cwd=env.cwd or None,
                                stdin=subprocess.PIPE if stdin_text else None,
                                stdout=_stream(env.stdout), stderr=_stream(env.stderr))
    except OSError as exc:
        env.error(f"exec: cannot start {command[0]}: {exc.strerror}")
        return 127
    try:
        if stdin_text and proc.stdin is not None:
            try:
                proc.stdin.write(stdin_text.encode("utf-8"))
            except BrokenPipeError:
                pass
            finally:
                proc.stdin.close()
        return proc.wait()  # -N: ended by signal N
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        return 130


def _ended(code: int) -> str:
    """How the command ended, from its raw status (-N: signal N)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was ended by {name}"
    return f"exited {code}"


def _stream(stream):  # noqa: ANN001, ANN202 - a text stream, or an in-memory one in tests
    try:
        stream.flush()
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
