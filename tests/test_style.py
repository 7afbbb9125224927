"""The house rules of docs/architecture.md that a reader cannot see at a glance, enforced statically: no
package module past 600 lines, no private name of one kijito_pull module used from another (imported, or
reached as `module._name`), and a docstring on every public class."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kijito_pull"
MAX_LINES = 600
MODULES = sorted(PACKAGE.rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def crossings(source: str) -> list[str]:
    """Each use of another kijito_pull module's private name in `source`: `from kijito_pull.x import _y`,
    and `x._y` where `x` was imported as a kijito_pull module."""
    tree = ast.parse(source)
    modules: set[str] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kijito_pull"):
            for alias in node.names:
                if _private(alias.name):
                    out.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                else:
                    modules.add(alias.asname or alias.name)  # maybe a module (from kijito_pull.core import api)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kijito_pull"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) \
                and node.value.id in modules:
            out.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_package_module_is_longer_than_600_lines(path):
    lines = path.read_text("utf-8").count("\n")
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines: split it by what its parts do"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_uses_another_modules_private_names(path):
    assert crossings(path.read_text("utf-8")) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_public_class_says_what_it_is(path):
    tree = ast.parse(path.read_text("utf-8"))
    bare = [node.name for node in tree.body if isinstance(node, ast.ClassDef) and not _private(node.name)
            and ast.get_docstring(node) is None]
    assert bare == [], f"{path.relative_to(PACKAGE)}: classes without a docstring: {bare}"


def test_the_checks_find_what_they_look_for():
    """The readers above are not blind: each catches its case in a made-up module."""
    source = ("from kijito_pull.core import state\nfrom kijito_pull.core.render import _fit\n"
              "import kijito_pull.core.api\nstate._atomic_write('x')\nstate.save()\n")
    assert crossings(source) == ["line 2: from kijito_pull.core.render import _fit",
                                 "line 4: state._atomic_write"]
