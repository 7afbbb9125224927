"""The Claude Code hooks and waker with `--source redis://...` on their command line (what
`install claude --source ... --consumer ...` writes), as real `kijito-pull hook` processes against a
real redis-server: the mail comes from the stream through the named group, the waker wakes on XREAD
BLOCK, and the Kijito sandbox (whose token the hooks are given) is sent nothing at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kijito_pull.core.models import Message
from kijito_pull.harnesses.session import lifecycle
from kijito_pull.sources import redis_streams

TOKEN = "hook-token-5e1"
PERSONA = "river"
KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
OPT_IN = "# Project\n\n- inbox monitor: raise on start\n- inbox persona: river\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    (folder / ".git").mkdir(parents=True)
    (folder / "AGENTS.md").write_text(OPT_IN)
    return folder


def append(redis_server, ids) -> None:
    """What a relay appends: mail to river from loom."""
    appender = redis_streams.Appender(redis_streams.connect(redis_server.url), "test")
    for i in ids:
        appender.append(PERSONA, Message(i, "loom", f"message {i}", "2026-12-02T10:00:00Z", False, None))


def _environ(sb, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "KIJITOMON_TOKEN": TOKEN, "KIJITO_BASE": sb.url,
            "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "KIJITO_PULL_CONFIG": os.devnull,
            "CLAUDE_CODE_ENTRYPOINT": "sdk-cli", "KIJITO_PULL_CLAUDE_WAKER": "rewake", **extra}


def _hook(name: str, url: str, project: Path, environ: dict, **fields) -> subprocess.Popen:
    proc = subprocess.Popen([KIJITO_PULL, "hook", name, "--source", url, "--consumer", "ci"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=project, env=environ)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"session_id": "sess-1", "cwd": str(project), **fields}))
    proc.stdin.close()
    proc.stdin = None
    return proc


def test_hooks_read_the_stream_named_on_their_command_line_and_ask_kijito_nothing(sb, redis_server, project,
                                                                                   tmp_path):
    sb.send(PERSONA, "loom", "MAIL-IN-KIJITO-ONLY")  # not relayed: a Redis consumer never sees it
    append(redis_server, [7])
    environ = _environ(sb, tmp_path)
    proc = _hook("claude-session-start", redis_server.url, project, environ, hook_event_name="SessionStart")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out, err
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "message 7" in context and "MAIL-IN-KIJITO-ONLY" not in context, context
    # Taken through group `ci` (the --consumer of the command line) and acknowledged: with no transcript
    # in the hook input, the written answer is the confirmation.
    r = redis_server.client()
    groups = r.xinfo_groups("kijito:{river}:mail")
    assert [(g["name"], g["pending"]) for g in groups] == [("ci", 0)]
    assert groups[0]["last-delivered-id"] == r.hget("kijito:{river}:ids", "7")
    again = _hook("claude-session-start", redis_server.url, project, environ, hook_event_name="SessionStart")
    assert again.communicate(timeout=30)[0] == ""  # nothing new for the group
    assert sb.requests == []


def test_the_waker_wakes_on_an_append_to_the_stream_and_asks_kijito_nothing(sb, redis_server, project, tmp_path):
    environ = _environ(sb, tmp_path, CLAUDE_CODE_ENTRYPOINT="cli")
    waker = _hook("claude-waker", redis_server.url, project, environ)
    deadline = time.monotonic() + 15
    while lifecycle.live_lease(environ, "sess-1") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lifecycle.live_lease(environ, "sess-1") is not None
    time.sleep(1.0)
    assert waker.poll() is None  # nothing in the stream: it waits
    started = time.monotonic()
    append(redis_server, [41])
    _out, err = waker.communicate(timeout=20)
    assert waker.returncode == 2 and "(id 41)" in err, err
    assert time.monotonic() - started < 3  # XREAD BLOCK, not a sweep
    # It took nothing (a look reads no group: XREAD BLOCK and XRANGE), so 41 is unseen for the prompt hook.
    assert redis_server.client().xinfo_groups("kijito:{river}:mail") == []
    prompt = _hook("claude-prompt", redis_server.url, project, environ, hook_event_name="UserPromptSubmit",
                   prompt=err)
    out, perr = prompt.communicate(timeout=30)
    assert "message 41" in json.loads(out)["hookSpecificOutput"]["additionalContext"], perr
    assert sb.requests == []


def test_install_writes_source_and_consumer_into_the_hook_command_lines(tmp_path, project):
    environ = {**os.environ, "HOME": str(tmp_path / "home"), "KIJITO_PULL_DATA_DIR": str(tmp_path / "data"),
               "PATH": os.environ.get("PATH", "")}
    ran = subprocess.run([KIJITO_PULL, "install", "codex", "--project", str(project), "--dry-run",
                          "--source", "redis://10.0.0.5:6379/0", "--consumer", "ci"],
                         capture_output=True, text=True, env=environ, cwd=project, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "hook codex-stop --source redis://10.0.0.5:6379/0 --consumer ci" in ran.stdout, ran.stdout
    refused = subprocess.run([KIJITO_PULL, "install", "codex", "--project", str(project), "--dry-run",
                              "--source", "redis://:s3cret@10.0.0.5:6379/0"],
                             capture_output=True, text=True, env=environ, cwd=project, timeout=60)
    assert refused.returncode == 2 and "s3cret" not in refused.stdout + refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_a_hook_command_line_with_other_words_is_a_usage_error(sb, project, tmp_path):
    ran = subprocess.run([KIJITO_PULL, "hook", "claude-stop", "--source"], input="{}", capture_output=True,
                         text=True, cwd=project, env=_environ(sb, tmp_path), timeout=30)
    assert ran.returncode == 2 and "usage:" in ran.stderr and ran.stdout == "", ran.stderr
    ran = subprocess.run([KIJITO_PULL, "hook", "claude-stop", "--persona", "loom"], input="{}",
                         capture_output=True, text=True, cwd=project, env=_environ(sb, tmp_path), timeout=30)
    assert ran.returncode == 2 and "unrecognized arguments" in ran.stderr, ran.stderr
    assert sb.requests == []
