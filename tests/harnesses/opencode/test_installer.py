"""`kijito-pull install | uninstall opencode`, in-process on a private HOME, with stand-in `opencode` (it says
its version) and `npm` (it writes what npm writes: package.json, package-lock.json, node_modules/) on PATH:
the plugin file with the command written into it, `@opencode-ai/plugin` installed only where it is missing,
--dry-run showing the diff and the npm step and changing nothing, uninstall giving every file and folder back
byte for byte, a foreign plugin file never overwritten, and doctor's `harness.opencode` / `opencode.plugin`.
The real OpenCode loads what this writes in tests/e2e/test_opencode_e2e.py.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from kijito_pull.cli.main import main
from kijito_pull.core.environment import Environment
from kijito_pull.harnesses.opencode import installer

KIJITO_PULL = str(Path(sys.executable).parent / "kijito-pull")
NPM = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/npm-calls"
[ -f package.json ] || printf '{\\n  "dependencies": {}\\n}\\n' > package.json
python3 - <<'PY'
import json
data = json.load(open("package.json")); data.setdefault("dependencies", {})["@opencode-ai/plugin"] = "1.18.33"
open("package.json", "w").write(json.dumps(data, indent=2) + "\\n")
PY
echo '{"lockfileVersion": 3}' > package-lock.json
mkdir -p node_modules/@opencode-ai/plugin
echo '{"version": "1.18.33"}' > node_modules/@opencode-ai/plugin/package.json
"""


class Machine:
    def __init__(self, root: Path):
        self.home = root / "home"
        self.config = self.home / ".config" / "opencode"
        self.config.mkdir(parents=True)
        (self.config / "opencode.json").write_text('{"theme": "dark"}\n')
        self.project = root / "proj"
        (self.project / ".git").mkdir(parents=True)
        self.bin = root / "bin"
        self.bin.mkdir()
        for name, body in (("opencode", "#!/bin/sh\necho 1.18.33\n"), ("npm", NPM)):
            (self.bin / name).write_text(body)
            (self.bin / name).chmod(0o755)
        self.environ = {"HOME": str(self.home), "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                        "KIJITO_PULL_STATE_DIR": str(root / "state"), "KIJITO_PULL_CONFIG": os.devnull}

    def run(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                            environ=dict(self.environ), cwd=str(self.project)))
        return code, out.getvalue(), err.getvalue()

    def tree(self) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for root in (self.home, self.project):
            for path in sorted(root.rglob("*")):
                out[str(path)] = None if path.is_dir() else path.read_bytes()
        return out

    def npm_calls(self) -> list[str]:
        calls = self.bin / "npm-calls"
        return calls.read_text().splitlines() if calls.exists() else []


@pytest.fixture
def m(tmp_path) -> Machine:
    return Machine(tmp_path)


@pytest.mark.parametrize("scope", ["--user", "--project"])
def test_install_then_uninstall_gives_everything_back_byte_for_byte(m, scope) -> None:
    before = m.tree()
    code, out, err = m.run("install", "opencode", scope, "--dry-run")
    assert code == 0, err
    folder = m.config if scope == "--user" else m.project / ".opencode"
    plugin = folder / "plugin" / "kijito-pull.js"
    assert f"+++ {plugin}" in out and "npm install --no-audit --no-fund --prefer-offline --save-exact " \
           "@opencode-ai/plugin@1.18.33" in out
    assert m.tree() == before and not m.npm_calls()
    code, out, err = m.run("install", "opencode", scope, "--command", KIJITO_PULL)
    assert code == 0, err + out
    assert f'const COMMAND = ["{KIJITO_PULL}"];' in plugin.read_text()
    assert installer.has_dependency(folder) and len(m.npm_calls()) == 1
    code, out, _ = m.run("install", "opencode", scope, "--command", KIJITO_PULL)
    assert code == 0 and "already installed" in out and len(m.npm_calls()) == 1  # npm only where it is missing
    code, out, err = m.run("uninstall", "opencode", scope)
    assert code == 0, err
    assert m.tree() == before


def test_a_package_json_of_the_users_own_is_restored_byte_for_byte(m) -> None:
    mine = b'{"dependencies":   {"left-pad": "1.0.0"}}\n'
    (m.config / "package.json").write_bytes(mine)
    before = m.tree()
    assert m.run("install", "opencode", "--user", "--command", KIJITO_PULL)[0] == 0
    assert b"@opencode-ai/plugin" in (m.config / "package.json").read_bytes()
    assert m.run("uninstall", "opencode", "--user")[0] == 0
    assert (m.config / "package.json").read_bytes() == mine and m.tree() == before


def test_a_plugin_file_that_is_not_ours_is_never_overwritten(m) -> None:
    foreign = m.config / "plugin" / "kijito-pull.js"
    foreign.parent.mkdir()
    foreign.write_text("export const Mine = async () => ({});\n")
    code, _, err = m.run("install", "opencode", "--user")
    assert code != 0 and "is not kijito-pull's plugin" in err
    assert foreign.read_text() == "export const Mine = async () => ({});\n"
    assert m.run("uninstall", "opencode", "--user")[0] == 0 and foreign.exists()


def test_doctor_sees_the_plugin_and_a_missing_dependency(m) -> None:
    assert m.run("install", "opencode", "--user", "--command", KIJITO_PULL)[0] == 0
    _, out, _ = m.run("doctor", "--json", "--persona", "river")
    found = {f["check"]: f for f in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
    assert found["harness.opencode"]["verdict"] == "ok", found["harness.opencode"]
    assert found["opencode.plugin"]["verdict"] == "ok", found["opencode.plugin"]
    assert found["opencode.push"]["verdict"] == "warn"  # no OPENCODE_SERVER_PASSWORD here
    import shutil

    shutil.rmtree(m.config / "node_modules")
    _, out, _ = m.run("doctor", "--json", "--persona", "river")
    found = {f["check"]: f for f in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
    assert found["opencode.plugin"]["verdict"] == "warn" and "70 s" in found["opencode.plugin"]["detail"]


def test_an_update_is_shown_first_then_made_and_uninstall_still_gives_everything_back(m) -> None:
    before = m.tree()
    plugin = m.config / "plugin" / "kijito-pull.js"
    assert m.run("install", "opencode", "--user", "--command", KIJITO_PULL)[0] == 0
    installed = m.tree()
    code, out, err = m.run("install", "opencode", "--user", "--command", "/opt/other/kijito-pull", "--dry-run")
    assert code == 0, err
    assert "install would refresh" in out and '+const COMMAND = ["/opt/other/kijito-pull"];' in out
    assert f'-const COMMAND = ["{KIJITO_PULL}"];' in out and m.tree() == installed
    code, out, err = m.run("install", "opencode", "--user", "--command", "/opt/other/kijito-pull")
    assert code == 0 and "updated" in out, err
    assert '"/opt/other/kijito-pull"' in plugin.read_text() and len(m.npm_calls()) == 1
    assert m.run("uninstall", "opencode", "--user")[0] == 0
    assert m.tree() == before


def test_without_npm_the_install_stops_before_writing_anything(m) -> None:
    (m.bin / "npm").unlink()
    m.environ["PATH"] = str(m.bin)  # the stand-in opencode only: no npm anywhere on it
    before = m.tree()
    code, out, _ = m.run("install", "opencode", "--user", "--command", KIJITO_PULL, "--dry-run")
    assert code == 0 and "npm is not on PATH" in out and "the real install would stop here" in out
    code, _, err = m.run("install", "opencode", "--user", "--command", KIJITO_PULL)
    assert code != 0 and "npm is not on PATH" in err
    assert m.tree() == before  # no plugin, and no note of the folder left for an uninstall that never comes
