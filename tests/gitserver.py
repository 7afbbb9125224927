"""A smart-HTTP git server on 127.0.0.1 for tests: `git http-backend` as CGI behind a small threaded HTTP
server, serving the bare repositories under one folder (GIT_HTTP_EXPORT_ALL). It stands in for GitHub
where a harness installs from a git URL (Claude Code clones shallow, which git's dumb HTTP cannot serve).

    server = GitHttp(root).start()     # root/<owner>/<name>.git, bare
    server.url + "/owner/name.git"     # what a harness is given
    server.requests                    # "GET /owner/name.git/info/refs?service=git-upload-pack", ...
    server.stop()

`bare_clone(source, root, "owner/name")` makes such a repository of a checkout's committed HEAD.
"""

from __future__ import annotations

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def bare_clone(source: Path, root: Path, name: str) -> Path:
    """`git clone --bare` of `source`'s committed HEAD into root/<name>.git."""
    target = root / f"{name}.git"
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--bare", "--quiet", str(source), str(target)], check=True, timeout=120,
                   capture_output=True)
    return target


class GitHttp:
    """`git http-backend` over HTTP on 127.0.0.1 (create it inside a network namespace to serve there)."""

    def __init__(self, root: Path):
        self.root = root
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> GitHttp:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._cgi()

            def do_POST(self) -> None:  # noqa: N802
                self._cgi()

            def _cgi(self) -> None:
                owner.requests.append(f"{self.command} {self.path}")
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_PROJECT_ROOT": str(owner.root),
                       "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path, "QUERY_STRING": query,
                       "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                       "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
                       "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                       "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
                proc = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=120)
                head, _, payload = proc.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.split(b"\r\n"):
                    key, _, value = line.decode("latin-1").partition(":")
                    if key.lower() == "status":
                        status = int(value.split()[0])
                    elif key:
                        headers.append((key, value.strip()))
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
