"""`kijito-pull demo`: the whole loop on an embedded sandbox, with no account and no configuration."""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from collections.abc import Sequence

from kijito_pull.context import Context, Flags, Settings
from kijito_pull.core import config, paths, render, urgency
from kijito_pull.core.delivery import pull_through
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode
from kijito_pull.core.models import Message
from kijito_pull.core.sink import BatchSink, Sink
from kijito_pull.sandbox import Sandbox
from kijito_pull.sinks.stdout import NdjsonSink

PERSONA = "demo-agent"
LONG_BODY = "Design notes for the retry layer, as promised. " + " ".join(
    f"Point {n}: transient faults are retried with backoff, and every retry is bounded." for n in range(1, 60))


class _Collect(BatchSink):
    """Takes one hand-over, as an agent harness does, so the demo can show the messages it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[Message] = []

    def write(self, text: str, shown: Sequence[Message]) -> bool:
        self.messages.extend(shown)
        return True


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="see the whole loop on a local sandbox (no account needed)",
                            description="Start a sandbox Kijito server on 127.0.0.1, send a few messages, pull "
                                        "them with the real engine, and show what an agent and a script get.")
    parser.set_defaults(run=run)


def _heading(env: Environment, text: str) -> None:
    env.stdout.write(f"\n== {text} ==\n")


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kijito-pull-demo-") as state_root, \
            Sandbox(token="demo-token", window_limit=20).start() as sandbox:
        # The demo's own settings: the sandbox, a throw-away state folder, and no user config file.
        environ = {paths.STATE_DIR_ENV: state_root, paths.CONFIG_ENV: os.devnull,
                   config.BASE_ENV: sandbox.url, config.TOKEN_ENV: "demo-token"}
        contexts = {consumer: Context(Settings(environ, Flags(consumer=consumer))) for consumer in ("agent", "script")}
        client = contexts["agent"].client

        def pull(consumer: str, sink: Sink):
            ctx = contexts[consumer]
            return pull_through(ctx.engine(PERSONA), ctx.factory, sink)

        env.stdout.write(f"Sandbox Kijito API on {sandbox.url} (SQLite, loopback only); state in {state_root}\n")
        _heading(env, "1. Three messages arrive for " + PERSONA)
        for sender, body, urgent in (("river", "Can you review PR #42 when you're free?", False),
                                     ("loom", "Build on main is red: tests/test_api.py fails.", True),
                                     ("quill", LONG_BODY, False)):
            sent = client.send(PERSONA, body, sender=sender, urgent=urgent)
            env.stdout.write(f"  {sender} -> {PERSONA}: message {sent.id}{' (urgent)' if urgent else ''}\n")

        pending = client.notify_pending()
        env.stdout.write("  notify/pending: " + ", ".join(
            f"{c.persona} {c.unread} unread ({c.unread_urgent} urgent)" for c in pending.counts) + "\n")

        _heading(env, "2. What an agent is handed (consumer 'agent')")
        collected = _Collect()
        pull("agent", collected)
        # Inbox rows carry no urgent flag; the counts do, so the hand-over says urgent mail is among it,
        # as a pull's text and a push say it (core/urgency.py).
        row = next(c for c in pending.counts if c.persona == PERSONA)
        urgent = urgency.note(urgency.among(collected.messages, row.unread, row.unread_urgent),
                              len(collected.messages))
        env.stdout.write(render.for_model(PERSONA, collected.messages, clip_chars=400,
                                          extra_notes=[urgent] if urgent else ()))
        env.stdout.write("\n  (This sandbox stops when the demo ends, so there is nothing for `kijito-pull show` "
                         "to read afterwards; against `kijito-pull sandbox` or your account it prints the whole "
                         "message.)\n")

        _heading(env, "3. What a script gets: `kijito-pull --once --json --consumer script`")
        lines = io.StringIO()
        pull("script", NdjsonSink(lines))
        for line in lines.getvalue().splitlines():
            env.stdout.write((line[:300] + " ...") if len(line) > 300 else line)
            env.stdout.write("\n")

        _heading(env, "4. Pull again as 'agent': nothing is repeated")
        again = _Collect()
        report = pull("agent", again)
        env.stdout.write(f"  {len(report.delivered)} new messages (the cursor sits past message "
                         f"{collected.messages[-1].id})\n")
        for ctx in contexts.values():
            ctx.close()
    env.stdout.write(f"\nDone in {time.monotonic() - started:.1f} s. Next: `kijito-pull sandbox` to keep a "
                     f"server running, or `kijito-pull --once --persona NAME` against your account.\n")
    return ExitCode.OK if not report.delivered else ExitCode.SOURCE_FAILED
