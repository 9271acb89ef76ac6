"""The shared machinery of the model-API stand-ins for Codex, Gemini CLI and OpenCode.

A ``LoopbackApi`` is a threaded HTTP server on 127.0.0.1:<ephemeral port> that records every
request (method, path, headers, parsed body, the status it answered) and lets a test steer the
*model calls* (the requests a subclass classifies as such):

* ``reply`` — the answer text, or a callable ``(RecordedRequest) -> str``.
* ``delay_s`` — sleep before answering each model call (a slow model).
* :meth:`hold` / :meth:`release` — block model calls whose conversation holds a substring until
  released (a turn that stays busy for exactly as long as the test wants).
* :meth:`fail_next` — answer the next N model calls with an HTTP error (500, 429, …) in the
  vendor's error shape.
* :meth:`wait_for` — block (a Condition, no polling) until a model call carrying a substring
  arrives; :meth:`conversation_requests` — the model calls whose *last* user text holds it.

Subclasses (``openai_stub``, ``gemini_stub``) say which requests are model calls, how a request's
texts are read, and write the vendor's answer (JSON or SSE).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

Reply = str | Callable[["RecordedRequest"], str]


@dataclass
class RecordedRequest:
    """One HTTP request a stand-in received; ``texts`` are the conversation's texts, oldest first,
    with the role of each (filled by the subclass)."""

    seq: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, the raw text when not JSON, None when empty
    model_call: bool = False
    texts: list[tuple[str, str]] = field(default_factory=list)  # (role, text)
    received_at: float = field(default_factory=time.monotonic)
    answered_with: int | None = None

    @property
    def route(self) -> str:
        return self.path.split("?", 1)[0]

    def all_text(self) -> str:
        return "\n".join(text for _, text in self.texts)

    def last_user_text(self) -> str:
        for role, text in reversed(self.texts):
            if role == "user":
                return text
        return ""

    def user_texts(self) -> list[str]:
        return [text for role, text in self.texts if role == "user"]


@dataclass(frozen=True)
class Failure:
    status: int
    message: str


class LoopbackApi:
    """Base stand-in; subclasses implement :meth:`classify` and :meth:`answer`."""

    name: ClassVar[str] = "loopback"

    def __init__(self, reply: Reply = "ok", *, delay_s: float = 0.0) -> None:
        self.reply: Reply = reply
        self.delay_s = delay_s
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._seq = itertools.count(1)
        self._failures: list[Failure] = []
        self._hold: str | None = None
        self._released = threading.Event()
        self._released.set()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> LoopbackApi:
        handler = type("Handler", (_Handler,), {"api": self})
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

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "stand-in not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- controls ----------------------------------------------------------------------------
    def fail_next(self, n: int = 1, *, status: int = 500, message: str | None = None) -> None:
        """Answer the next ``n`` model calls with HTTP ``status``."""
        with self._cond:
            self._failures.extend([Failure(status, message or f"stand-in error {status}")] * n)

    def clear_failures(self) -> None:
        with self._cond:
            self._failures.clear()

    def hold(self, substr: str | None = None) -> None:
        """Block model calls (those whose texts contain ``substr``, or all) until :meth:`release`;
        the call is recorded (``wait_for`` fires) before it blocks."""
        with self._cond:
            self._hold = substr or ""
            self._released.clear()

    def release(self) -> None:
        with self._cond:
            self._hold = None
            self._released.set()

    # ---- inspection --------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    def model_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.model_call]

    def conversation_requests(self, substr: str) -> list[RecordedRequest]:
        return [r for r in self.model_requests() if substr in r.last_user_text()]

    def wait_for(self, substr: str, timeout: float = 30.0) -> RecordedRequest:
        """The first model call whose texts contain ``substr``, waiting for it if need be."""

        def find() -> RecordedRequest | None:
            return next(
                (r for r in self._requests if r.model_call and substr in r.all_text()), None
            )

        with self._cond:
            found = self._cond.wait_for(find, timeout=timeout)
        if found is None:
            seen = [(r.method, r.route, r.answered_with) for r in self.requests]
            raise TimeoutError(f"{self.name}: no model call with {substr!r} in {timeout}s: {seen}")
        return found

    def wait_answered(
        self, substr: str, n: int = 1, timeout: float = 30.0
    ) -> list[RecordedRequest]:
        """Wait until ``n`` model calls whose last user text holds ``substr`` were answered."""

        def done() -> list[RecordedRequest] | None:
            hits = [
                r
                for r in self._requests
                if r.model_call and r.answered_with and substr in r.last_user_text()
            ]
            return hits if len(hits) >= n else None

        with self._cond:
            hits = self._cond.wait_for(done, timeout=timeout)
        if hits is None:
            raise TimeoutError(f"{self.name}: fewer than {n} answered calls with {substr!r}")
        return hits

    # ---- for subclasses ----------------------------------------------------------------------
    def classify(self, req: RecordedRequest) -> None:
        """Set ``req.model_call`` and ``req.texts``."""
        raise NotImplementedError

    def answer(self, handler: _Handler, req: RecordedRequest) -> None:
        """Write the answer to a request (model call or not)."""
        raise NotImplementedError

    def error_body(self, failure: Failure) -> Any:
        return {"error": {"message": failure.message, "code": failure.status}}

    def reply_text(self, req: RecordedRequest) -> str:
        reply = self.reply
        return reply(req) if callable(reply) else reply

    # ---- used by the handler -----------------------------------------------------------------
    def _record(self, req: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()

    def _answered(self, req: RecordedRequest, status: int) -> None:
        with self._cond:
            req.answered_with = status
            self._cond.notify_all()

    def _before_model_answer(self, req: RecordedRequest) -> Failure | None:
        """Hold, delay, then the next queued failure (if any)."""
        with self._cond:
            held = self._hold is not None and self._hold in req.all_text()
        if held:
            self._released.wait(timeout=300)
        if self.delay_s > 0:
            self._stopping.wait(self.delay_s)
        with self._cond:
            return self._failures.pop(0) if self._failures else None


class _Handler(BaseHTTPRequestHandler):
    api: LoopbackApi
    protocol_version = "HTTP/1.1"
    timeout = 60  # drop idle keep-alive connections eventually

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            text = raw.decode("utf-8", "replace")
            try:
                body = json.loads(text)
            except ValueError:
                body = text
        req = RecordedRequest(
            seq=next(self.api._seq),
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self.api.classify(req)
        self.api._record(req)
        try:
            if req.model_call:
                failure = self.api._before_model_answer(req)
                if failure is not None:
                    self.send_json(req, failure.status, self.api.error_body(failure))
                    return
            self.api.answer(self, req)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the CLI went away mid-answer (killed, timed out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

    def send_json(self, req: RecordedRequest, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.api._answered(req, status)  # before the body: the client must not see it first
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_sse(self, req: RecordedRequest, frames: Iterable[str]) -> None:
        """A 200 ``text/event-stream`` answer, chunked, one chunk per frame."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for frame in frames:
            payload = frame.encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.api._answered(req, 200)  # before the last chunk: the client must not see it first
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
