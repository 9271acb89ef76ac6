"""uvicorn inside the daemon's task group: bind, report ready, serve, stop when the daemon stops.

The socket is bound here (so ``task_group.start`` returns once the port is ours, and a bad or busy
address is one ``ConfigError`` at start); uvicorn's own signal handling is off (the daemon owns
signals); a connection that has not sent its request headers within ``http.request_timeout_s`` is
answered 408 and closed (``_DeadlineH11Protocol``), the body's own deadline is ``body.read_json``'s
(its 408 closes the connection as it is sent: ``errors``), and a body still arriving that long
after another answer that did not read it closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

import anyio
import anyio.abc
import h11
import structlog
import uvicorn
from starlette.routing import BaseRoute
from uvicorn.protocols.http.h11_impl import H11Protocol

from agentmaild.config import HttpConfig
from agentmaild.errors import ConfigError
from agentmaild.http.app import build_app
from agentmaild.http.context import ApiContext
from agentmaild.http.local import check_available

log = structlog.get_logger(__name__)
_GRACE_S = 2.0  # in-flight requests get this long once the daemon stops


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback one."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name we would have to resolve: not provably loopback


def check_listen(http: HttpConfig) -> None:
    """Tokens off needs a loopback bind and the per-caller uid check (``local``) to work here."""
    host, _ = split_listen(http.listen)
    if http.require_tokens:
        return
    if not is_loopback(host):
        raise ConfigError(
            f"http.listen: {http.listen} is not a loopback address and http.require_tokens is "
            "false; serve other hosts only with tokens (set http.require_tokens = true)"
        )
    check_available()


def bind(listen: str) -> socket.socket:
    host, port = split_listen(listen)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, addr = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"http.listen: cannot use {listen}: {exc.strerror or exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"http.listen: cannot bind {listen}: {exc.strerror or exc}") from exc
    return sock


class _DeadlineH11Protocol(H11Protocol):
    """h11 with a deadline for the request headers (uvicorn has none: a slowloris would wait)."""

    header_timeout_s = 10.0
    _deadline: asyncio.TimerHandle | None = None
    _started = False  # bytes of a request arrived since the deadline was armed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        self._started = True
        super().data_received(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not HTTP/1.1, as our JSON error (it sends text)."""
        body = _error_body("invalid", f"malformed HTTP request ({msg.rstrip('.').lower()})")
        headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                   (b"content-length", str(len(body)).encode())]
        for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                      h11.Data(data=body), h11.EndOfMessage()):  # fmt: skip
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._started = False
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expired)

    def _expired(self) -> None:
        if self.transport.is_closing():
            return
        theirs, ours = self.conn.their_state, self.conn.our_state
        if theirs is h11.SEND_BODY and ours is h11.DONE:
            # Answered without its body being read (a refusal, a GET) and the body still comes:
            # uvicorn would wait for its end as long as bytes keep arriving.
            self.transport.close()
            return
        if not (theirs is h11.IDLE and ours is h11.IDLE):
            return  # being answered: the body's own deadline is read_json's; re-armed after
        if not self._started:
            # An idle keep-alive connection, not a slow request: close it without an answer a
            # client could take for the reply to a request it is sending right now.
            self.transport.close()
            return
        body = _error_body("request_timeout",
                           f"request headers did not arrive within {self.header_timeout_s:g}s")
        head = (
            "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode()
        self.transport.write(head + body)
        self.transport.close()


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode()


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the daemon's ``_signals`` task owns every signal."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """The API on ``http.listen``; ``serve`` under ``task_group.start``, stopped by ``stopping``."""

    def __init__(
        self,
        ctx: ApiContext,
        stopping: anyio.Event,
        extra: Sequence[BaseRoute] = (),
        tasks: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
    ) -> None:
        check_listen(ctx.http)
        self.ctx = ctx
        self._stopping = stopping
        self._extra = extra  # more routes (the dashboard), after the API's
        self._tasks = tasks  # run while the server serves (the dashboard's producer)
        self.address: tuple[str, int] | None = None

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        http = self.ctx.http
        sock = bind(http.listen)
        protocol = type("DeadlineH11", (_DeadlineH11Protocol,),
                        {"header_timeout_s": http.request_timeout_s})  # fmt: skip
        config = uvicorn.Config(
            build_app(self.ctx, extra=self._extra), log_config=None, log_level="warning",
            access_log=False, lifespan="off", http=protocol, timeout_keep_alive=5,
            timeout_graceful_shutdown=int(_GRACE_S), h11_max_incomplete_event_size=16384,
        )  # fmt: skip
        server = _EmbeddedServer(config)
        bound: Any = sock.getsockname()
        self.address = (str(bound[0]), int(bound[1]))
        log.info("http.listening", address=f"{self.address[0]}:{self.address[1]}",
                 require_tokens=http.require_tokens)  # fmt: skip
        task_status.started(self.address)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._stop_on_shutdown, server)
                for task in self._tasks:
                    tg.start_soon(task)
                await server.serve(sockets=[sock])
                tg.cancel_scope.cancel()
        finally:
            sock.close()
            log.info("http.stopped")

    async def _stop_on_shutdown(self, server: uvicorn.Server) -> None:
        await self._stopping.wait()
        server.should_exit = True


async def serve_daemon_http(
    daemon: Any,
    *,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The daemon's API (``serve.Daemon``: its store, config, supervisor and shutdown event)."""
    ctx = ApiContext(
        store=daemon.store,
        config=lambda: daemon.config,
        http=daemon.config.http,
        wake=daemon.supervisor.wake,
        db=str(daemon.db),
    )
    from agentmaild.web import Dashboard

    board = Dashboard(daemon, daemon.shutdown_event)
    server = HttpServer(ctx, daemon.shutdown_event, extra=board.routes(), tasks=[board.run])
    await server.serve(task_status=task_status)
