"""A loopback stand-in for the Anthropic Messages API, good enough for the real `claude` CLI.

Start it, point the CLI at it with ``ANTHROPIC_BASE_URL=stub.base_url`` and every request the CLI
makes lands in :attr:`AnthropicStub.requests`.  ``POST /v1/messages`` answers with a text reply
(streaming SSE or a plain JSON message, whichever the request asks for); everything else gets a
small, harmless answer and is still recorded.

Test controls (all thread-safe):

* ``reply`` — the answer text, or a callable ``(body) -> str | list[content block]``.
* ``delay_s`` — sleep before answering each messages request (keeps a turn "busy").
* :meth:`hold` / :meth:`release` — block matching messages requests until released (a deterministic
  way to keep a turn busy for exactly as long as the test wants).
* :meth:`fail_next` — answer the next N messages requests with an API error (Anthropic's JSON
  shape).
* :meth:`wait_for` — block (Condition, no polling) until a messages request containing a substring
  in its conversation arrives.
* :meth:`conversation_requests` — only the "main conversation" requests, i.e. those whose LAST user
  message contains a substring (side requests such as title generation or a ``max_tokens=1`` quota
  probe are left out because they quote the prompt differently, if at all).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ContentBlocks = list[dict[str, Any]]
Reply = str | ContentBlocks | Callable[[dict[str, Any]], "str | ContentBlocks"]

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class RecordedRequest:
    """One HTTP request the stub received."""

    seq: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON, or None when empty
    received_at: float = field(default_factory=time.monotonic)
    answered_with: int | None = None  # HTTP status the stub sent back

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path.split("?", 1)[0] == "/v1/messages"

    @property
    def messages(self) -> list[dict[str, Any]]:
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return self.body["messages"]
        return []

    def all_text(self) -> str:
        """Every text the conversation carries (all messages, all blocks), newline-joined."""
        return "\n".join(_texts(self.messages))

    def last_user_text(self) -> str:
        for msg in reversed(self.messages):
            if msg.get("role") == "user":
                return "\n".join(_texts([msg]))
        return ""

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


def _texts(messages: Iterable[dict[str, Any]]) -> Iterable[str]:
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, str):
            yield content
            continue
        for block in content or []:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                yield block["text"]
            inner = block.get("content")  # tool_result blocks
            if isinstance(inner, str):
                yield inner
            elif isinstance(inner, list):
                yield from _texts([{"content": inner}])


@dataclass
class _Failure:
    status: int
    error_type: str
    message: str


class AnthropicStub:
    """Threaded HTTP server on 127.0.0.1:<ephemeral port>. Use as a context manager."""

    def __init__(self, reply: Reply = "ok", *, delay_s: float = 0.0, model: str | None = None):
        self.reply: Reply = reply
        self.delay_s = delay_s
        self.model = model
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._seq = itertools.count(1)
        self._failures: list[_Failure] = []
        self._hold_substr: str | None = None
        self._hold_active = False
        self._released = threading.Event()
        self._released.set()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> AnthropicStub:
        handler = type("StubHandler", (_Handler,), {"stub": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False  # keep-alive connections must not block stop()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.release()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> AnthropicStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "stub not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- controls --------------------------------------------------------------------------
    def fail_next(
        self, n: int = 1, *, status: int = 529, error_type: str | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next ``n`` ``/v1/messages`` requests with an API error."""
        etype = error_type or ERROR_TYPES.get(status, "api_error")
        failure = _Failure(status, etype, message or f"stub {etype}")
        with self._cond:
            self._failures.extend([failure] * n)

    def hold(self, substr: str | None = None) -> None:
        """Block messages requests (those whose conversation contains ``substr``, or all of them)
        until :meth:`release`. The request is recorded (and ``wait_for`` fires) before it blocks."""
        with self._cond:
            self._hold_substr = substr
            self._hold_active = True
            self._released.clear()

    def release(self) -> None:
        with self._cond:
            self._hold_active = False
            self._released.set()

    # ---- inspection ------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of everything received so far, in arrival order."""
        with self._cond:
            return list(self._requests)

    def messages_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_messages]

    def conversation_requests(self, substr: str) -> list[RecordedRequest]:
        """Messages requests whose last user message contains ``substr``: the main turn's calls."""
        return [r for r in self.messages_requests() if substr in r.last_user_text()]

    def other_requests(self) -> list[RecordedRequest]:
        """Everything that was not ``POST /v1/messages`` (probes, count_tokens, unknown paths)."""
        return [r for r in self.requests if not r.is_messages]

    def wait_for(
        self, substr: str, timeout: float = 20.0, *, last_user: bool = False,
    ) -> RecordedRequest:
        """Wait until a messages request whose conversation (or, with ``last_user``, whose last user
        message) contains ``substr`` has arrived; return the first such request."""

        def find() -> RecordedRequest | None:
            for r in self._requests:
                if r.is_messages and substr in (r.last_user_text() if last_user else r.all_text()):
                    return r
            return None

        with self._cond:
            found = self._cond.wait_for(find, timeout=timeout)
        if found is None:
            seen = [r.last_user_text()[:80] for r in self.messages_requests()]
            raise TimeoutError(f"no request containing {substr!r} within {timeout}s; saw {seen}")
        return found

    def wait_for_count(self, predicate: Callable[[RecordedRequest], bool], n: int,
                       timeout: float = 20.0) -> list[RecordedRequest]:
        """Wait until at least ``n`` recorded requests satisfy ``predicate``."""

        def matching() -> list[RecordedRequest] | None:
            hits = [r for r in self._requests if predicate(r)]
            return hits if len(hits) >= n else None

        with self._cond:
            hits = self._cond.wait_for(matching, timeout=timeout)
        if hits is None:
            raise TimeoutError(f"fewer than {n} matching requests within {timeout}s")
        return hits

    # ---- internals used by the handler -----------------------------------------------------
    def _record(self, req: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()

    def _answered(self, req: RecordedRequest, status: int) -> None:
        with self._cond:
            req.answered_with = status
            self._cond.notify_all()

    def _take_failure(self) -> _Failure | None:
        with self._cond:
            return self._failures.pop(0) if self._failures else None

    def _maybe_block(self, req: RecordedRequest) -> None:
        with self._cond:
            active = self._hold_active and (
                self._hold_substr is None or self._hold_substr in req.all_text()
            )
        if active:
            self._released.wait(timeout=300)
        if self.delay_s > 0:
            self._stopping.wait(self.delay_s)

    def _content_for(self, body: dict[str, Any]) -> ContentBlocks:
        reply = self.reply
        if callable(reply):
            reply = reply(body)
        if isinstance(reply, str):
            return [{"type": "text", "text": reply}]
        blocks = [dict(b) for b in reply]
        for b in blocks:
            if b.get("type") == "tool_use":
                b.setdefault("id", _new_id("toolu"))
        return blocks


def _new_id(prefix: str) -> str:
    return f"{prefix}_stub{uuid.uuid4().hex[:20]}"


class _Handler(BaseHTTPRequestHandler):
    stub: AnthropicStub
    protocol_version = "HTTP/1.1"
    timeout = 60  # drop idle keep-alive connections eventually

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing --
    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        text = raw.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _record(self) -> RecordedRequest:
        req = RecordedRequest(
            seq=next(self.stub._seq),
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self._read_body(),
        )
        self.stub._record(req)
        return req

    def _send_json(self, req: RecordedRequest, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", _new_id("req"))
        if status in (429, 529):
            self.send_header("retry-after", "0")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.stub._answered(req, status)

    # -- verbs --
    def do_POST(self) -> None:
        req = self._record()
        path = self.path.split("?", 1)[0]
        if path == "/v1/messages":
            self._messages(req)
        elif path == "/v1/messages/count_tokens":
            self._send_json(req, 200, {"input_tokens": 100})
        else:
            self._send_json(req, 404, _error("not_found_error", f"stub: no route {path}"))

    def do_GET(self) -> None:
        req = self._record()
        path = self.path.split("?", 1)[0]
        if path in ("/", "/v1", "/health"):
            self._send_json(req, 200, {"ok": True})
        elif path == "/v1/models":
            self._send_json(req, 200, {"data": [], "has_more": False, "first_id": None,
                                       "last_id": None})
        else:
            self._send_json(req, 404, _error("not_found_error", f"stub: no route {path}"))

    def do_HEAD(self) -> None:
        req = self._record()
        self._send_json(req, 200, {})

    do_PUT = do_DELETE = do_PATCH = do_POST

    # -- /v1/messages --
    def _messages(self, req: RecordedRequest) -> None:
        body = req.body if isinstance(req.body, dict) else {}
        self.stub._maybe_block(req)
        failure = self.stub._take_failure()
        if failure is not None:
            self._send_json(req, failure.status, _error(failure.error_type, failure.message))
            return
        content = self.stub._content_for(body)
        model = self.stub.model or body.get("model") or "claude-stub"
        uses_tool = any(b.get("type") == "tool_use" for b in content)
        stop_reason = "tool_use" if uses_tool else "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        message = {"id": _new_id("msg"), "type": "message", "role": "assistant", "model": model,
                   "content": content, "stop_reason": stop_reason, "stop_sequence": None,
                   "usage": usage}
        if body.get("stream"):
            self._stream(req, message)
        else:
            self._send_json(req, 200, message)

    def _stream(self, req: RecordedRequest, message: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _new_id("req"))
        self.end_headers()
        for event in _sse_events(message):
            payload = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.stub._answered(req, 200)


def _error(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message},
            "request_id": _new_id("req")}


def _sse_events(message: dict[str, Any]) -> Iterable[dict[str, Any]]:
    start = dict(message, content=[], stop_reason=None,
                 usage=dict(message["usage"], output_tokens=1))
    yield {"type": "message_start", "message": start}
    yield {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block.get("type") == "text":
            yield {"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}
            yield {"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": block["text"]}}
        elif block.get("type") == "tool_use":
            yield {"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": block["id"],
                                     "name": block["name"], "input": {}}}
            yield {"type": "content_block_delta", "index": index,
                   "delta": {"type": "input_json_delta",
                             "partial_json": json.dumps(block.get("input", {}))}}
        else:
            yield {"type": "content_block_start", "index": index, "content_block": block}
        yield {"type": "content_block_stop", "index": index}
    yield {"type": "message_delta",
           "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": message["usage"]["output_tokens"]}}
    yield {"type": "message_stop"}
