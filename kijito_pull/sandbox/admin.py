"""The /_sandbox/* admin endpoints: the Python API's operations for a sandbox in another process.

Token-protected like the API, but never logged, never faulted and not behind the mimicked WAF.

    POST /_sandbox/send       {to, from?, content, urgent?, created?} -> {"result": {"id", "to"}}
    POST /_sandbox/personas   {persona, memory_count?}       -> {"result": {"persona", "memory_count"}}
    POST /_sandbox/mark_read  {persona, ids?: [int] | null}  -> {"result": {"marked": n}}
    GET  /_sandbox/faults                                    -> {"result": [rule, ...]}
    POST /_sandbox/faults     rule | {"clear": true}         -> {"result": {"faults": n}}
    GET  /_sandbox/requests                                  -> {"result": [entry, ...]}
    POST /_sandbox/requests   {"clear": true}                -> {"result": {"requests": 0}}
    GET  /_sandbox/window                                    -> {"result": {"limit", "content_budget"}}
    POST /_sandbox/window     {limit?, content_budget?}      -> same
"""

from __future__ import annotations

from typing import Any

from kijito_pull.sandbox.api import ApiError, Reply, error_body, parse_json_object, parse_send


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _window(sandbox: Any) -> dict[str, Any]:
    limit, budget = sandbox.window()
    return {"result": {"limit": limit, "content_budget": budget}}


def route(sandbox: Any, method: str, path: str, body: bytes) -> Reply:
    try:
        return _route(sandbox, method, path, body)
    except ApiError as exc:
        return exc.status, error_body(exc.message)
    except ValueError as exc:
        return 400, error_body(str(exc))


def _route(sandbox: Any, method: str, path: str, body: bytes) -> Reply:
    if method == "GET":
        if path == "/_sandbox/requests":
            return 200, {"result": sandbox.requests}
        if path == "/_sandbox/faults":
            return 200, {"result": sandbox.faults.rules()}
        if path == "/_sandbox/window":
            return 200, _window(sandbox)
        return 404, error_body(f"not found: {method} {path}")
    if method != "POST":
        return 404, error_body(f"not found: {method} {path}")

    data = parse_json_object(body)
    if path == "/_sandbox/send":
        fields = parse_send(data, sandbox.identity)
        created = data.get("created")
        if created is not None and not isinstance(created, str):
            raise ApiError(400, "'created' must be a string")
        mid = sandbox.send(
            to=fields["to"], sender=fields["sender"], content=fields["content"],
            urgent=fields["urgent"], created=created,
        )
        return 200, {"result": {"id": mid, "to": fields["to"]}}
    if path == "/_sandbox/personas":
        persona = data.get("persona")
        count = data.get("memory_count", 0)
        if not isinstance(persona, str) or not persona:
            raise ApiError(400, "'persona' must be a non-empty string")
        if not _is_int(count) or count < 0:
            raise ApiError(400, "'memory_count' must be a non-negative integer")
        sandbox.add_persona(persona, memory_count=count)
        return 200, {"result": {"persona": persona, "memory_count": count}}
    if path == "/_sandbox/mark_read":
        persona = data.get("persona")
        ids = data.get("ids")
        if not isinstance(persona, str) or not persona:
            raise ApiError(400, "'persona' must be a non-empty string")
        if ids is not None and (not isinstance(ids, list) or not all(_is_int(i) for i in ids)):
            raise ApiError(400, "'ids' must be a list of integers or null")
        return 200, {"result": {"marked": sandbox.mark_read(persona, ids)}}
    if path == "/_sandbox/faults":
        if data.get("clear") is True and len(data) == 1:
            sandbox.clear_faults()
        else:
            sandbox.add_fault(data)
        return 200, {"result": {"faults": len(sandbox.faults.rules())}}
    if path == "/_sandbox/requests":
        if data.get("clear") is not True:
            raise ApiError(400, 'expected {"clear": true}')
        sandbox.clear_requests()
        return 200, {"result": {"requests": 0}}
    if path == "/_sandbox/window":
        limit = data.get("limit")
        budget = data.get("content_budget")
        sandbox.set_window(limit=limit, content_budget=budget)
        return 200, _window(sandbox)
    return 404, error_body(f"not found: {method} {path}")
