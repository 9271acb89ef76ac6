"""The daemon's control socket: one size- and time-limited JSON request per connection, same uid.

A flood of connections from our own uid must not lock the CLI out: a connection that has sent no
byte within ``first_byte_timeout_s`` is closed, and when every slot is taken the oldest connection
still reading its request is evicted to make room, so accepting never waits behind idle peers. The
socket file is checked every ``check_interval_s``; when it is removed or replaced the server binds
it again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog

from agentmaild.control.peer import peer_credentials
from agentmaild.control.protocol import (
    COMMANDS,
    FIRST_BYTE_TIMEOUT_S,
    MAX_REQUEST_BYTES,
    READ_TIMEOUT_S,
    Request,
    decode_request,
    encode_error,
    encode_response,
)
from agentmaild.control.socketfile import (
    Identity,
    clear_stale_socket,
    identity,
    prepare_directory,
    remove_if_ours,
    take_back,
)
from agentmaild.control.socketfile import ensure_private_dir as ensure_private_dir
from agentmaild.errors import AgentmaildError, ControlError, ProtocolError

log = structlog.get_logger(__name__)

Handler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""``await handler(cmd, args) -> result``; raises ``AgentmaildError`` subclasses to reply errors."""

# Frequent, read-only or idempotent commands (`status --watch`, a poke per `send`) log at debug.
_QUIET_COMMANDS = frozenset({"ping", "status", "agents", "metrics", "wake", "await_reply"})
_ACCEPT_BACKOFF_S = 0.1
_RECEIVE_BYTES = 65536


class _Idle(Exception):
    """The peer sent no byte in time, or closed without one: not worth a warning (floods do it)."""


class ControlServer:
    """Serves ``handler`` on a 0600 Unix socket at ``path`` until cancelled; removes it on exit."""

    def __init__(
        self,
        path: Path,
        handler: Handler,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        first_byte_timeout_s: float = FIRST_BYTE_TIMEOUT_S,
        write_timeout_s: float = READ_TIMEOUT_S,
        max_connections: int = 64,
        check_interval_s: float = 1.0,
    ) -> None:
        self.path = path
        self._handler = handler
        self._read_timeout_s = read_timeout_s
        self._first_byte_timeout_s = min(first_byte_timeout_s, read_timeout_s)
        self._write_timeout_s = write_timeout_s
        self._check_interval_s = check_interval_s
        self._slots = anyio.Semaphore(max_connections)
        # Connections still reading their request, oldest first: the ones eviction may close.
        self._reading: dict[object, anyio.CancelScope] = {}
        self._bound: Identity | None = None
        self._left_alone: Identity | None = None
        self._listener: anyio.abc.SocketListener | None = None

    async def listen(self) -> None:
        """Bind the socket now, accepting nobody yet: a second daemon on this path fails here.

        Raises ``ControlError`` when another daemon answers on the path, the path is not a socket,
        or the socket cannot be bound. ``serve()`` then accepts; ``aclose()`` undoes this.
        """
        prepare_directory(self.path.parent)
        await clear_stale_socket(self.path)
        self._listener = await self._listen()

    async def aclose(self) -> None:
        """Close a socket ``listen()`` bound and ``serve()`` never took over; idempotent."""
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.aclose()
            remove_if_ours(self.path, self._bound)

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[Path] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Bind (unless ``listen()`` did), report the socket path as started, then serve until
        cancelled. Raises ``ControlError`` as ``listen()`` does, before starting."""
        if self._listener is None:
            await self.listen()
        listener, self._listener = self._listener, None
        assert listener is not None
        try:
            # Connections live in this group, so a re-bind never cuts a request short.
            async with anyio.create_task_group() as tg:
                log.info("control.listening", path=str(self.path))
                task_status.started(self.path)
                while True:
                    listener = await self._serve_until_rebound(listener, tg)
        finally:
            remove_if_ours(self.path, self._bound)

    async def _listen(self) -> anyio.abc.SocketListener:
        try:
            # anyio binds, chmods, then listens: nobody can connect before the mode is 0600.
            listener = await anyio.create_unix_listener(self.path, mode=0o600)
        except OSError as exc:
            raise ControlError(f"cannot listen on {self.path}: {exc}") from exc
        self._bound = identity(self.path)
        return listener

    async def _serve_until_rebound(
        self, listener: anyio.abc.SocketListener, tg: anyio.abc.TaskGroup
    ) -> anyio.abc.SocketListener:
        async with listener, anyio.create_task_group() as accepting:
            accepting.start_soon(self._accept_forever, listener, tg)
            rebound = await self._watch()
            accepting.cancel_scope.cancel()
        return rebound

    async def _watch(self) -> anyio.abc.SocketListener:
        """Wait until our socket file is gone or replaced, clear the path, and bind it again."""
        while True:
            await anyio.sleep(self._check_interval_s)
            current = identity(self.path)
            if current is not None and current in (self._bound, self._left_alone):
                continue
            reason = await take_back(self.path)
            if reason is None:
                self._left_alone = current  # warned once; looked at again when it changes
                continue
            try:
                listener = await self._listen()
            except ControlError as exc:
                log.warning("control.rebind_failed", path=str(self.path), error=exc.message)
                continue
            log.warning("control.socket_rebound", path=str(self.path), reason=reason)
            return listener

    async def _accept_forever(
        self, listener: anyio.abc.SocketListener, tg: anyio.abc.TaskGroup
    ) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                # EMFILE and friends: back off rather than spin; the daemon must keep running.
                log.warning("control.accept_failed", error=str(exc))
                await anyio.sleep(_ACCEPT_BACKOFF_S)
                continue
            try:
                await self._make_room()
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
                raise
            tg.start_soon(self._serve_connection, stream)

    async def _make_room(self) -> None:
        """Take a slot; when none is free, evict the oldest connection still reading first."""
        if self._slots.value == 0 and self._reading:
            oldest = next(iter(self._reading))
            self._reading.pop(oldest).cancel()
        await self._slots.acquire()

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        try:
            async with stream:
                await self._converse(stream)
        except Exception:  # one bad connection must never take the server down
            log.exception("control.crashed")
        finally:
            self._slots.release()

    async def _converse(self, stream: anyio.abc.SocketStream) -> None:
        started = time.monotonic()
        try:
            pid, uid = peer_credentials(stream.extra(anyio.abc.SocketAttribute.raw_socket))
        except OSError as exc:
            log.warning("control.rejected", reason="peer_unknown", error=str(exc))
            return
        if uid is not None and uid != os.getuid():
            log.warning("control.rejected", reason="peer_uid", peer_uid=uid, peer_pid=pid)
            return
        request = await self._receive_request(stream, pid)
        if request is None:
            return
        reply, code = await self._dispatch(request)
        await self._send(stream, reply)
        emit = log.debug if request.cmd in _QUIET_COMMANDS and code is None else log.info
        duration_ms = round((time.monotonic() - started) * 1000, 2)
        emit("control.request", cmd=request.cmd, code=code, peer_pid=pid, duration_ms=duration_ms)

    async def _receive_request(
        self, stream: anyio.abc.SocketStream, pid: int | None
    ) -> Request | None:
        """The decoded request, or None once the connection is dealt with (and logged)."""
        try:
            line = await self._read_evictable(stream)
            if line is None:
                log.debug("control.evicted", peer_pid=pid)
                return None
            return decode_request(line)
        except ProtocolError as exc:
            log.warning("control.rejected", reason="protocol", error=exc.message, peer_pid=pid)
            await self._send(stream, encode_error(exc.code, exc.message))
        except _Idle:
            log.debug("control.idle_closed", peer_pid=pid)
        except (TimeoutError, anyio.BrokenResourceError) as exc:
            log.warning("control.rejected", reason=type(exc).__name__, peer_pid=pid)
        return None

    async def _read_evictable(self, stream: anyio.abc.SocketStream) -> bytes | None:
        """``_read_line``, or None when ``_make_room`` evicted this connection meanwhile."""
        key = object()
        with anyio.CancelScope() as scope:
            self._reading[key] = scope
            try:
                return await self._read_line(stream)
            finally:
                self._reading.pop(key, None)
        return None

    async def _read_line(self, stream: anyio.abc.SocketStream) -> bytes:
        """The request line; bounded in time (``_Idle``, ``TimeoutError``) and size."""
        line = bytearray()
        with anyio.fail_after(self._read_timeout_s):
            try:
                with anyio.fail_after(self._first_byte_timeout_s):
                    chunk = await stream.receive(_RECEIVE_BYTES)
            except (TimeoutError, anyio.EndOfStream) as exc:
                raise _Idle from exc
            while (end := chunk.find(b"\n")) < 0:
                line += chunk
                # At most one receive() chunk past the limit is held, never the whole line.
                if len(line) > MAX_REQUEST_BYTES:
                    raise ProtocolError(f"request too large (limit {MAX_REQUEST_BYTES} bytes)")
                try:
                    chunk = await stream.receive(_RECEIVE_BYTES)
                except anyio.EndOfStream as exc:
                    message = "connection closed before the end of the request line"
                    raise ProtocolError(message) from exc
            line += chunk[:end]
        if len(line) > MAX_REQUEST_BYTES:
            raise ProtocolError(f"request too large (limit {MAX_REQUEST_BYTES} bytes)")
        return bytes(line)

    async def _dispatch(self, request: Request) -> tuple[bytes, str | None]:
        """The reply line and its error code (None on success)."""
        if request.cmd not in COMMANDS:
            message = f"unknown command {request.cmd[:64]!r}; known: {', '.join(COMMANDS)}"
            return encode_error("unknown_command", message), "unknown_command"
        try:
            result = await self._handler(request.cmd, request.args)
        except AgentmaildError as exc:
            return encode_error(exc.code, exc.message), exc.code
        except Exception:
            log.exception("control.handler_crashed", cmd=request.cmd)
            return _internal_error(request.cmd), "internal"
        try:
            return encode_response(result), None
        except ProtocolError:
            log.exception("control.bad_result", cmd=request.cmd)
            return _internal_error(request.cmd), "internal"

    async def _send(self, stream: anyio.abc.SocketStream, data: bytes) -> None:
        with anyio.move_on_after(self._write_timeout_s) as scope:
            try:
                await stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                log.debug("control.peer_gone")
        if scope.cancelled_caught:
            log.warning("control.write_timed_out")


def _internal_error(cmd: str) -> bytes:
    return encode_error("internal", f"internal error while handling {cmd!r}; see the daemon log")
