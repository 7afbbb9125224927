"""Kilo Code CLI as OpenCode's Kilo variant (kijito_pull.harnesses.kilo, opencode/variant.py), in-process: the
registered hooks and checks, Kilo's names reaching the installer (its folders, `@kilocode/plugin@7.3.1`), the
server (KILO_SERVER_PASSWORD, user `kilo`, against a real loopback HTTP server) and the record (the plugin's
`.kilo` binary accepted), a byte-exact install/uninstall with stand-in `kilo` and `npm`, and the plugin file
choosing its hooks from the binary it runs in (run by the real node). The real Kilo runs all this in
tests/e2e/test_opencode_e2e.py.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses import plugin_files, registry
from kijito_pull.harnesses.opencode import hooks, record, watcher
from kijito_pull.harnesses.opencode.server import Server
from kijito_pull.harnesses.opencode.variant import KILO, OPENCODE, for_name

NPM = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/npm-calls"
printf '{"dependencies": {"@kilocode/plugin": "7.3.1"}}\\n' > package.json
echo '{"lockfileVersion": 3}' > package-lock.json
mkdir -p node_modules/@kilocode/plugin
echo '{"version": "7.3.1"}' > node_modules/@kilocode/plugin/package.json
"""


def test_kilo_is_registered_with_its_own_hooks_checks_and_holders() -> None:
    kilo = registry.get("kilo")
    assert kilo.executable == "kilo"
    assert [h.name for h in kilo.hooks] == ["kilo-chat-message", "kilo-session-idle", "kilo-watch"]
    assert {h.handler for h in kilo.hooks} == {h.handler for h in registry.get("opencode").hooks}  # shared code
    assert kilo.check_ids == ("harness.kilo", "kilo.plugin", "kilo.push")
    assert registry.find_hook("kilo-watch")[1].name == "kilo-watch"  # type: ignore[index]
    assert for_name("kilo-chat-message") is KILO and for_name("opencode-watch") is OPENCODE


def test_holders_and_watcher_names_follow_the_variant() -> None:
    assert hooks.session_holder_key("s1", KILO) == "kilo:s1" and hooks.session_holder_key("s1") == "opencode:s1"
    assert watcher.push_holder_key("s1", KILO) == "kilo-push:s1"
    assert KILO.host_env == "KIJITO_PULL_KILO_HOST" and KILO.command_env == "KIJITO_PULL_KILO"


def test_the_record_takes_the_plugins_kilo_binary_only_for_kilo(tmp_path) -> None:
    binary = tmp_path / ".kilo"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    environ = {"PATH": str(tmp_path / "nowhere")}
    assert record.opencode_command({"opencode": str(binary)}, environ, KILO) == str(binary)
    assert record.opencode_command({"opencode": str(binary)}, environ) is None


def test_the_server_sends_kilos_password_as_user_kilo() -> None:
    seen: list[str | None] = []

    class Kilo(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # noqa: ANN002
            pass

        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            raw = json.dumps({"id": "ses_k"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Kilo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        environ = {"KILO_SERVER_PASSWORD": "pw", "OPENCODE_SERVER_PASSWORD": "other"}
        assert Server.for_session(url, "ses_k", environ, variant=KILO) is not None
    finally:
        server.shutdown()
    assert seen == ["Basic " + base64.b64encode(b"kilo:pw").decode()]


@pytest.mark.parametrize("scope", ["--user", "--project"])
def test_install_writes_kilos_folders_and_uninstall_gives_everything_back(tmp_path, scope) -> None:
    home, project, bin_ = tmp_path / "home", tmp_path / "proj", tmp_path / "bin"
    (home / ".config" / "kilo").mkdir(parents=True)
    (home / ".config" / "kilo" / "kilo.jsonc").write_text("{}\n")
    (project / ".git").mkdir(parents=True)
    bin_.mkdir()
    for name, body in (("kilo", "#!/bin/sh\necho 7.7.7\n"), ("npm", NPM)):
        (bin_ / name).write_text(body)
        (bin_ / name).chmod(0o755)
    environ = {"HOME": str(home), "PATH": f"{bin_}{os.pathsep}{os.environ.get('PATH', '')}",
               "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "KIJITO_PULL_CONFIG": os.devnull}

    def run(*argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), Environment(stdin=io.StringIO(""), stdout=out, stderr=err, environ=dict(environ),
                                            cwd=str(project)))
        return code, out.getvalue() + err.getvalue()

    def tree() -> dict[str, bytes | None]:
        return {str(p): None if p.is_dir() else p.read_bytes() for r in (home, project) for p in sorted(r.rglob("*"))}

    before = tree()
    target = (home / ".config" / "kilo" if scope == "--user" else project / ".kilo") / "plugin" / "kijito-pull.js"
    code, out = run("install", "kilo", scope, "--dry-run")
    assert code == 0 and f"+++ {target}" in out and "@kilocode/plugin@7.3.1" in out, out
    assert tree() == before
    kijito_pull = str(Path(sys.executable).parent / "kijito-pull")
    code, out = run("install", "kilo", scope, "--command", kijito_pull)
    assert code == 0, out
    assert f'const COMMAND = ["{kijito_pull}"];' in target.read_text()
    assert target.is_file() and (target.parents[1] / "node_modules" / "@kilocode" / "plugin").is_dir()
    assert not (home / ".config" / "opencode").exists() and not (project / ".opencode").exists()
    code, out = run("uninstall", "kilo", scope)
    assert code == 0, out
    assert tree() == before


def test_the_plugin_calls_the_hooks_of_the_binary_it_runs_in(tmp_path) -> None:
    """The shipped plugin, loaded by node under the name `.kilo` and `opencode`: which hook it runs."""
    plugin = tmp_path / "kijito-pull.mjs"
    log = tmp_path / "called"
    fake = tmp_path / "fake-kijito-pull"
    fake.write_text(f'#!/bin/sh\necho "$2" >> {log}\necho "{{}}"\n')
    fake.chmod(0o755)
    text = plugin_files.opencode_plugin().read_text()
    plugin.write_text(text.replace('const COMMAND = ["kijito-pull"];', f"const COMMAND = [{json.dumps(str(fake))}];"))
    for binary in ("/opt/kilo/node_modules/@kilocode/cli/bin/.kilo", "/opt/node_modules/opencode-ai/bin/opencode"):
        # node reports its own path; Kilo's and OpenCode's binaries report theirs (measured, docs/kilo.md)
        script = (f"Object.defineProperty(process, 'execPath', {{value: {json.dumps(binary)}}});"
                  f"const m = await import({json.dumps(str(plugin))});"
                  "const p = await m.KijitoPull({directory: '/'});"
                  "await p['chat.message']({sessionID: 's'}, {parts: [{id: 'a'}]});")
        done = subprocess.run([shutil.which("node") or "node", "--input-type=module", "-e", script],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    assert log.read_text().split() == ["kilo-chat-message", "opencode-chat-message"]
