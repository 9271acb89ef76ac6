"""A small HTTP/1.1 client on anyio streams: JSON requests and a Server-Sent Events stream.

Enough for a local agent server (the OpenCode server channel): plain ``http://`` only, one
connection per request (``Connection: close``), bodies by ``Content-Length``, ``chunked`` or the
connection's end. ``call`` returns (status, parsed JSON or None); ``events`` yields each SSE
``data:`` payload parsed as JSON. Failures to connect or read raise ``HttpFailed``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream

LINE_MAX = 65_536
BODY_MAX = 16 * 1024 * 1024


class HttpFailed(Exception):
    """The server could not be reached or answered something that is no HTTP."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    prefix: str
    auth: str | None = None  # a Basic credential, "user:password"

    @classmethod
    def parse(cls, url: str, *, auth: str | None = None) -> Endpoint:
        """``http://host:port[/prefix]``; ValueError for anything else."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"expected http://HOST:PORT, got {url!r}")
        return cls(parts.hostname, parts.port or 80, parts.path.rstrip("/"), auth)

    def target(self, path: str, query: dict[str, str] | None = None) -> str:
        pairs = "&".join(f"{k}={quote(v, safe='')}" for k, v in (query or {}).items())
        return self.prefix + path + (f"?{pairs}" if pairs else "")

    def head(self, method: str, target: str, body: bytes | None) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += ["Connection: close", "Accept: application/json, text/event-stream"]
        if self.auth is not None:
            token = base64.b64encode(self.auth.encode()).decode()
            lines.append(f"Authorization: Basic {token}")
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass(slots=True)
class _Response:
    status: int
    headers: dict[str, str]
    reader: BufferedByteReceiveStream

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, de-chunked."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            while True:
                size = int((await self._line()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    return
                yield await self.reader.receive_exactly(size)
                await self._line()
        elif "content-length" in self.headers:
            size = int(self.headers["content-length"])
            if size:
                yield await self.reader.receive_exactly(min(size, BODY_MAX))
        else:
            while True:
                try:
                    yield await self.reader.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return

    async def body(self) -> bytes:
        parts = [chunk async for chunk in self.chunks()]
        return b"".join(parts)

    async def _line(self) -> bytes:
        return await self.reader.receive_until(b"\r\n", LINE_MAX)


@asynccontextmanager
async def _exchange(
    endpoint: Endpoint, method: str, target: str, payload: Any = None
) -> AsyncIterator[_Response]:
    body = None if payload is None else json.dumps(payload, ensure_ascii=False).encode()
    stream: ByteStream | None = None
    try:
        stream = await anyio.connect_tcp(endpoint.host, endpoint.port)
        await stream.send(endpoint.head(method, target, body) + (body or b""))
        reader = BufferedByteReceiveStream(stream)
        status_line = await reader.receive_until(b"\r\n", LINE_MAX)
        fields = status_line.split(b" ", 2)
        if len(fields) < 2 or not fields[0].startswith(b"HTTP/") or not fields[1].isdigit():
            raise HttpFailed(f"not an HTTP answer: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        while line := await reader.receive_until(b"\r\n", LINE_MAX):
            key, _, value = line.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        yield _Response(int(fields[1]), headers, reader)
    except (OSError, anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound) as exc:
        raise HttpFailed(f"{method} {target}: {type(exc).__name__}: {exc}") from exc
    finally:
        if stream is not None:
            await stream.aclose()


async def call(
    endpoint: Endpoint,
    method: str,
    path: str,
    payload: Any = None,
    *,
    query: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One request; (status, the JSON body or None when empty or not JSON)."""
    async with _exchange(endpoint, method, endpoint.target(path, query), payload) as response:
        raw = await response.body()
    try:
        return response.status, json.loads(raw) if raw.strip() else None
    except ValueError:
        return response.status, None


@asynccontextmanager
async def events(
    endpoint: Endpoint, path: str, *, query: dict[str, str] | None = None
) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """An SSE stream opened for the block; iterate it for each event's JSON ``data``."""
    async with _exchange(endpoint, "GET", endpoint.target(path, query)) as response:
        if response.status != 200:
            raise HttpFailed(f"GET {path}: HTTP {response.status}")
        yield _sse(response)


async def _sse(response: _Response) -> AsyncIterator[dict[str, Any]]:
    pending = b""
    data: list[bytes] = []
    async for chunk in response.chunks():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r")
            if line.startswith(b"data:"):
                data.append(line[5:].strip())
            elif not line and data:
                event = _json(b"\n".join(data))
                data = []
                if event is not None:
                    yield event
    raise HttpFailed("the event stream ended")


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
