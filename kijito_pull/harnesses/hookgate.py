"""The one route of every `kijito-pull hook NAME`: `run_hook` reads and checks the hook input, answers
at once when there is nothing to do, else hands it to the runtime of the harness that owns the hook,
and writes the harness's "nothing to do" answer when nobody else answered. Standard library only.

Claude Code runs the plugin's hooks on every session start, prompt and turn end of *every* project
(Codex its hooks.json entries likewise), so a project that has not opted in must cost little more than
Python's own start-up: no network, no `requests`, no state files, no `typing` or `dataclasses`. Two
callers, one route: `kijito_pull.cli.early` calls `early_gate()` from the console entry before the CLI
imports its commands, and `kijito-pull hook NAME` in-process (kijito_pull.cli.hook_cmd) calls
`run_hook` directly. Which harnesses and hooks exist comes from kijito_pull.harnesses.registry; what
is specific to one harness (its mode, its early answers, its runtime) from its Harness
(kijito_pull.harnesses.base). tests/test_layers.py holds this module to the standard library.

Bad input never produces a traceback on stdout (the harness parses stdout) and never hangs: stdin is
read with a size cap and a deadline, and every problem becomes one line on stderr and exit 0.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Callable, Mapping
    from typing import IO, Any

    from kijito_pull.harnesses.base import Harness, Hook

MAX_INPUT_BYTES = 1024 * 1024
INPUT_SECONDS = 2.0


class HookInput:
    """A hook invocation that passed the gate: an opted-in project and a parsed JSON object.

    (A plain class: `dataclasses` costs ~20 ms of imports, more than the rest of the gate.)"""

    def __init__(self, hook: str, data: dict[str, Any], cwd: str, optin: Any, mode: str,
                 session_id: str | None = None, session_problem: str | None = None,
                 harness: Harness | None = None):
        self.hook = hook
        self.harness = harness  # the Harness that owns the hook (None: built by hand, e.g. in a test)
        self.data = data
        self.cwd = cwd
        self.optin = optin  # kijito_pull.harnesses.session.optin.OptIn (opted in, with a persona)
        self.mode = mode
        self.session_id = session_id
        self.session_problem = session_problem
        self.notes: list[str] = []

    @property
    def persona(self) -> str:
        return self.optin.persona

    @property
    def project(self) -> str:
        return str(self.optin.project)


def say(stream: IO[str], text: str) -> None:
    try:
        stream.write(f"kijito-pull: {text}\n")
        stream.flush()
    except (OSError, ValueError):
        pass


# -- reading stdin --------------------------------------------------------------------------------------


def read_input(stream: Any, limit: int = MAX_INPUT_BYTES, seconds: float = INPUT_SECONDS,
               title: str = "Claude Code") -> tuple[bytes, str | None]:
    """At most `limit` bytes of hook input, waiting at most `seconds` for the writer to finish.

    Returns (bytes, problem); problem is None when the input ended normally within the limits.
    """
    if stream is None:
        return b"", "no hook input (stdin is closed)"
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None:  # an in-memory stream (tests)
        text = stream.read(limit + 1)
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
        if len(data) > limit:
            return data[:limit], f"the hook input is larger than {limit // 1024} KiB"
        return data, None
    try:
        if os.isatty(fd):
            return b"", f"stdin is a terminal, not hook input ({title} pipes a JSON object in)"
    except OSError:
        pass
    import select
    import time

    chunks: list[bytes] = []
    total = 0
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), f"the hook input did not end within {seconds:g} s"
        try:
            ready, _, _ = select.select([fd], [], [], remaining)
        except (OSError, ValueError) as exc:
            return b"".join(chunks), f"cannot read the hook input ({exc})"
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError as exc:
            return b"".join(chunks), f"cannot read the hook input ({exc.strerror})"
        if not chunk:
            return b"".join(chunks), None
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            return b"".join(chunks)[:limit], f"the hook input is larger than {limit // 1024} KiB"


def parse_input(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    import json

    if not raw.strip():
        return None, "the hook input is empty (expected a JSON object on stdin)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "the hook input is not UTF-8"
    try:
        data = json.loads(text)
    except ValueError as exc:
        reason = getattr(exc, "msg", None) or "unparseable"
        where = getattr(exc, "pos", None)
        at = f" at character {where}" if where is not None else ""
        return None, f"the hook input is not valid JSON ({reason}{at})"
    if not isinstance(data, dict):
        return None, f"the hook input is a JSON {type(data).__name__}, not an object"
    return data, None


# -- the project -------------------------------------------------------------------------------------------


def _project_dir(data: dict[str, Any] | None, environ: Mapping[str, str], cwd: str, project_env: str | None) -> str:
    """The hook input's `cwd`, else the folder the harness's `project_env` names, else our own cwd."""
    named = environ.get(project_env) if project_env else None
    for candidate in ((data or {}).get("cwd"), named, cwd):
        if isinstance(candidate, str) and candidate and "\0" not in candidate and os.path.isdir(candidate):
            return candidate
    return cwd


# -- the opt-in pre-check -------------------------------------------------------------------------------

OPT_IN_FILES = ("AGENTS.md", "CLAUDE.md")  # kijito_pull.harnesses.session.optin.FILES (a test keeps them equal)
_READ_LIMIT = 1024 * 1024 + 64  # a little over optin's MAX_FILE_BYTES
_NEEDLE = b"nbox mon"  # in every spelling optin's case-insensitive "inbox monitor" regex accepts


def may_be_opted_in(start: str) -> bool:
    """False only when the project surely has not opted in: no AGENTS.md or CLAUDE.md from `start` up
    to the root (a superset of the folders `optin.resolve` reads) contains "nbox mon" in any ASCII
    case. Anything else -- a mention, a file that cannot be read -- is left to `optin.resolve`, which
    decides. This only keeps `optin` (and its ~25 ms of imports) off the path of the projects that
    never mention the inbox monitor, which is nearly all of them."""
    folder = os.path.realpath(start)
    for _ in range(256):
        for name in OPT_IN_FILES:
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    if _NEEDLE in handle.read(_READ_LIMIT).lower():
                        return True
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
            except OSError:
                return True  # unreadable: optin reports it
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    return True


# -- the gate ---------------------------------------------------------------------------------------------


def gate(harness: Harness, hook: Hook, stdin: Any, environ: Mapping[str, str], cwd: str,
         stderr: IO[str]) -> tuple[int | None, HookInput | None]:
    """(exit code, None) when the hook is answered here; (None, input) when there is work to do."""
    from kijito_pull.harnesses.base import resolve

    name = hook.name
    raw, problem = read_input(stdin, title=harness.title)
    data, parse_problem = (None, None) if problem else parse_input(raw)
    problem = problem or parse_problem
    where = _project_dir(data, environ, cwd, harness.project_env)
    if not may_be_opted_in(where):
        return 0, None
    from kijito_pull.harnesses.session import optin as optin_mod

    opt = optin_mod.resolve(where, environ)
    if not opt.opted_in:
        if opt.problem:  # e.g. an AGENTS.md we may not read: say so, it may be why nothing happens
            say(stderr, f"{name}: {opt.problem}")
        return 0, None
    if problem or data is None:
        say(stderr, f"{name}: {problem}; nothing was done")
        return 0, None
    if opt.problem or not opt.persona:
        say(stderr, f"{name}: {opt.problem or 'no persona'}; nothing was done")
        return 0, None
    if hook.wants is not None and not resolve(hook.wants)(data):
        return 0, None  # e.g. an ordinary prompt: nothing for this hook to do

    from kijito_pull.harnesses.session import lifecycle

    mode, mode_note = harness.detect_mode(environ)
    inp = HookInput(name, data, where, opt, mode, harness=harness)
    if mode_note:
        inp.notes.append(mode_note)
        say(stderr, f"{name}: {mode_note}")
    raw_id = data.get("session_id")
    if raw_id is None and harness.session_env:
        raw_id = environ.get(harness.session_env) or None
    inp.session_id, inp.session_problem = lifecycle.check_session_id(raw_id)
    if inp.session_problem and raw_id is not None:
        say(stderr, f"{name}: {inp.session_problem}")
    if harness.early is not None:
        code = resolve(harness.early)(inp, environ, stderr)
        if code is not None:
            return code, None
    return None, inp


def answer_nothing(stream: IO[str], nothing: str) -> None:
    """A harness's "nothing to do" on stdout (`{}` for Codex, which rejects empty stdout on some events)."""
    if not nothing:
        return
    try:
        stream.write(nothing)
        stream.flush()
    except (OSError, ValueError):
        pass


class _Answer:
    """The hook's stdout, noting whether anything was written to it (the boundary then knows whether the
    harness already has an answer)."""

    __slots__ = ("stream", "written")

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.written = False

    def write(self, text: str) -> int:
        if text:
            self.written = True
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def run_hook(name: str, stdin: Any, stdout: IO[str], stderr: IO[str], environ: Mapping[str, str], cwd: str, *,
             exit_after_work: Callable[[int], Any] | None = None) -> int:
    """`kijito-pull hook NAME`, start to end: the gate, the hook's handler when there is work, and the
    harness's "nothing to do" answer when neither wrote an answer. This is the hook route's one error
    boundary: it never raises, and any failure below it is one stderr line and exit 0 (with the "nothing
    to do" answer if nothing was written yet), so a broken inbox never wedges or breaks a session. With
    `exit_after_work`, it is called with the exit code once a handler ran and the streams are flushed
    (the console entry leaves at once)."""
    from kijito_pull.harnesses import registry

    found = registry.find_hook(name)
    if found is None:
        say(stderr, f"{name}: not a kijito-pull hook (expected one of: {', '.join(registry.hook_names())})")
        return 2
    harness, hook = found
    answer = _Answer(stdout)
    ran = False
    try:
        code, inp = gate(harness, hook, stdin, environ, cwd, stderr)
        if code is None and inp is not None:
            from kijito_pull.core.environment import Environment
            from kijito_pull.harnesses.base import resolve

            handler = resolve(harness.handler(hook))
            ran = True
            code = handler(inp, Environment(stdin=stdin, stdout=answer, stderr=stderr, environ=environ, cwd=cwd))
    except Exception as exc:  # noqa: BLE001 - the one boundary: a hook must never crash with a traceback
        from kijito_pull.core.errors import KijitoPullError

        what = exc.line() if isinstance(exc, KijitoPullError) else f"internal error ({type(exc).__name__}: {exc})"
        say(stderr, f"{name}: {what}; nothing was acknowledged, so unseen mail is handed over again later")
        code = 0
    if not answer.written:
        answer_nothing(stdout, harness.nothing)
    for stream in (stdout, stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if ran and exit_after_work is not None:
        exit_after_work(code or 0)
    return code or 0


# -- the console entry's early dispatch --------------------------------------------------------------------


def is_console(argv0: str) -> bool:
    prog = argv0.replace("\\", "/")
    return os.path.basename(prog) in ("kijito-pull", "kijito-pull.exe") or prog.endswith("kijito_pull/__main__.py")


#: `kijito-pull hook NAME --source URL --consumer NAME`: what an installer may wire into a hook's command
#: line (`install claude --source ... --consumer ...`), and the setting each one stands for.
HOOK_FLAGS = {"--source": "KIJITO_PULL_SOURCE", "--consumer": "KIJITO_PULL_CONSUMER"}


def hook_flags(words: list[str]) -> dict[str, str] | None:
    """The settings `--source URL` / `--consumer NAME` after a hook's name give (as the environment
    variables they stand for, over the inherited ones); None when the words are anything else."""
    out: dict[str, str] = {}
    i = 0
    while i < len(words):
        flag, value = words[i], None
        if "=" in flag:
            flag, value = flag.split("=", 1)
        elif i + 1 < len(words):
            value = words[i + 1]
            i += 1
        if flag not in HOOK_FLAGS or value is None or flag in out:
            return None
        out[HOOK_FLAGS[flag]] = value
        i += 1
    return out


def early_gate(argv: list[str] | None = None) -> None:
    """From the console entry: run `kijito-pull hook NAME [--source URL] [--consumer NAME]` here and exit,
    before the CLI imports its commands (a project that has not opted in never gets past the standard
    library; one that has skips argparse and the unrelated commands). Does nothing for any other command
    line (the CLI then says what is wrong with it)."""
    argv = sys.argv if argv is None else argv
    if len(argv) < 3 or argv[1] != "hook" or not is_console(argv[0]):
        return
    flags = hook_flags(argv[3:])
    if flags is None:
        return
    from kijito_pull.harnesses import registry

    if registry.find_hook(argv[2]) is None:
        return  # not a hook: the CLI says so, with its usage
    # Leave at once after a hook that did work. Its answer is written and acknowledged, and the harness
    # reads it only if the process exits 0: the interpreter's teardown (~30 ms, far longer than the
    # write and the ack) is a window in which a kill would lose mail the cursor has already moved past.
    # Nothing is left to flush or release (files are closed, leases and state saved, threads are daemons).
    environ = {**os.environ, **flags} if flags else os.environ
    code = run_hook(argv[2], sys.stdin, sys.stdout, sys.stderr, environ, os.getcwd(), exit_after_work=os._exit)
    raise SystemExit(code)
