"""The hand-over both hook harnesses share (Claude Code and Codex): one pull through the shared engine,
its text handed to the harness as one JSON object, the cursor acknowledged only once that object is
written and flushed (`delivery.pull_through` with a batch sink).

    session_start   SessionStart: waiting mail as `additionalContext`
    prompt          UserPromptSubmit: mail that arrived since as `additionalContext` (Qwen Code)
    stop            Stop: unseen mail blocks the stop (`{"decision": "block", "reason": ...}`), at most
                    `max_stop_blocks` times in a row per session; never twice for the same mail
    checked_pull    one pull whose failure is one stderr line (the adapters' own handlers use it too)
    answer          runs one of them inside a budget (`Output`): if nothing was written when the budget
                    runs out, one stderr line and exit 0, with the harness's "nothing to do" answer

What differs between harnesses is read from the hook's Harness (`inp.harness`, kijito_pull.harnesses.base):
its title in messages, its "nothing to do" answer (`""` Claude Code, `{}` Codex). Each harness's own
adapter (kijito_pull.harnesses.claude.hooks, kijito_pull.harnesses.codex.hooks) picks the handler
and adds what only it has (Claude Code's waker sentence, its doorbell prompt). Every failure becomes
one stderr line and exit 0, so a broken inbox never wedges or breaks an agent session. The layers
are in docs/architecture.md.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kijito_pull.context import Context, Flags, Settings
from kijito_pull.core import config, render
from kijito_pull.core.api import KijitoClient
from kijito_pull.core.delivery import PullReport, pull_through
from kijito_pull.core.engine import Engine
from kijito_pull.core.environment import Environment
from kijito_pull.core.models import ApiError, Message
from kijito_pull.core.paths import Paths
from kijito_pull.core.pending import Holder
from kijito_pull.core.sink import HELD_KEPT, BatchSink
from kijito_pull.core.state import StateError
from kijito_pull.harnesses.base import INTERACTIVE, TRANSCRIPT, resolve
from kijito_pull.harnesses.hookgate import HookInput, say
from kijito_pull.harnesses.session import lifecycle
from kijito_pull.harnesses.transcript import Transcript, transcript_of

BUDGET_ENV = "KIJITO_PULL_HOOK_BUDGET"
DEFAULT_BUDGET = 8.0
MAX_BLOCKS_ENV = "KIJITO_PULL_MAX_STOP_BLOCKS"
DEFAULT_MAX_BLOCKS = 3
MAX_BLOCKS_LIMIT = 100
HOOK_TIMEOUT = 3.0  # per HTTP request of a synchronous hook
HOOK_DEADLINE = 4.0  # retries of one request stop after this
HAND_OVER_TTL = 30 * 60.0  # an unconfirmed hand-over to a live session is claimed back after this
SETTLE_SECONDS = 30.0  # confirm_soon looks at the record this long at most
SETTLE_EVERY = 0.2


# -- settings ---------------------------------------------------------------------------------------------


def hook_budget(environ: Mapping[str, str]) -> float:
    """The seconds a hook may take before it gives up ($KIJITO_PULL_HOOK_BUDGET, 0.5 to 9.5, default 8)."""
    raw = environ.get(BUDGET_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_BUDGET
    except ValueError:
        return DEFAULT_BUDGET
    return min(max(value, 0.5), 9.5)


def max_stop_blocks(environ: Mapping[str, str], settings: Mapping[str, Any]) -> int:
    """The cap on consecutive Stop blocks: $KIJITO_PULL_MAX_STOP_BLOCKS, else `max_stop_blocks` in
    the config file, else 3. 0 means the Stop hook never blocks."""
    raw: Any = environ.get(MAX_BLOCKS_ENV, "").strip() or settings.get("max_stop_blocks")
    if raw is None or raw == "":
        return DEFAULT_MAX_BLOCKS
    try:
        value = int(raw)
        if isinstance(raw, bool) or value < 0 or value > MAX_BLOCKS_LIMIT:
            raise ValueError
    except (TypeError, ValueError):
        raise config.ConfigError(f"max_stop_blocks must be a whole number from 0 to {MAX_BLOCKS_LIMIT}, "
                                 f"not {str(raw)[:20]!r} (from ${MAX_BLOCKS_ENV} or the config file)") from None
    return value


@dataclass
class Setup:
    """One persona's engine for one hook run, built by the composition root (kijito_pull.context)."""

    engine: Engine
    context: Context

    @property
    def client(self) -> KijitoClient:
        """The API client of this hook run."""
        return self.context.client

    @property
    def settings(self) -> dict[str, Any]:
        """The config file's settings."""
        return self.context.settings.file

    def close(self) -> None:
        """Close the client's connections."""
        self.context.close()


def setup(persona: str, environ: Mapping[str, str], *, timeout: float = HOOK_TIMEOUT,
          attempts: int = 2, deadline: float = HOOK_DEADLINE) -> Setup:
    """Raises ConfigError (no token, bad API base, bad config file) before any request is sent."""
    settings = Settings(environ, Flags(timeout=timeout))
    settings.source or settings.connection()  # every setting checked before a request is sent (Redis: no Kijito)
    ctx = Context(settings, attempts=attempts, deadline=deadline)
    return Setup(ctx.engine(persona, lock_timeout=2.0), ctx)


# -- output -----------------------------------------------------------------------------------------------


class Output:
    """Hook stdout with a budget: if nothing was written when the budget runs out, the process says
    why on stderr and exits 0 (the agent goes on; nothing was acknowledged). Once writing has begun
    the watchdog stands down, so a message is never half handed over."""

    def __init__(self, stdout: IO[str], stderr: IO[str], hook: str, budget: float | None,
                 exit_fn: Callable[[int], None] = os._exit, nothing: str = ""):
        self.stdout = stdout
        self.stderr = stderr
        self.hook = hook
        self.budget = budget
        self._exit = exit_fn
        self.nothing = nothing  # the harness's "nothing to do" ("" writes nothing)
        self._lock = threading.Lock()
        self._started = False
        self._expired = False
        self._timer: threading.Timer | None = None
        self.written: list[dict[str, Any]] = []

    def __enter__(self) -> Output:
        if self.budget is not None:
            self._timer = threading.Timer(self.budget, self._expire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            if self._started:
                return
            self._expired = True
            self._started = bool(self.nothing)
        say(self.stderr, f"{self.hook}: gave up after {self.budget:g} s (the Kijito server is slow or unreachable); "
                         f"nothing was acknowledged, unseen mail waits for the next pull")
        if self.nothing:
            self._write(self.nothing)
        self._exit(0)

    def _write(self, text: str) -> bool:
        try:
            self.stdout.write(text)
            self.stdout.flush()
        except (OSError, ValueError):
            return False
        return True

    def nothing_if_silent(self) -> None:
        """The harness's "nothing to do", unless something (or it) was written already."""
        with self._lock:
            if self._expired or self._started or not self.nothing:
                return
            self._started = True
        self._write(self.nothing)

    def json(self, obj: dict[str, Any]) -> bool:
        """Write the run's one JSON object; True only once it is written and flushed (the consumer took it).

        Only the first call writes: the harness reads stdout as one object, so a later one (the failure
        note of a pull whose ack could not be saved after its mail was written) is refused, not appended.
        """
        with self._lock:
            if self._expired or self._started:
                return False
            self._started = True
        if not self._write(json.dumps(obj) + "\n"):
            return False
        self.written.append(obj)
        return True


class Reshaped:
    """A hook's Output whose JSON answers are put in the form its harness reads (`reshape(answer)`: Copilot
    CLI's context at the top level, Kimi Code CLI's `message` and deny); what was written is the wrapped
    Output's, so the hand-over loop tells written from not written the same way."""

    def __init__(self, out: Output, reshape: Callable[[dict[str, Any]], dict[str, Any]]):
        self._out = out
        self._reshape = reshape

    @property
    def written(self) -> list[dict[str, Any]]:
        return self._out.written

    def json(self, obj: dict[str, Any]) -> bool:
        return self._out.json(self._reshape(obj))


def context_json(event: str, text: str, system_message: str | None = None) -> dict[str, Any]:
    """A hook answer that adds `text` to the session's context (`hookSpecificOutput.additionalContext`)."""
    out: dict[str, Any] = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    if system_message:
        out["systemMessage"] = system_message
    return out


def block_json(reason: str) -> dict[str, Any]:
    """A Stop hook answer that blocks the stop with `reason` as the model's next input."""
    return {"decision": "block", "reason": reason}


class HookSink(BatchSink):
    """A hook's answer: what fits in one hand-over (core/sink.BatchSink), its text written by `emit` as
    the hook's one JSON object. `mark`: called just before the hand-over is recorded as pending with
    the session (it marks the session as handed to, for its SessionEnd)."""

    def __init__(self, emit: Callable[[str], bool], extra_notes: Sequence[str] = (),
                 mark: Callable[[], None] | None = None):
        super().__init__(extra_notes)
        self.emit = emit
        self.mark = mark

    def before_hand_over(self, shown: Sequence[Message]) -> None:
        if self.mark is not None:
            self.mark()

    def write(self, text: str, shown: Sequence[Message]) -> bool:
        if not self.emit(text):
            return False
        self.shown = list(shown)
        return True


# -- the hand-over ----------------------------------------------------------------------------------------


def title(inp: HookInput) -> str:
    """The harness's name in messages ("Claude Code", "Codex")."""
    return inp.harness.title if inp.harness is not None else "Claude Code"


def nothing(inp: HookInput) -> str:
    """The harness's "nothing to do" answer ("" Claude Code, "{}\\n" Codex)."""
    return inp.harness.nothing if inp.harness is not None else ""


def answer(inp: HookInput, env: Environment, handler: Callable[[HookInput, Environment, Output], int], *,
           exit_fn: Callable[[int], None] = os._exit, after: Callable[[], None] | None = None) -> int:
    """Run one hand-over `handler` inside the hook budget (`Output`), then give the harness its "nothing to
    do" answer when nothing else was written. `after` runs once the handler is done, whatever it did (e.g.
    Claude Code's waker sync note). A failure propagates to the hook route's one boundary
    (hookgate.run_hook), which says why on stderr and exits 0."""
    with Output(env.stdout, env.stderr, inp.hook, hook_budget(env.environ), exit_fn, nothing=nothing(inp)) as out:
        try:
            code = handler(inp, env, out)
        finally:
            if after is not None:
                after()
    out.nothing_if_silent()
    return code


def holder_of(inp: HookInput, environ: Mapping[str, str]) -> tuple[Holder, Transcript] | None:
    """The session a hand-over is pending with, and the transcript that confirms it: only for a harness
    whose transcript records what the model was given (Harness.confirmation), a session with a valid id
    and a hook input that names its transcript. None: the hand-over counts once written (as for Codex,
    until its transcript is measured)."""
    harness = inp.harness
    if harness is None or harness.confirmation != TRANSCRIPT or inp.session_id is None:
        return None
    paths = Paths(environ)
    if harness.record is not None:  # the harness finds its record itself (its hook input names none)
        transcript = resolve(harness.record)(inp.data, paths, inp.session_id)
    else:
        transcript = transcript_of(inp.data, paths, inp.session_id)
    if transcript is None:
        return None
    host = lifecycle.host_process()
    holder = Holder(f"{harness.name}:{inp.session_id}", host.pid if host else None, host.start if host else None,
                    ttl=HAND_OVER_TTL)
    return holder, transcript


def pull(inp: HookInput, env: Environment, sink: HookSink) -> PullReport:
    """One hand-over for the hook's persona through `sink` (core/delivery.pull_through). With a confirming
    session (holder_of), what this session was handed before is first confirmed from its transcript (the
    rest is handed over again), and what `sink` shows now is pending until a later look confirms it;
    otherwise the mail it shows is acknowledged once written. Raises ConfigError (nothing was sent),
    ApiError or StateError (nothing was acknowledged)."""
    ready = setup(inp.persona, env.environ)
    try:
        session = holder_of(inp, env.environ)
        if session is None:
            return pull_through(ready.engine, ready.engine.factory, sink)
        holder, transcript = session
        sink.mark = lambda: (mark_handed(transcript.handed_marker), transcript.handing_over())
        return pull_through(ready.engine, ready.engine.factory, sink, holder=holder, confirm=transcript)
    finally:
        ready.close()


def mark_handed(marker: Path) -> None:
    """Tell this session's SessionEnd that it has hand-overs to settle (a cheap file test in the gate): touch
    its `handed` marker (Transcript.handed_marker, lifecycle.handed_marker)."""
    try:
        marker.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        marker.touch(mode=0o600)
    except OSError:
        pass  # the deadline and the holder's liveness still claim it back


def confirm_at_end(inp: HookInput, environ: Mapping[str, str], also: Mapping[str, str] | None = None) -> None:
    """SessionEnd (and /clear): confirm what the transcript shows of this session's hand-overs and make
    the rest unseen again at once, so the next session gets it without waiting for a deadline. `also`:
    other holders of the same session (Claude Code's pusher, the Codex watcher), holder key -> the name of
    the transcript reader that holder keeps: each holder's entries are looked for from where its own
    reader stopped, since the hooks' reader may already be past markers the other holder had not seen."""
    session = holder_of(inp, environ)
    if session is None:
        return
    holder, transcript = session
    readers = {holder.key: transcript}
    for key, reader in (also or {}).items():
        readers[key] = transcript.again(reader)
    ready = setup(inp.persona, environ)
    try:
        for key, reading in readers.items():
            ids = ready.engine.held_by(key)
            if ids:
                seen = reading.shown(inp.persona, ids)
                ready.engine.settle(key, confirmed=seen, released=set(ids) - seen)
    finally:
        ready.close()
        for reading in readers.values():
            reading.forget()


def session_end(inp: HookInput, env: Environment) -> int:
    """A session's SessionEnd hook (Claude Code, Codex): end its long-lived helpers (waker, watcher), then
    settle what it was handed, by every holder its Harness declares (`Harness.holders`): what the
    transcript shows is confirmed, the rest is unseen again at once, so the next session gets it."""
    sid = inp.session_id
    if sid is None:
        return 0
    lifecycle.end_session(env.environ, sid)
    harness = inp.harness
    also = {f"{prefix}:{sid}": reader for prefix, reader in (harness.holders if harness is not None else ())}
    confirm_at_end(inp, env.environ, also=also)
    lifecycle.handed_marker(env.environ, sid).unlink(missing_ok=True)
    return 0


def confirm_soon(inp: HookInput, env: Environment, host: Any, seconds: float = SETTLE_SECONDS,
                 every: float = SETTLE_EVERY) -> int:
    """Confirm what the session holds as soon as its record shows it, without waiting for a later hook: for a
    harness that runs none after a Stop continuation (Kimi Code CLI runs no second Stop, and no SessionEnd
    under `kimi -p`), started detached by the hook that handed the mail over. It looks every `every` seconds,
    with a reader of its own (`settle`), while something is held (the state, under its lock, only when the
    record has grown since the last look); then it only watches the host process
    (`host`, a core.process.Proc), for `seconds` in all. When the host is gone within them, the session ended
    without a SessionEnd: this is its SessionEnd (`session_end`: what the record shows is confirmed, the rest
    unseen again at once). What it never saw stays pending for the session's later hooks, its SessionEnd, or
    the claim-back when the host is gone or the deadline passes."""
    from kijito_pull.core import process

    session = holder_of(inp, env.environ)
    if session is None:
        return 0
    holder, record = session
    reading = record.again("settle")
    ready = setup(inp.persona, env.environ)
    deadline = time.monotonic() + seconds
    looking = True
    size: int | None = -1  # the record's size at the last look
    try:
        while True:
            gone = host is not None and not process.alive(host.pid, host.start)
            if looking and (now := _size(record.path)) != size:
                size = now  # taken before the read: what is appended after it is looked at next time
                held = ready.engine.held_by(holder.key)
                seen = reading.shown(inp.persona, held) if held else set()
                if seen:
                    ready.engine.settle(holder.key, confirmed=seen)
                reading.kept()
                looking = not set(held) <= seen
            if gone or time.monotonic() >= deadline:
                break
            time.sleep(every)
    finally:
        ready.close()
    if gone:
        reading.forget()
        session_end(inp, env)
    return 0


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def failure_text(exc: BaseException) -> str:
    """An exception as the tail of one plain line."""
    text = str(exc).strip() or type(exc).__name__
    return text.rstrip(".")


def session_start(inp: HookInput, env: Environment, out: Output, extra: Sequence[str] = ()) -> int:
    """Waiting mail as the session's context. `extra`: the harness's own notes for the model (Claude
    Code's sentence on how new mail wakes the session). An interactive session is always told
    something, even "no mail"."""
    persona = inp.persona
    extra = [n for n in extra if n]

    def emit(text: str) -> bool:
        return out.json(context_json("SessionStart", text))

    sink = HookSink(emit, extra)
    try:
        report = pull(inp, env, sink)
    except config.ConfigError as exc:
        say(env.stderr, f"{inp.hook}: {persona}: {failure_text(exc)}")
        out.json(context_json("SessionStart", render.for_failure(
            persona, f"was not checked at session start: {failure_text(exc)}.", extra),
            system_message=f"kijito-pull: the Kijito inbox for {persona} was not checked: {failure_text(exc)}"))
        return 0
    except (ApiError, StateError) as exc:
        if written_before_failure(inp, env, out, exc):
            return 0
        say(env.stderr, f"{inp.hook}: {persona}: {failure_text(exc)}; nothing was acknowledged")
        out.json(context_json("SessionStart", render.for_failure(
            persona, f"could not be read at session start ({failure_text(exc)}); unseen mail is handed over later.",
            extra)))
        return 0
    report_problems(inp, env, report)
    if not report.delivered and report.refused is None and (inp.mode == INTERACTIVE or sink.notes):
        emit(sink.text(persona, []))
    return 0


def prompt(inp: HookInput, env: Environment, out: Output) -> int:
    """UserPromptSubmit: mail that arrived since the last hand-over as context for this prompt (nothing when
    there is none). What the session already holds stays held (`HELD_KEPT`): it was handed over with this
    session's context or a Stop block, and the prompt's request carries it already; the record confirms it
    later. Any failure lets the prompt go on, saying why."""
    sink = HookSink(lambda text: out.json(context_json("UserPromptSubmit", text)))
    sink.held = HELD_KEPT
    checked_pull(inp, env, out, sink, failed=" (nothing was acknowledged)")
    return 0


def checked_pull(inp: HookInput, env: Environment, out: Output, sink: HookSink, *, stopping: str = "",
                 failed: str = "; nothing was acknowledged",
                 via: Callable[[HookInput, Environment, HookSink], PullReport] | None = None) -> PullReport | None:
    """One hand-over through `sink` (`via`, default `pull`), its problems reported (report_problems); None when
    it failed, having said why in one stderr line: `inbox not checked: <why>`, then `stopping` (what the
    session does now), then `failed` when nothing had been written (written_before_failure: else the written
    answer stands). The hook goes on either way."""
    try:
        report = (via or pull)(inp, env, sink)
    except config.ConfigError as exc:
        say(env.stderr, f"{inp.hook}: {inp.persona}: inbox not checked: {failure_text(exc)}{stopping}")
        return None
    except (ApiError, StateError) as exc:
        if not written_before_failure(inp, env, out, exc):
            say(env.stderr, f"{inp.hook}: {inp.persona}: inbox not checked: {failure_text(exc)}{stopping}{failed}")
        return None
    report_problems(inp, env, report)
    return report


def written_before_failure(inp: HookInput, env: Environment, out: Output, exc: Exception) -> bool:
    """After a pull failed: True, having said so, when its mail had been written to the harness already
    (saving the cursor failed after the write). Then the hook's answer stands (a Stop hook's block, the
    session's context), and what the session did not take is handed over again."""
    if not out.written:
        return False
    say(env.stderr, f"{inp.hook}: {inp.persona}: the mail was handed over, but the cursor could not be saved "
                    f"({failure_text(exc)}); nothing was acknowledged, so what the session did not take comes again")
    return True


def report_problems(inp: HookInput, env: Environment, report: PullReport) -> None:
    """A refused write or a pinned cursor, as one stderr line each (the session goes on)."""
    if report.refused is not None:
        say(env.stderr, f"{inp.hook}: {inp.persona}: the mail could not be written to {title(inp)}; it is "
                        f"handed over again next time")
    if report.pinned:
        say(env.stderr, f"{inp.hook}: {inp.persona}: {report.problem}; the cursor stays pinned (what was visible "
                        f"was handed over)")


def stop(inp: HookInput, env: Environment, out: Output) -> int:
    """Stop: unseen mail blocks the stop with the hand-over as its reason, at most `max_stop_blocks` times
    in a row per turn (a run of blocks is one prompt_id's, or lasts while `stop_hook_active`); never twice
    for the same mail (it is pending with the session). Any failure lets the agent stop, saying why."""
    persona = inp.persona
    sid = inp.session_id
    environ = env.environ
    try:
        settings = config.load_config_file(environ)
        cap = max_stop_blocks(environ, settings)
    except config.ConfigError as exc:
        say(env.stderr, f"{inp.hook}: {failure_text(exc)}; letting the agent stop")
        return 0
    active = inp.data.get("stop_hook_active") is True
    raw_turn = inp.data.get("prompt_id")
    turn = raw_turn if isinstance(raw_turn, str) and raw_turn else None
    # A run of blocks is one turn's: the same prompt_id while the agent goes on because of Stop hooks
    # (measured on 2.1.197), a new one for the next prompt or wake. Without a prompt_id (older
    # Claude Code) the run lasts while stop_hook_active is true.
    try:
        count = lifecycle.read_blocks(environ, sid, turn) if (sid and active) else 0
    except lifecycle.LifecycleError:
        count = 0
    if active and sid is None:
        say(env.stderr, f"{inp.hook}: no valid session id, so consecutive blocks cannot be counted; not blocking "
                        f"again (unseen mail waits for the next pull)")
        return 0
    if count >= cap:
        if cap:
            say(env.stderr, f"{inp.hook}: {persona}: not blocking again after {count} consecutive blocks (the cap is "
                            f"{cap}); unseen mail waits for the next pull")
        return 0
    sink = HookSink(lambda text: out.json(block_json(text)))
    report = checked_pull(inp, env, out, sink, stopping="; letting the agent stop",
                          failed=" (nothing was acknowledged)")
    if report is None:
        return 0
    if sink.notes and not report.delivered:
        for note in sink.notes:
            say(env.stderr, f"{inp.hook}: {render.sanitize(note)}")
    if sid:
        try:
            lifecycle.write_blocks(environ, sid, count + 1 if report.delivered else 0, turn)
        except lifecycle.LifecycleError as exc:
            say(env.stderr, f"{inp.hook}: cannot record the block count: {exc}")
    return 0


