"""The harnesses' doctor checks stand on kijito_pull.core.findings, below the doctor: no module under
kijito_pull/harnesses/ imports kijito_pull.doctor (which imports the harnesses), at any level."""

from __future__ import annotations

import ast
from pathlib import Path

import kijito_pull

HARNESSES = Path(kijito_pull.__file__).parent / "harnesses"


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_harness_module_imports_the_doctor():
    files = sorted(HARNESSES.rglob("*.py"))
    assert len(files) > 30
    offenders = {str(p.relative_to(HARNESSES)): sorted(n for n in imported(p) if n.startswith("kijito_pull.doctor"))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}
