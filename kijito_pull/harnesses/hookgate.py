"""The first step of every `kijito-pull hook claude-*`: read and check the hook input, and answer at once
when there is nothing to do. Standard library only.

Claude Code runs the plugin's hooks on every session start, prompt and turn end of *every* project,
so a project that has not opted in must cost little more than Python's own start-up: no network, no
`requests`, no state files. `kijito_pull.cli.early` calls `early_gate()` from the console entry
before the CLI imports its commands; in-process callers (tests) go through `gate()` directly.

Bad input never produces a traceback on stdout (Claude Code parses stdout) and never hangs: stdin is
read with a size cap and a deadline, and every problem becomes one line on stderr and exit 0.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at run time, and this module must start fast
    from collections.abc import Mapping
    from typing import IO, Any

SESSION_START = "claude-session-start"
STOP = "claude-stop"
PROMPT = "claude-prompt"
WAKER = "claude-waker"
SESSION_END = "claude-session-end"
HOOKS = (SESSION_START, STOP, PROMPT, WAKER, SESSION_END)
# Codex reads the same hook JSON, but some of its events reject empty stdout: "nothing to do" is `{}`
# (kijito_pull.harnesses.codex.hooks). Codex sessions get no waker.
CODEX_SESSION_START = "codex-session-start"
CODEX_STOP = "codex-stop"
CODEX_HOOKS = (CODEX_SESSION_START, CODEX_STOP)
CODEX_NOTHING = "{}\n"
ALL_HOOKS = HOOKS + CODEX_HOOKS

MAX_INPUT_BYTES = 1024 * 1024
INPUT_SECONDS = 2.0
MODE_ENV = "KIJITO_PULL_MODE"
DOORBELL = "[kijito-pull doorbell]"
INTERACTIVE = "interactive"
HEADLESS = "headless"


class HookInput:
    """A hook invocation that passed the gate: an opted-in project and a parsed JSON object.

    (A plain class: `dataclasses` costs ~20 ms of imports, more than the rest of the gate.)"""

    def __init__(self, hook: str, data: dict[str, Any], cwd: str, optin: Any, mode: str,
                 session_id: str | None = None, session_problem: str | None = None):
        self.hook = hook
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


def read_input(stream: Any, limit: int = MAX_INPUT_BYTES, seconds: float = INPUT_SECONDS) -> tuple[bytes, str | None]:
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
            return b"", "stdin is a terminal, not hook input (Claude Code pipes a JSON object in)"
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


# -- mode -----------------------------------------------------------------------------------------------


def detect_mode(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """Interactive or headless: `KIJITO_PULL_MODE` wins, else Claude Code's `CLAUDE_CODE_ENTRYPOINT`.

    Measured: `cli` in an interactive session; `sdk-cli` under `claude -p` (stream-json included).
    Anything else, or nothing, is treated as headless: a headless run is never sent a waker.
    """
    raw = environ.get(MODE_ENV, "").strip().lower()
    if raw in (INTERACTIVE, HEADLESS):
        return raw, None
    note = f"ignoring {MODE_ENV}={raw[:20]!r} (expected interactive or headless)" if raw else None
    entry = environ.get("CLAUDE_CODE_ENTRYPOINT", "").strip()
    return (INTERACTIVE if entry == "cli" else HEADLESS), note


def _project_dir(data: dict[str, Any] | None, environ: Mapping[str, str], cwd: str) -> str:
    for candidate in ((data or {}).get("cwd"), environ.get("CLAUDE_PROJECT_DIR"), cwd):
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


def gate(hook: str, stdin: Any, environ: Mapping[str, str], cwd: str,
         stderr: IO[str]) -> tuple[int | None, HookInput | None]:
    """(exit code, None) when the hook is answered here; (None, input) when there is work to do."""
    raw, problem = read_input(stdin)
    data, parse_problem = (None, None) if problem else parse_input(raw)
    problem = problem or parse_problem
    where = _project_dir(data, environ, cwd)
    if not may_be_opted_in(where):
        return 0, None
    from kijito_pull.harnesses.session import optin as optin_mod

    opt = optin_mod.resolve(where, environ)
    if not opt.opted_in:
        if opt.problem:  # e.g. an AGENTS.md we may not read: say so, it may be why nothing happens
            say(stderr, f"{hook}: {opt.problem}")
        return 0, None
    if problem or data is None:
        say(stderr, f"{hook}: {problem}; nothing was done")
        return 0, None
    if opt.problem or not opt.persona:
        say(stderr, f"{hook}: {opt.problem or 'no persona'}; nothing was done")
        return 0, None
    if hook == PROMPT and DOORBELL not in str(data.get("prompt", "")):
        return 0, None  # an ordinary prompt: mail is handed over on doorbells and turn ends

    from kijito_pull.harnesses.session import lifecycle

    mode, mode_note = detect_mode(environ)
    inp = HookInput(hook, data, where, opt, mode)
    if mode_note:
        inp.notes.append(mode_note)
        say(stderr, f"{hook}: {mode_note}")
    raw_id = data.get("session_id")
    if raw_id is None:
        raw_id = environ.get("CLAUDE_CODE_SESSION_ID") or None
    inp.session_id, inp.session_problem = lifecycle.check_session_id(raw_id)
    if inp.session_problem and raw_id is not None:
        say(stderr, f"{hook}: {inp.session_problem}")
    return _answer_early(inp, environ, stderr)


def _answer_early(inp: HookInput, environ: Mapping[str, str], stderr: IO[str]) -> tuple[int | None, HookInput | None]:
    """The hooks that usually have nothing to do finish here, before the heavy imports."""
    from kijito_pull.harnesses.session import lifecycle

    if inp.hook == PROMPT:
        prompt = inp.data.get("prompt")
        if not isinstance(prompt, str) or DOORBELL not in prompt:
            return 0, None  # an ordinary prompt: mail is handed over on doorbells and turn ends
        return None, inp
    if inp.hook == SESSION_END:
        if inp.session_id is None:
            say(stderr, f"{inp.hook}: {lifecycle.Result.SESSION_ID_UNAVAILABLE.value}: {inp.session_problem}")
            return 0, None
        try:
            lifecycle.end_session(environ, inp.session_id)
        except lifecycle.LifecycleError as exc:
            say(stderr, f"{inp.hook}: {exc}")
        return 0, None
    if inp.hook == WAKER:
        if inp.mode != INTERACTIVE:
            return 0, None  # headless runs get no waker: their Stop hook hands the mail over
        if inp.session_id is None:
            say(stderr, f"{inp.hook}: {lifecycle.Result.SESSION_ID_UNAVAILABLE.value}: {inp.session_problem}")
            return 0, None
        try:
            if lifecycle.stop_marker(environ, inp.project, inp.persona) is not None:
                return 0, None  # stopped by `kijito-pull session stop`: honoured until `session start`
            if lifecycle.live_lease(environ, inp.session_id) is not None:
                return 0, None  # already armed: one waker per session
        except lifecycle.LifecycleError as exc:
            say(stderr, f"{inp.hook}: {lifecycle.Result.STARTUP_FAILED.value}: {exc}")
            return 0, None
    return None, inp


def answer_nothing(stream: IO[str]) -> None:
    """A Codex hook's "nothing to do": `{}` (Codex rejects empty stdout on some events)."""
    try:
        stream.write(CODEX_NOTHING)
        stream.flush()
    except (OSError, ValueError):
        pass


# -- the console entry's early dispatch --------------------------------------------------------------------


def _is_console(argv0: str) -> bool:
    prog = argv0.replace("\\", "/")
    return os.path.basename(prog) in ("kijito-pull", "kijito-pull.exe") or prog.endswith("kijito_pull/__main__.py")


def early_gate(argv: list[str] | None = None) -> None:
    """From the console entry: run `kijito-pull hook claude-*` here and exit, before the CLI imports
    its commands (a project that has not opted in never gets past the standard library; one that
    has skips argparse and the unrelated commands). Does nothing for any other command line."""
    argv = sys.argv if argv is None else argv
    if len(argv) != 3 or argv[1] != "hook" or argv[2] not in ALL_HOOKS or not _is_console(argv[0]):
        return
    codex = argv[2] in CODEX_HOOKS
    answered = False
    ran = False
    try:
        code, inp = gate(argv[2], sys.stdin, os.environ, os.getcwd(), sys.stderr)
        if code is None and inp is not None:
            ran = True
            from kijito_pull.cli.environment import Environment

            if codex:
                from kijito_pull.harnesses.codex import hooks as adapter

                answered = True  # the Codex adapter always answers, `{}` at least
                code = adapter.run(inp, Environment())
            else:
                from kijito_pull.harnesses.claude import hooks as claude

                code = claude.run(inp, Environment())
    except Exception as exc:  # noqa: BLE001 - a hook must never crash with a traceback
        say(sys.stderr, f"{argv[2]}: internal error ({type(exc).__name__}: {exc}); nothing was done")
        code = 0
    if codex and not answered:
        answer_nothing(sys.stdout)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if ran:
        # Leave at once. The hook's answer is written and acknowledged, and the harness reads it only if
        # the process exits 0: the interpreter's teardown (~30 ms, far longer than the write and the ack)
        # is a window in which a kill would lose mail the cursor has already moved past. Nothing is left
        # to flush or release (files are closed, leases and state saved, threads are daemons).
        os._exit(code or 0)
    raise SystemExit(code or 0)
