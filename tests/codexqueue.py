"""A stand-in for Codex's way into a running session, `codex queue --thread ID --message TEXT`, and for the
Codex behind it, which records the queued text in the session's rollout (a user message,
HarnessSession.pushed) once the turn takes it (measured on 0.171.0: docs/codex.md; the real TUI is woken in
tests/e2e/test_codex_e2e.py).

`install(folder)` writes a stand-in `codex` executable into `<folder>/bin`. Its `queue` hands the text
to the session's queue, a Unix socket at `<folder>/codex-<thread>.sock` (a `CodexQueue`), and exits 0
("Queued message N for thread ID") when Codex took it, 1 when it refused or no session has that thread
("error: thread not found", as the real one). As with the real one, the watcher starts it in its own
session, so a watcher killed while it runs does not stop it: the push may still arrive. Each push's `tag`
is `$STANDIN_RUN` of the `codex` process (the watcher passes its environment on): the crash trials set it
per watcher. What a push becomes (taken, late, never recorded, refused) is the shared stand-in's
(tests/wayin.py).
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from tests.entrypoints import HarnessSession
from tests.wayin import WayIn, serve_unix

TAG_ENV = "STANDIN_RUN"

_CODEX = textwrap.dedent("""\
    import json, os, socket, sys
    args = sys.argv[1:]
    if args[:1] != ["queue"] or "--thread" not in args or "--message" not in args:
        print("error: this stand-in only queues", file=sys.stderr)
        sys.exit(2)
    thread = args[args.index("--thread") + 1]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.path.join(FOLDER, "codex-" + thread + ".sock"))
    except OSError:
        print("error: thread not found: " + thread, file=sys.stderr)
        sys.exit(1)
    request = {"thread": thread, "message": args[args.index("--message") + 1], "tag": os.environ.get(TAG_ENV, "")}
    sock.sendall(json.dumps(request).encode() + b"\\n")
    answer = json.loads(sock.makefile().readline() or "{}")
    if "ok" not in answer:
        print("error: " + str(answer.get("error", "no answer")), file=sys.stderr)
        sys.exit(1)
    print("Queued message %s for thread %s" % (answer["ok"], thread))
""")


def install(folder: Path) -> Path:
    """Write the stand-in `codex` into `<folder>/bin` (the folder of the sessions' sockets); return that bin."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    codex = bin_dir / "codex"
    codex.write_text(f"#!{sys.executable} -S\nFOLDER = {str(folder)!r}\nTAG_ENV = {TAG_ENV!r}\n" + _CODEX)
    codex.chmod(0o755)
    return bin_dir


class CodexQueue(WayIn):
    """One Codex session's queue (module docstring), recording into `session`'s rollout."""

    def __init__(self, folder: Path, session: HarnessSession, **kwargs):
        super().__init__(**kwargs)
        assert session.codex
        self.session = session
        self.bin = install(folder)
        self.path = folder / f"codex-{session.id}.sock"
        self.server = serve_unix(self.path, self._answer)

    def _answer(self, request: dict, pid: int) -> dict:
        if request.get("thread") != self.session.id or not isinstance(request.get("message"), str):
            return {"error": "thread not found"}
        if not self.offer(request["message"], str(request.get("tag", "")), request):
            return {"error": "the thread did not take the message"}
        return {"ok": len(self.prompts)}

    def record(self, text: str) -> None:
        self.session.pushed(text)

    def watcher_env(self, tag: str) -> dict[str, str]:
        """The watcher's environment: this `codex` first on PATH, and the tag its pushes carry."""
        return {"PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}", TAG_ENV: tag}

    def close(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)
        super().close()


def for_session(runtime: Path, session: HarnessSession, seed: int) -> CodexQueue:
    """The crash trials' way in for a session (kijito_pull/harnesses/codex/testing.py names it)."""
    return CodexQueue(runtime, session, record_delay=0.3, seed=seed)
