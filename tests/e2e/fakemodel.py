"""A fake model server on loopback for driving real agent harnesses offline.

Answers, on 127.0.0.1 (random port unless one is given):

- ``POST /v1/messages``               Anthropic Messages API, SSE when ``"stream": true``, else JSON
- ``POST /v1/messages/count_tokens``  ``{"input_tokens": N}``
- ``POST /v1/chat/completions``       OpenAI-style, SSE when ``"stream": true``, else JSON (Copilot CLI with
                                      ``COPILOT_PROVIDER_BASE_URL``, OpenCode's openai-compatible provider)
- ``POST /v1/responses``              OpenAI Responses API (Codex's ``wire_api = "responses"``), SSE
- ``POST /v1beta/models/M:streamGenerateContent``  Gemini API (Gemini CLI), SSE (one event per answer)
- ``POST /v1beta/models/M:generateContent``        Gemini API, JSON (Gemini CLI's side requests)
- anything else (any method, including Claude Code's ``HEAD /`` preflight): ``200 {}``

A reply is a short assistant text (``"ok"`` by default) ending the turn (``end_turn`` / ``stop``),
or, on the Anthropic API, a tool call (``ToolUse("Bash", {"command": "sleep 3"})``, ``stop_reason``
``tool_use``) that keeps a harness busy running the tool and asking again. Every request is
recorded (in memory, thread-safe, and optionally appended to a JSONL file) so a test can prove that
some text reached the model::

    with FakeModel() as fm:
        run_harness(base_url=fm.url)
        req = fm.wait_for(lambda r: "MARKER" in fm.text_of(r), timeout=10)
        assert req is not None

Standalone: ``python3 -m tests.e2e.fakemodel --port 8999 --log /tmp/requests.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

__all__ = ["FakeModel", "ToolUse", "text_of", "tool_results", "MODEL_PATHS"]

MODEL_PATHS = ("/v1/messages", "/v1/chat/completions", "/v1/responses", ":streamGenerateContent", ":generateContent")

# Keys whose string values are metadata, not text the model reads.
_NON_TEXT_KEYS = frozenset({"type", "id", "tool_use_id", "role", "cache_control", "signature", "media_type", "model"})



class ToolUse:
    """A reply that calls a tool (the Anthropic Messages API, and streamed OpenAI chat completions as one
    function call; the other routes answer its ``text``).

    ``text`` is an optional text block said before the call."""

    def __init__(self, name: str, input: dict[str, Any], text: str = "") -> None:  # noqa: A002 - the API's name
        self.name = name
        self.input = dict(input)
        self.text = text

    def __repr__(self) -> str:
        return f"ToolUse({self.name!r}, {self.input!r})"


Answer = Union[str, ToolUse]
Reply = Union[Answer, Callable[[dict], Answer]]


def tool_results(request: dict) -> list[dict]:
    """The ``tool_result`` blocks of the request's last message (what the harness ran since the last reply)."""
    body = request.get("body")
    messages = body.get("messages") if isinstance(body, dict) else None
    if not messages or not isinstance(messages[-1].get("content"), list):
        return []
    return [b for b in messages[-1]["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def _strings(node: Any, out: list[str]) -> None:
    if isinstance(node, str):
        out.append(node)
    elif isinstance(node, list):
        for item in node:
            _strings(item, out)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in _NON_TEXT_KEYS and isinstance(value, str):
                continue
            _strings(value, out)


def text_of(request: dict) -> str:
    """All text the model would read in ``request``, flattened and newline-joined.

    Covers the system prompt (string or blocks), every message's content (strings, text blocks,
    tool_use inputs, tool_result contents) for the Anthropic, OpenAI and Gemini shapes. Tool
    *definitions* are left out: they are the harness's, not the conversation's.
    """
    body = request.get("body")
    if not isinstance(body, dict):
        return ""
    out: list[str] = []
    for key in ("system", "instructions", "messages", "input", "prompt", "systemInstruction", "contents"):
        if key in body:
            _strings(body[key], out)
    return "\n".join(out)


def _block_events(blocks: list[dict]) -> list[tuple[str, dict]]:
    """The SSE events that stream ``blocks`` (text and tool_use content blocks)."""
    events: list[tuple[str, dict]] = []
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    return events


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, sock: socket.socket, model: FakeModel):
        # bind_and_activate=False: the socket is made (and bound, maybe inside a network
        # namespace) by the caller.
        super().__init__(sock.getsockname()[:2], _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.server_address = sock.getsockname()[:2]
        self.model = model

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Harnesses drop keep-alive connections when they exit: not worth a traceback.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    # -- plumbing ------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _send(self, status: int, body: bytes, content_type: str, head_only: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if content_type.startswith("text/event-stream"):
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if not head_only:
            self.wfile.write(body)
            self.wfile.flush()

    def _json(self, obj: Any, status: int = 200, head_only: bool = False) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", head_only)

    def _handle(self, head_only: bool = False) -> None:
        raw = self._read_body()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        path = self.path.split("?", 1)[0]
        request = self.server.model._record(self.command, path, self.path, dict(self.headers.items()), body, raw)
        if self.command == "POST" and path.endswith("/v1/messages/count_tokens"):
            self._json({"input_tokens": max(1, len(text_of(request)) // 4)})
        elif self.command == "POST" and path.endswith("/v1/messages"):
            self._anthropic(request)
        elif self.command == "POST" and path.endswith("/chat/completions"):
            self._openai(request)
        elif self.command == "POST" and path.endswith("/responses"):
            self._responses(request)
        elif self.command == "POST" and path.endswith((":streamGenerateContent", ":generateContent")):
            self._gemini(request, stream=path.endswith(":streamGenerateContent"))
        else:
            self._json({}, head_only=head_only)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _handle

    def do_HEAD(self) -> None:
        self._handle(head_only=True)

    # -- Anthropic Messages API ----------------------------------------------------------------
    def _anthropic(self, request: dict) -> None:
        body = request["body"] if isinstance(request["body"], dict) else {}
        answer = self.server.model._reply_for(request)
        call = answer if isinstance(answer, ToolUse) else None
        text = call.text if call is not None else str(answer)
        stop_reason = "tool_use" if call is not None else "end_turn"
        blocks: list[dict] = []
        if text or call is None:
            blocks.append({"type": "text", "text": text})
        if call is not None:
            blocks.append({"type": "tool_use", "id": "toolu_fake_" + uuid.uuid4().hex[:20], "name": call.name,
                           "input": call.input})
        model = body.get("model", "fake-model")
        msg_id = "msg_fake_" + uuid.uuid4().hex[:20]
        in_tokens = max(1, len(text_of(request)) // 4)
        usage = {
            "input_tokens": in_tokens,
            "output_tokens": max(1, len(text) // 4),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        if not body.get("stream"):
            self._json(
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
            return
        events = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": dict(usage, output_tokens=1),
                    },
                },
            ),
            ("ping", {"type": "ping"}),
            *_block_events(blocks),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        sse = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
        self._send(200, sse.encode(), "text/event-stream; charset=utf-8")

    # -- OpenAI chat completions ---------------------------------------------------------------
    def _openai(self, request: dict) -> None:
        body = request["body"] if isinstance(request["body"], dict) else {}
        answer = self.server.model._reply_for(request)
        text = answer.text if isinstance(answer, ToolUse) else str(answer)
        model = body.get("model", "fake-model")
        cid = "chatcmpl-fake" + uuid.uuid4().hex[:16]
        created = int(time.time())
        usage = {"prompt_tokens": max(1, len(text_of(request)) // 4), "completion_tokens": max(1, len(text) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not body.get("stream"):
            self._json(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                    ],
                    "usage": usage,
                }
            )
            return

        def chunk(delta: dict, finish: str | None, **extra: Any) -> str:
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            return f"data: {json.dumps(obj)}\n\n"

        if isinstance(answer, ToolUse):  # one function call: the harness runs it and asks again
            call = {"index": 0, "id": "call_fake_" + uuid.uuid4().hex[:16], "type": "function",
                    "function": {"name": answer.name, "arguments": json.dumps(answer.input)}}
            end = chunk({"tool_calls": [call]}, None) + chunk({}, "tool_calls", usage=usage)
        else:
            end = chunk({}, "stop", usage=usage)
        sse = (
            chunk({"role": "assistant", "content": ""}, None)
            + (chunk({"content": text}, None) if text else "")
            + end
            + "data: [DONE]\n\n"
        )
        self._send(200, sse.encode(), "text/event-stream; charset=utf-8")


    # -- OpenAI Responses API (Codex) ------------------------------------------------------------
    def _responses(self, request: dict) -> None:
        """The streaming events Codex needs: created, one assistant message item, completed (with usage)."""
        answer = self.server.model._reply_for(request)
        text = answer.text if isinstance(answer, ToolUse) else str(answer)
        rid = "resp_fake" + uuid.uuid4().hex[:16]
        item = {"type": "message", "role": "assistant", "id": "msg_fake" + uuid.uuid4().hex[:16],
                "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
        usage = {"input_tokens": max(1, len(text_of(request)) // 4), "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": max(1, len(text) // 4), "output_tokens_details": {"reasoning_tokens": 0}}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        events = [
            {"type": "response.created", "response": {"id": rid, "status": "in_progress", "output": []}},
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "status": "in_progress",
                                                                                 "content": []}},
            {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "item_id": item["id"],
             "delta": text},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"id": rid, "status": "completed", "output": [item],
                                                        "usage": usage}},
        ]
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        self._send(200, sse.encode(), "text/event-stream; charset=utf-8")


    # -- Gemini API (Gemini CLI) ------------------------------------------------------------------
    def _gemini(self, request: dict, *, stream: bool) -> None:
        """One candidate with the answer's text, finished (``STOP``), with usage: one SSE event when
        streaming (``?alt=sse``), else the same object as JSON."""
        answer = self.server.model._reply_for(request)
        text = answer.text if isinstance(answer, ToolUse) else str(answer)
        prompt_tokens = max(1, len(text_of(request)) // 4)
        out_tokens = max(1, len(text) // 4)
        obj = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": out_tokens,
                              "totalTokenCount": prompt_tokens + out_tokens},
        }
        if not stream:
            self._json(obj)
            return
        self._send(200, f"data: {json.dumps(obj)}\n\n".encode(), "text/event-stream; charset=utf-8")


class FakeModel:
    """The fake model server. ``start()`` it (or use it as a context manager), point a harness at
    ``url``, then inspect ``requests``.

    ``reply`` is the assistant text (default ``"ok"``), a ``ToolUse``, or a callable
    ``(request) -> str | ToolUse``.
    ``log_path`` appends every request as one JSON line. ``bind`` is an optional callable that
    returns a bound, listening socket: tests use it to put the server inside a network namespace
    (see ``tests.e2e.harness.NetNS.listen``).
    """

    def __init__(
        self,
        reply: Reply = "ok",
        *,
        port: int = 0,
        log_path: str | None = None,
        bind: Callable[[int], socket.socket] | None = None,
    ):
        self.reply = reply
        self.port = port
        self.log_path = log_path
        self._bind = bind
        self._requests: list[dict] = []
        self._cond = threading.Condition()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> FakeModel:
        if self._server is not None:
            return self
        if self._bind is not None:
            sock = self._bind(self.port)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self.port))
            sock.listen(64)
        self._server = _Server(sock, self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name=f"fakemodel:{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- recording -----------------------------------------------------------------------------
    def _record(self, method: str, path: str, full_path: str, headers: dict, body: Any, raw: bytes) -> dict:
        with self._cond:
            request = {
                "index": len(self._requests),
                "time": time.time(),
                "method": method,
                "path": path,
                "full_path": full_path,
                "headers": headers,
                "body": body,
            }
            if body is None and raw:
                request["raw"] = raw.decode("utf-8", "replace")
            self._requests.append(request)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(request) + "\n")
            self._cond.notify_all()
        return request

    def _reply_for(self, request: dict) -> Answer:
        return self.reply(request) if callable(self.reply) else self.reply

    @property
    def requests(self) -> list[dict]:
        """A snapshot of every request so far, oldest first."""
        with self._cond:
            return list(self._requests)

    @property
    def model_requests(self) -> list[dict]:
        """Only the requests that asked for a completion (``/v1/messages``, chat completions, responses,
        Gemini's ``generateContent``)."""
        return [r for r in self.requests if r["method"] == "POST" and r["path"].endswith(MODEL_PATHS)]

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = 10.0, start: int = 0) -> dict | None:
        """The first request (from index ``start`` on) matching ``predicate``, waiting up to
        ``timeout`` seconds for one to arrive; ``None`` on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for request in self._requests[start:]:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(min(remaining, 0.5))

    def wait_for_text(self, needle: str, timeout: float = 10.0, start: int = 0) -> dict | None:
        """The first model request whose text contains ``needle``."""
        return self.wait_for(lambda r: r["path"].endswith(MODEL_PATHS) and needle in text_of(r), timeout, start)

    @staticmethod
    def text_of(request: dict) -> str:
        return text_of(request)

    def clear(self) -> None:
        with self._cond:
            self._requests.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.e2e.fakemodel", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: random)")
    parser.add_argument("--log", help="append every request as a JSON line to this file")
    parser.add_argument("--reply", default="ok", help="assistant text to answer with")
    args = parser.parse_args(argv)
    fm = FakeModel(args.reply, port=args.port, log_path=args.log).start()
    print(fm.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fm.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
