"""Run the pi extension's unit tests (extensions/test/*.test.mjs, node's built-in test runner) as part
of the Python suite, so `python3 scripts/dev.py test` covers the TypeScript side too.

They load extensions/kijito-pull.ts through Node's type stripping, which needs Node >= 22.6: the
system node when it is new enough, else the Node 22 that scripts/install-harnesses puts under
.harness/. Without either the test is skipped, except under KIJITO_PULL_REQUIRE_E2E=1 (CI), where
it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.required import missing

ROOT = Path(__file__).resolve().parents[1]
TESTS = sorted((ROOT / "extensions" / "test").glob("*.test.mjs"))
MIN_NODE = (22, 6)  # --experimental-strip-types


def _version(node: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.(\d+)", out.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def _node() -> str | None:
    candidates = [shutil.which("node")]
    try:
        from tests.e2e.harness import node22

        found = node22()
        candidates.append(str(found) if found else None)
    except ImportError:
        pass
    for node in candidates:
        if node and (_version(node) or (0,)) >= MIN_NODE:
            return node
    return None


def test_extension_unit_tests_pass_under_node_test_runner() -> None:
    assert TESTS, "no extensions/test/*.test.mjs found"
    node = _node()
    if node is None:
        missing(f"no node >= {MIN_NODE[0]}.{MIN_NODE[1]} (system node or .harness/node22; "
                "run scripts/install-harnesses) to run the pi extension's unit tests")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIJITO", "PI_"))}
    env["NODE_NO_WARNINGS"] = "1"
    proc = subprocess.run(
        [node, "--test", "--experimental-strip-types", *map(str, TESTS)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    summary = "\n".join(line for line in proc.stdout.splitlines() if line.startswith("# "))
    assert proc.returncode == 0, f"node --test failed ({node}):\n{proc.stdout[-8000:]}\n{proc.stderr[-3000:]}"
    assert re.search(r"^# fail 0$", proc.stdout, re.MULTILINE), summary
    assert re.search(r"^# pass [1-9]", proc.stdout, re.MULTILINE), summary
