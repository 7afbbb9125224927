"""The import rules of docs/architecture.md, enforced.

(i) The layers, read statically (every import in every file, function-level ones included):
    core/ imports nothing from sinks/, sources/, watch/, harnesses/ or cli/; sinks/ and sources/ import
    only core/; watch/ imports only core/ and sinks/; dashboard/ only core/ and watch/.
(ii) The hook fast gate imports only the standard library: a real `kijito-pull hook NAME` in a project
    that has not opted in, for every hook in the registry, loads no third-party module, nothing heavy
    from the standard library, and of kijito_pull only the gate itself and the registry's cheap parts.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kijito_pull.harnesses import registry

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "kijito_pull"

#: layer -> the kijito_pull layers it may import (besides itself and the package root's __version__).
LAYERS = {
    "core": set(),
    "sinks": {"core"},
    "sources": {"core"},
    "watch": {"core", "sinks"},
    "dashboard": {"core", "watch"},
}
GUARDED = ("core", "sinks", "sources", "watch", "dashboard", "harnesses", "cli")


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in `source` (the file of `module`), at any depth."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def _layer_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "kijito_pull" and parts[1] in GUARDED else None


def violations(layer: str) -> list[str]:
    allowed = LAYERS[layer] | {layer}
    out = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for line, name in imported_modules(path.read_text("utf-8"), module, rel.name == "__init__"):
            other = _layer_of(name)
            if other is not None and other not in allowed:
                out.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return sorted(set(out))


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_imports_only_what_is_below_it(layer):
    assert (PACKAGE / layer).is_dir()
    assert violations(layer) == []


def test_the_import_reader_sees_every_kind_of_import():
    """The checker itself: function-level, relative and from-imports are all seen."""
    source = ("import os\n"
              "def late():\n"
              "    from kijito_pull.cli import main\n"
              "    import kijito_pull.harnesses.hookgate\n"
              "class K:\n"
              "    def m(self):\n"
              "        from ..watch import loop\n"
              "from . import render\n")
    names = [name for _line, name in imported_modules(source, "kijito_pull.core.engine")]
    assert "kijito_pull.cli" in names and "kijito_pull.harnesses.hookgate" in names
    assert "kijito_pull.watch.loop" in names and "kijito_pull.core.render" in names
    assert {_layer_of(n) for n in names} >= {"cli", "harnesses", "watch", "core"}


# -- (ii) the hook fast gate ---------------------------------------------------------------------------

#: kijito_pull modules the gate may load for a project that has not opted in: the console entry's first
#: import, the launcher's version check, the gate, the registry, the contract and the hook's own harness
#: package (its __init__ only).
GATE_MODULES = {"kijito_pull", "kijito_pull.cli", "kijito_pull.cli.early", "kijito_pull.harnesses",
                "kijito_pull.harnesses.launcher",
                "kijito_pull.harnesses.hookgate", "kijito_pull.harnesses.registry", "kijito_pull.harnesses.base"}
#: Standard-library modules that cost real time to import and have no business in the gate.
HEAVY_STDLIB = ("argparse", "typing", "dataclasses", "enum", "subprocess", "socket", "ssl", "http.client",
                "importlib.metadata", "datetime", "pathlib", "threading", "logging")

PROBE = """\
import json, sys
sys.argv = ['kijito-pull', 'hook', sys.argv[1]]
try:
    import kijito_pull.cli.main
except SystemExit as exc:
    code = exc.code
else:
    code = 'no exit'
print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)
"""


def _stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names or name.split(".")[0] in sys.builtin_module_names


@pytest.mark.skipif(sys.version_info < (3, 10), reason="sys.stdlib_module_names is Python 3.10+")
@pytest.mark.parametrize("hook", registry.hook_names())
def test_the_hook_gate_imports_only_the_standard_library(hook, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / ".git").mkdir()
    (plain / "AGENTS.md").write_text("# A project that did not opt in\n")
    harness, _entry = registry.find_hook(hook)
    # What Python loads before any of our code (site, encodings, ...): not ours to judge.
    baseline = set(json.loads(subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps("
                                                                    "sorted(sys.modules)))"],
                                             capture_output=True, text=True, check=True).stdout))
    proc = subprocess.run([sys.executable, "-c", PROBE, hook], input=json.dumps({"cwd": str(plain)}),
                          capture_output=True, text=True, cwd=plain, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    assert proc.stdout == harness.nothing
    loaded = set(report["modules"]) - baseline
    ours = {m for m in loaded if m == "kijito_pull" or m.startswith("kijito_pull.")}
    assert ours <= GATE_MODULES | {registry.HARNESSES[harness.name]}, sorted(ours)
    foreign = sorted(m for m in loaded - ours if not _stdlib(m))
    assert foreign == [], foreign
    heavy = sorted(m for m in HEAVY_STDLIB if m in loaded)
    assert heavy == [], heavy
