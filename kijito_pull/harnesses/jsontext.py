"""Edit JSON text in place: add members and items where they belong and leave every other byte alone.

`patch(text, old, new)` turns `text` (which parses to `old`) into text that parses to `new`, when
`new` only adds object members and list items to `old` or replaces values: the user's own line
breaks, inline objects, spacing and key order stay as they were, and the diff is only our part.
Anything else (a removal, a reordering) returns None and the caller writes the whole file again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WS = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


@dataclass
class Node:
    """One JSON value's place in the text (start, end, kind) and, for a container, its members or items,
    so an edit can change one value and keep every other byte."""

    start: int
    end: int  # one past the value's last character
    kind: str  # "object" | "array" | "scalar"
    members: list[tuple[str, Node]] = field(default_factory=list)  # objects: (key, value) in text order
    key_starts: list[int] = field(default_factory=list)  # objects: where each member's key begins
    items: list[Node] = field(default_factory=list)  # arrays


class _Unparsable(Exception):
    pass


def _ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]


def _value(text: str, pos: int) -> Node:
    pos = _ws(text, pos)
    if pos >= len(text):
        raise _Unparsable
    ch = text[pos]
    if ch == "{":
        node = Node(pos, pos, "object")
        pos = _ws(text, pos + 1)
        if text[pos:pos + 1] == "}":
            node.end = pos + 1
            return node
        while True:
            match = _STRING.match(text, pos)
            if not match:
                raise _Unparsable
            key = json.loads(match.group(0))
            node.key_starts.append(pos)
            pos = _ws(text, match.end())
            if text[pos:pos + 1] != ":":
                raise _Unparsable
            child = _value(text, pos + 1)
            node.members.append((key, child))
            pos = _ws(text, child.end)
            if text[pos:pos + 1] == ",":
                pos = _ws(text, pos + 1)
                continue
            if text[pos:pos + 1] == "}":
                node.end = pos + 1
                return node
            raise _Unparsable
    if ch == "[":
        node = Node(pos, pos, "array")
        pos = _ws(text, pos + 1)
        if text[pos:pos + 1] == "]":
            node.end = pos + 1
            return node
        while True:
            child = _value(text, pos)
            node.items.append(child)
            pos = _ws(text, child.end)
            if text[pos:pos + 1] == ",":
                pos += 1
                continue
            if text[pos:pos + 1] == "]":
                node.end = pos + 1
                return node
            raise _Unparsable
    match = _STRING.match(text, pos) if ch == '"' else _SCALAR.match(text, pos)
    if not match:
        raise _Unparsable
    return Node(pos, match.end(), "scalar")


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    return _WS.match(text, start).group(0).replace("\n", "").replace("\r", "")  # type: ignore[union-attr]


def _dump(value: Any, unit: str | None, indent: str) -> str:
    """`value` as JSON text: multi-line (continuation lines under `indent`) when `unit` is set, else inline."""
    if unit is None:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=unit).replace("\n", "\n" + indent)


class _Patch:
    def __init__(self, text: str, unit: str):
        self.text = text
        self.unit = unit
        self.multiline = "\n" in text.strip() or not text.strip("{}[] \t\r\n")
        self.edits: list[tuple[int, int, str]] = []  # (start, end, replacement) on the original text

    def node(self, node: Node, old: Any, new: Any) -> None:
        if old == new:
            return
        if node.kind == "object" and isinstance(old, dict) and isinstance(new, dict):
            keys = [k for k, _ in node.members]
            if len(set(keys)) != len(keys) or any(k not in new for k in keys):
                raise _Unparsable  # duplicate keys or a removal: rewrite the whole file
            for key, child in node.members:
                self.node(child, old[key], new[key])
            added = [(k, v) for k, v in new.items() if k not in old]
            self.append(node, [f"{json.dumps(k, ensure_ascii=False)}: " for k, _ in added], [v for _, v in added],
                        bool(node.members))
            return
        if node.kind == "array" and isinstance(old, list) and isinstance(new, list) and new[:len(old)] == old:
            self.append(node, ["" for _ in new[len(old):]], new[len(old):], bool(node.items))
            return
        if node.kind == "array" and isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
            for child, a, b in zip(node.items, old, new):
                self.node(child, a, b)
            return
        multi = "\n" in self.text[node.start:node.end] or node.kind != "scalar"
        indent = _line_indent(self.text, node.start)
        self.edits.append((node.start, node.end, _dump(new, self.unit if multi else None, indent)))

    def append(self, node: Node, prefixes: list[str], values: list[Any], nonempty: bool) -> None:
        if not values:
            return
        inner = self.text[node.start + 1:node.end - 1]
        close = node.end - 1
        if not nonempty:  # {} or []: laid out like the document around it
            if self.multiline:
                outer = _line_indent(self.text, node.start)
                indent = outer + self.unit
                body = ",\n".join(f"{indent}{p}{_dump(v, self.unit, indent)}" for p, v in zip(prefixes, values))
                self.edits.append((node.start + 1, close, f"\n{body}\n{outer}"))
                return
            at = node.start + 1
            text = ", ".join(f"{p}{_dump(v, None, '')}" for p, v in zip(prefixes, values))
        elif "\n" in inner:
            last = node.members[-1][1] if node.kind == "object" else node.items[-1]
            indent = _line_indent(self.text, node.key_starts[-1] if node.kind == "object" else last.start)
            at = last.end
            text = "".join(f",\n{indent}{p}{_dump(v, self.unit, indent)}" for p, v in zip(prefixes, values))
        else:
            last = node.members[-1][1] if node.kind == "object" else node.items[-1]
            at = last.end
            text = "".join(f", {p}{_dump(v, None, '')}" for p, v in zip(prefixes, values))
        self.edits.append((at, at, text))

    def result(self) -> str:
        out = self.text
        for start, end, replacement in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            out = out[:start] + replacement + out[end:]
        return out


def patch(text: str, old: Any, new: Any, unit: str | int = 2) -> str | None:
    """`text` (which parses to `old`) edited to parse to `new`, changing as little as possible; None
    when that cannot be done by additions and replacements (the caller rewrites the whole file)."""
    try:
        root = _value(text, 0)
        if text[_ws(text, root.end):].strip():
            return None
        editor = _Patch(text, unit if isinstance(unit, str) else " " * unit)
        editor.node(root, old, new)
        out = editor.result()
    except (_Unparsable, ValueError, RecursionError):
        return None
    try:
        if json.loads(out) != new:
            return None
    except ValueError:
        return None
    return out
