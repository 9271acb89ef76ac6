"""A man in the middle of the plain-HTTP relay path: a real loopback HTTP proxy that rewrites the
JSON it forwards, and can lose the upstream's answer (the sender then sees a 502 and retries).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Rewrite = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Proxy:
    """What the proxy does to each request (``rewrite``, ``lose_answer``) and what it saw."""

    upstream: str
    url: str = ""
    rewrite: Rewrite | None = None
    lose_answer: bool = False
    answers: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # from upstream

    def forward(self, path: str, raw: bytes) -> tuple[int, bytes]:
        if self.rewrite is not None:
            raw = json.dumps(self.rewrite(json.loads(raw))).encode()
        got = httpx.post(self.upstream + path, content=raw, timeout=20,
                         headers={"content-type": "application/json"})  # fmt: skip
        self.answers.append((got.status_code, got.json()))
        if self.lose_answer:  # delivered upstream; the sender never learns it
            return 502, b'{"ok": false, "error": {"code": "bad_gateway", "message": "lost"}}'
        return got.status_code, got.content


def _handler(proxy: Proxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            status, body = proxy.forward(self.path, raw)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test asserts on `answers`

    return Handler


@contextmanager
def tamper_proxy(upstream: str) -> Iterator[Proxy]:
    """A proxy to ``upstream`` on a loopback port the kernel picks, served until the block ends."""
    proxy = Proxy(upstream=upstream)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
