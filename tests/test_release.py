"""The release: one version everywhere, the artifacts scripts/build-release makes (what the release workflow
publishes: it runs the same script), the wheel installed offline into fresh virtual environments, and the
launcher (bin/kijito-pull-launch) finding its program: the installing kijito-pull, PATH's if it fits, else
`uvx` from a local wheel index standing in for PyPI, else one line of advice.

Nothing here is mocked: the real build, twine, pip, uv and kijito-pull run as subprocesses. The local
index is a folder of wheels (this build's wheel plus its dependencies', fetched once with `pip download`);
every install and every uvx run after that is offline (`--no-index`, `UV_OFFLINE=1`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from kijito_pull import __version__
from kijito_pull.harnesses import plugin_files
from tests.wheelindex import uv_env as wheelindex_uv_env
from tests.wheelindex import uv_folder, wheel_index

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "scripts" / "build-release"
SYSTEM_PATH = "/usr/bin:/bin"
MANIFESTS = (".claude-plugin/marketplace.json", "plugins/claude/.claude-plugin/plugin.json",
             "plugins/claude/.claude-plugin/marketplace.json", "plugins/claude/bin/kijito-pull-launch", "package.json",
             ".github/plugin/marketplace.json", "plugins/copilot/.plugin/plugin.json", "gemini-extension.json",
             "CHANGELOG.md")
COPIES = ("plugins/copilot/bin/kijito-pull-launch", "bin/kijito-pull-launch")

pytestmark = pytest.mark.slow


def check_versions(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUILD), "--check-versions", "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


# -- one version -------------------------------------------------------------------------------------------------


def test_every_manifest_carries_the_package_version():
    proc = check_versions(REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"every manifest says {__version__}"


@pytest.mark.parametrize("rel", MANIFESTS)
def test_a_planted_version_mismatch_fails_the_check(tmp_path, rel):
    for name in (*MANIFESTS, *COPIES, "kijito_pull/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tmp_path / name)
    assert check_versions(tmp_path).returncode == 0  # the copy agrees, as the checkout does
    target = tmp_path / rel
    text = target.read_text()
    planted = text.replace(__version__, "9.9.9", 1)
    assert planted != text
    target.write_text(planted)
    proc = check_versions(tmp_path)
    assert proc.returncode != 0 and f"{rel}: version 9.9.9, but kijito_pull/__init__.py says {__version__}" \
        in proc.stderr, proc.stderr


def test_a_plugin_folders_copy_of_the_launcher_must_be_its_source_byte_for_byte(tmp_path):
    for name in (*MANIFESTS, *COPIES, "kijito_pull/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tmp_path / name)
    copy = tmp_path / COPIES[0]
    copy.write_text(copy.read_text().replace("exit 127", "exit 1"))
    proc = check_versions(tmp_path)
    assert proc.returncode != 0 and f"{COPIES[0]}: not a copy of plugins/claude/bin/kijito-pull-launch" in proc.stderr


@pytest.mark.parametrize("harness, hooks_file, root", [
    ("copilot", "plugins/copilot/hooks/hooks.json", "${PLUGIN_ROOT}"),
    ("gemini", "hooks/hooks.json", "${extensionPath}"),  # the Gemini CLI extension is the repository's root
])
def test_a_plugin_folders_hooks_are_the_ones_kijito_pull_install_writes(harness, hooks_file, root):
    import importlib

    installer = importlib.import_module(f"kijito_pull.harnesses.{harness}.installer")
    hooks = json.loads((REPO / hooks_file).read_text())
    kit = next(v for v in vars(installer).values() if type(v).__name__ == "SettingsHooks")
    assert kit.is_installed(hooks)
    expected = kit.with_ours({}, ["LAUNCHER"])
    for groups in expected["hooks"].values():
        for handler in (h for g in groups for h in g["hooks"]):  # the folder's own launcher, as the harness expands it
            handler["command"] = handler["command"].replace("LAUNCHER", f'"{root}/bin/kijito-pull-launch"', 1)
    assert hooks == expected


# -- the build ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """scripts/build-release's output folder (the same command the release workflow runs)."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, str(BUILD), "--out", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def index(release, tmp_path_factory) -> Path:
    """A folder of wheels standing in for PyPI: this build's wheel and every dependency's (with [redis])."""
    (wheel,) = release.glob("kijito_pull-*.whl")
    return wheel_index(wheel, tmp_path_factory.mktemp("index"))


def test_the_release_is_an_sdist_a_wheel_and_the_npm_package_with_their_sums(release):
    names = sorted(p.name for p in release.iterdir())
    assert names == sorted([f"kijito_pull-{__version__}-py3-none-any.whl", f"kijito_pull-{__version__}.tar.gz",
                            f"kijito-pull-{__version__}.tgz", "SHA256SUMS"])
    for line in (release / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        assert hashlib.sha256((release / name).read_bytes()).hexdigest() == digest
    # The wheel carries every plugin asset byte for byte, the launcher executable.
    with zipfile.ZipFile(release / f"kijito_pull-{__version__}-py3-none-any.whl") as zf:
        pf = plugin_files
        for bundle, names in ((pf.CLAUDE, pf.CLAUDE_FILES), (pf.PI, pf.PI_FILES), (pf.OPENCODE, pf.OPENCODE_FILES),
                              (pf.COPILOT, pf.COPILOT_FILES)):
            for rel in names:
                where = REPO / pf.IN_REPOSITORY.get(bundle, "")
                assert zf.read(f"kijito_pull/data/{bundle}/{rel}") == (where / rel).read_bytes()
        mode = zf.getinfo(f"kijito_pull/data/claude-plugin/{plugin_files.LAUNCHER}").external_attr >> 16
        assert mode & 0o111
        assert f"Version: {__version__}" in zf.read(f"kijito_pull-{__version__}.dist-info/METADATA").decode()


def test_the_release_workflow_builds_through_the_same_script():
    workflow = (REPO / ".github" / "workflows" / "release.yml").read_text()
    runs = [line.strip() for line in workflow.splitlines() if line.strip().startswith("run:")]
    assert "run: python scripts/build-release --out dist" in runs
    # No other build command of its own: what CI builds is what this script builds.
    assert not [r for r in runs if any(w in r for w in ("-m build", "uv build", "npm pack", "twine check"))]
    assert "pypa/gh-action-pypi-publish" in workflow and "id-token: write" in workflow
    assert "npm publish --provenance" in workflow


# -- a fresh install from the wheel, offline ---------------------------------------------------------------------


def fresh_venv(root: Path, index: Path, spec: str) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    proc = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
                           "--disable-pip-version-check", "--find-links", str(index), spec],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "bin"


def user_env(home: Path, *path: Path | str, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "PATH": os.pathsep.join([*map(str, path), SYSTEM_PATH]), "LANG": "C.UTF-8",
            "KIJITO_PULL_CONFIG": os.devnull, **extra}


@pytest.mark.parametrize("extra", ["", "[redis]"])
def test_the_wheel_installs_offline_and_its_first_commands_work(tmp_path, index, extra):
    bin_dir = fresh_venv(tmp_path / "venv", index, f"kijito-pull{extra}=={__version__}")
    env = user_env(tmp_path / "home", bin_dir)
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)

    def kp(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "kijito-pull"), *argv], capture_output=True, text=True, timeout=120,
                              env=env, cwd=project)

    assert kp("--version").stdout.strip() == f"kijito-pull {__version__}"
    doctor = kp("doctor")
    assert "harness.claude" in doctor.stdout and "Traceback" not in doctor.stderr, doctor.stdout + doctor.stderr
    dry = kp("install", "claude", "--dry-run")
    assert dry.returncode == 0 and "dry run" in dry.stdout, dry.stdout + dry.stderr
    demo = kp("demo")
    assert demo.returncode == 0 and "Traceback" not in demo.stderr, demo.stdout[-2000:] + demo.stderr[-2000:]
    has_redis = subprocess.run([str(bin_dir / "python"), "-c", "import redis"], capture_output=True).returncode == 0
    assert has_redis == bool(extra)


# -- the launcher ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def uv_dir(tmp_path_factory) -> Path:
    return uv_folder(tmp_path_factory.mktemp("uvbin"))


def uv_env(tmp_path: Path, index: Path) -> dict[str, str]:
    return wheelindex_uv_env(index, tmp_path / "uvcache")


def launch(env: dict[str, str], *argv: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(plugin_files.launcher()), *argv], input=stdin, capture_output=True, text=True,
                          timeout=180, env=env, cwd=cwd)


def test_the_launcher_runs_uvx_from_the_local_index_when_kijito_pull_is_not_on_path(tmp_path, index, uv_dir):
    env = user_env(tmp_path / "home", uv_dir, **uv_env(tmp_path, index))
    proc = launch(env, "--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"kijito-pull {__version__}"), proc.stderr
    # A hook through it, in a project that has not opted in: the harness's usual quiet success.
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    stdin = json.dumps({"session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart",
                        "transcript_path": str(tmp_path / "t.jsonl"), "source": "startup"})
    proc = launch(env, "hook", "claude-session-start", stdin=stdin, cwd=project)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_kijito_pull_on_path_that_fits_runs_and_one_too_old_hands_over_to_uvx(tmp_path, index, uv_dir):
    bin_dir = fresh_venv(tmp_path / "venv", index, f"kijito-pull=={__version__}")
    # It fits: it runs (no uv anywhere on this PATH).
    env = user_env(tmp_path / "home", bin_dir)
    proc = launch(env, "--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"kijito-pull {__version__}"), proc.stderr
    # The same installation, now an older release than the plugin's: it hands back to the launcher.
    (init,) = (tmp_path / "venv").glob("lib/python*/site-packages/kijito_pull/__init__.py")
    init.write_text(init.read_text().replace(f'"{__version__}"', '"0.0.1"'))
    # The edit keeps the file's size, and pip compiled it within the same second: Python would trust the old
    # bytecode (it checks mtime and size). Remove it so the edit is what runs.
    for cached in init.parent.glob("__pycache__/__init__.*.pyc"):
        cached.unlink()
    assert subprocess.run([str(bin_dir / "kijito-pull"), "--version"], capture_output=True, text=True,
                          env=env).stdout.strip() == "kijito-pull 0.0.1"
    env = user_env(tmp_path / "home", bin_dir, uv_dir, **uv_env(tmp_path, index))
    proc = launch(env, "--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"kijito-pull {__version__}"), proc.stderr
    # ... and without uv: the one line of advice, not the old program.
    proc = launch(user_env(tmp_path / "home", bin_dir), "hook", "claude-session-start", stdin="{}")
    assert proc.returncode == 127 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and f"uv tool install kijito-pull=={__version__}" in proc.stderr


def test_with_neither_kijito_pull_nor_uv_one_line_at_session_start_and_quiet_hooks_after(tmp_path):
    env = user_env(tmp_path / "home")
    start = launch(env, "hook", "claude-session-start", stdin="{}")
    assert start.returncode == 127 and start.stdout == ""
    assert start.stderr == (f"kijito-pull {__version__} is not installed, so the Kijito inbox is off: run "
                            f"`uv tool install kijito-pull=={__version__}` (or install uv: "
                            f"https://docs.astral.sh/uv/)\n")
    for hook in ("claude-stop", "claude-prompt", "claude-waker", "codex-stop", "gemini-after-agent"):
        proc = launch(env, "hook", hook, stdin="{}")
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), hook
    assert launch(env, "hook", "gemini-session-end", stdin="{}").returncode == 127
    assert launch(env, "optin", "--json").returncode == 127  # the JS plugins' own calls: they show the line
