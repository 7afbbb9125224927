"""Fault injection: rules that make the sandbox fail, hang, or lie, so clients can be tested honestly.

A rule is a plain dict::

    {"kind": "status" | "hang" | "reset" | "close" | "body" | "mutate" | "huge",
     "path": "/api/inbox",   # optional prefix match; default: any /api path ("/api/inbox" for mutate)
     "persona": "P",         # optional exact match on the `persona` query parameter
     "backward": True,       # optional: only requests with (True) / without (False) `before_id`
     "times": 2,             # optional: apply to the next N matching requests; default forever
     ...kind parameters...}

Kind parameters:
    status  {"status": 503, "body": str?, "headers": {str: str}?}
    hang    {"seconds": 30}                        sleep, then answer normally
    reset   {}                                     abort the TCP connection with RST, no answer
    close   {}                                     close the connection cleanly, no answer
    body    {"body": "<raw text>", "status": 200, "headers": {...}?}
    mutate  {"set": {field: value}, "delete": [field], "rows": transform or [transforms],
             "row_set": {field: value}}
            applied to the real 200 envelope; transforms: id_string, id_bool, dup_first,
            row_not_object, result_not_list, drop_oldest, id_overflow (the newest row's id
            becomes 2**63, one past what the contract accepts); row_set sets fields on every row
            (e.g. {"persona": "mallory"}: an answer about another inbox)
    huge    {"bytes": N}                           200 with an N-byte body; omit for endless

Rules are checked in order; the first match applies (and spends one of its `times`).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

KINDS = ("status", "hang", "reset", "close", "body", "mutate", "huge")
ROW_TRANSFORMS = ("id_string", "id_bool", "dup_first", "row_not_object", "result_not_list", "drop_oldest",
                  "id_overflow")

_COMMON_KEYS = {"kind", "path", "persona", "backward", "times"}
_KIND_KEYS = {
    "status": {"status", "body", "headers"},
    "hang": {"seconds"},
    "reset": set(),
    "close": set(),
    "body": {"body", "status", "headers"},
    "mutate": {"set", "delete", "rows", "row_set"},
    "huge": {"bytes"},
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_rule(rule: Any) -> dict[str, Any]:
    """Check a rule and return a normalized private copy; raise ValueError saying what is wrong."""
    if not isinstance(rule, Mapping):
        raise ValueError("a fault rule must be an object")
    kind = rule.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(KINDS)}")
    unknown = set(rule) - _COMMON_KEYS - _KIND_KEYS[kind]
    if unknown:
        raise ValueError(f"unknown key(s) for a {kind} fault: {', '.join(sorted(map(str, unknown)))}")
    out: dict[str, Any] = copy.deepcopy(dict(rule))
    out.setdefault("path", "/api/inbox" if kind == "mutate" else "/api")
    if not isinstance(out["path"], str) or not out["path"].startswith("/"):
        raise ValueError("path must be a string starting with '/'")
    if out["path"].startswith("/_sandbox"):
        raise ValueError("admin paths cannot carry faults")
    if "persona" in out and not isinstance(out["persona"], str):
        raise ValueError("persona must be a string")
    if "backward" in out and not isinstance(out["backward"], bool):
        raise ValueError("backward must be a boolean")
    if "times" in out and (not _is_int(out["times"]) or out["times"] < 0):
        raise ValueError("times must be a non-negative integer")
    if "headers" in out:
        headers = out["headers"]
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ValueError("headers must map strings to strings")
    if "body" in out and not isinstance(out["body"], str):
        raise ValueError("body must be a string")
    if kind == "status":
        if not _is_int(out.get("status")) or not 200 <= out["status"] <= 599:
            raise ValueError("a status fault needs an integer status between 200 and 599")
    elif kind == "body":
        if "body" not in out:
            raise ValueError("a body fault needs a body")
        out.setdefault("status", 200)
        if not _is_int(out["status"]) or not 200 <= out["status"] <= 599:
            raise ValueError("status must be an integer between 200 and 599")
    elif kind == "hang":
        seconds = out.get("seconds", 30)
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
            raise ValueError("seconds must be a non-negative number")
        out["seconds"] = float(seconds)
    elif kind == "huge":
        if "bytes" in out and (not _is_int(out["bytes"]) or out["bytes"] < 0):
            raise ValueError("bytes must be a non-negative integer")
    elif kind == "mutate":
        for key in ("set", "row_set"):
            if key in out and not isinstance(out[key], Mapping):
                raise ValueError(f"{key} must be an object")
        if "delete" in out and (
            not isinstance(out["delete"], list) or not all(isinstance(f, str) for f in out["delete"])
        ):
            raise ValueError("delete must be a list of field names")
        if "rows" in out:
            transforms = out["rows"] if isinstance(out["rows"], list) else [out["rows"]]
            for t in transforms:
                if t not in ROW_TRANSFORMS:
                    expected = ", ".join(ROW_TRANSFORMS)
                    raise ValueError(f"unknown rows transform {t!r}; expected one of {expected}")
            out["rows"] = transforms
    return out


class FaultBook:
    """The ordered, thread-safe list of active rules."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[dict[str, Any]] = []

    def add(self, rule: Any) -> None:
        checked = validate_rule(rule)
        if checked.get("times", 1) == 0:
            return  # already spent: it would never apply
        with self._lock:
            self._rules.append(checked)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._rules)

    def take(self, path: str, query: Mapping[str, str]) -> dict[str, Any] | None:
        """The first rule matching this request, spending one of its `times`; None if none match."""
        with self._lock:
            for rule in self._rules:
                if not _matches(rule, path, query):
                    continue
                if "times" in rule:
                    if rule["times"] <= 0:
                        continue
                    rule["times"] -= 1
                found = copy.deepcopy(rule)
                self._rules = [r for r in self._rules if r.get("times", 1) > 0]
                return found
        return None


def _matches(rule: Mapping[str, Any], path: str, query: Mapping[str, str]) -> bool:
    if not path.startswith(rule["path"]):
        return False
    if "persona" in rule and query.get("persona") != rule["persona"]:
        return False
    if "backward" in rule and ("before_id" in query) != rule["backward"]:
        return False
    return True


def apply_mutation(rule: Mapping[str, Any], envelope: dict[str, Any]) -> dict[str, Any]:
    """Make a real response envelope lie: rows transforms first, then `row_set`, `set`, then `delete`."""
    env = copy.deepcopy(envelope)
    for transform in rule.get("rows", []):
        _transform_rows(env, transform)
    rows = env.get("result")
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, dict):
            row.update(copy.deepcopy(dict(rule.get("row_set", {}))))
    for key, value in dict(rule.get("set", {})).items():
        env[key] = copy.deepcopy(value)
    for key in rule.get("delete", []):
        env.pop(key, None)
    return env


def _transform_rows(env: dict[str, Any], transform: str) -> None:
    rows = env.get("result")
    if not isinstance(rows, list):
        return
    if transform == "result_not_list":
        env["result"] = {str(r.get("id")) if isinstance(r, dict) else str(i): r for i, r in enumerate(rows)}
        return
    if not rows:
        return
    first = rows[0]
    if transform == "drop_oldest":
        # result is sorted by id ascending, so the oldest row is the first one.
        del rows[0]
    elif transform == "dup_first":
        rows.insert(1, copy.deepcopy(first))
    elif transform == "row_not_object":
        rows[0] = list(first.values()) if isinstance(first, dict) else [first]
    elif isinstance(first, dict) and transform == "id_string":
        first["id"] = str(first.get("id"))
    elif isinstance(first, dict) and transform == "id_bool":
        first["id"] = True
    elif transform == "id_overflow" and isinstance(rows[-1], dict):
        rows[-1]["id"] = 2**63
