"""A stand-in for a harness process whose children the hooks are, for as long as one session lives.

The hooks find the harness they serve as their parent process (`lifecycle.host_process`), and a hand-over
pending with a session whose harness process is gone is claimed back by the next pull. Where the session's
end is its process's end (OpenCode: no end hook; `opencode run` exits at its first idle), a test needs a
real process that is the hooks' parent and that it can end: this one. It is a small Python process that
starts each command it is sent as its own child, with the stdin, stdout and stderr the caller opened
(passed over a socket, SCM_RIGHTS), and reports the child's pid and, later, its exit status. The caller gets
a `HostedProc` with Popen's `pid`, `poll`, `wait`, `send_signal`, `kill` and (for a piped stdout) `stdout`.
`close()` ends the host: the session's process is gone.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO

_HOST = r"""
import json, os, socket, subprocess, sys, threading
sock = socket.socket(fileno=int(sys.argv[1]))
lock = threading.Lock()
def reply(obj):
    with lock:
        sock.send(json.dumps(obj).encode())
def reap(proc):
    reply({"pid": proc.pid, "rc": proc.wait()})
while True:
    msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
    if not msg:
        break
    req = json.loads(msg)
    try:
        proc = subprocess.Popen(req["argv"], stdin=fds[0], stdout=fds[1], stderr=fds[2], env=req["env"],
                                cwd=req["cwd"])
    except OSError as exc:
        reply({"error": str(exc)})
        continue
    finally:
        for fd in fds:
            os.close(fd)
    reply({"spawned": proc.pid})
    threading.Thread(target=reap, args=(proc,), daemon=True).start()
"""


class HostedProc:
    """One child of the host, as far as a caller of subprocess.Popen needs it."""

    def __init__(self, pid: int, stdout: IO[bytes] | None = None):
        self.pid = pid
        self.stdout = stdout
        self.stdin = None
        self.returncode: int | None = None
        self._done = threading.Event()

    def _exited(self, rc: int) -> None:
        self.returncode = rc
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(9)


class SessionHost:
    """One harness process (module docstring): `spawn` starts a command as its child."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-c", _HOST, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                     stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock = ours
        self._children: dict[int, HostedProc] = {}
        self._early: dict[int, int] = {}  # exits reported before the spawn call registered its child
        self._answers: list[dict] = []
        self._cond = threading.Condition()
        self._spawn_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        while True:
            try:
                msg = self.sock.recv(1 << 16)
            except OSError:
                msg = b""
            with self._cond:
                if not msg:
                    self._answers.append({"error": "the host is gone"})
                    self._cond.notify_all()
                    return
                data = json.loads(msg)
                if "rc" in data:
                    child = self._children.get(data["pid"])
                    if child is None:
                        self._early[data["pid"]] = data["rc"]
                    else:
                        child._exited(data["rc"])
                else:
                    self._answers.append(data)
                self._cond.notify_all()

    def spawn(self, argv: list[str], *, stdin: bytes, stdout: int, stderr: int, env: Mapping[str, str],
              cwd: Path, stdout_reader: IO[bytes] | None = None) -> HostedProc:
        """Start `argv` as the host's child with `stdin` written to it (and closed) and the descriptors
        `stdout`, `stderr` (the caller's; it may close them once this returns)."""
        read, write = os.pipe()
        with self._spawn_lock:
            try:
                socket.send_fds(self.sock, [json.dumps({"argv": argv, "env": dict(env), "cwd": str(cwd)}).encode()],
                                [read, stdout, stderr])
            finally:
                os.close(read)
            with self._cond:
                while not self._answers:
                    self._cond.wait(30)
                answer = self._answers.pop(0)
                if "spawned" not in answer:
                    os.close(write)
                    raise OSError(f"the session host could not start {argv[:3]}: {answer.get('error')}")
                child = HostedProc(answer["spawned"], stdout_reader)
                self._children[child.pid] = child
                if child.pid in self._early:
                    child._exited(self._early.pop(child.pid))
        try:
            os.write(write, stdin)
        except BrokenPipeError:  # killed before it read its input
            pass
        finally:
            os.close(write)
        return child

    def close(self, timeout: float = 30) -> None:
        """The harness process ends (its children have exited: the caller waited for them)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
