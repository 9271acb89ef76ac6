"""The daemon's control socket: one size- and time-limited JSON request per connection, same uid."""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog
from anyio.streams.buffered import BufferedByteReceiveStream

from agentmaild.control.protocol import (
    COMMANDS,
    MAX_REQUEST_BYTES,
    MAX_RESPONSE_BYTES,
    READ_TIMEOUT_S,
    Request,
    decode_request,
    decode_response,
    encode_error,
    encode_request,
    encode_response,
    fallback_dir,
)
from agentmaild.errors import AgentmaildError, ControlError, ProtocolError

log = structlog.get_logger(__name__)

Handler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""``await handler(cmd, args) -> result``; raises ``AgentmaildError`` subclasses to reply errors."""

# Frequent, read-only or idempotent commands (`status --watch`, a poke per `send`) log at debug.
_QUIET_COMMANDS = frozenset({"ping", "status", "agents", "metrics", "wake"})
_UCRED = struct.Struct("=iII")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE = 0, 0x001, 76  # macOS <sys/un.h>, struct xucred
_ACCEPT_BACKOFF_S = 0.1
_PROBE_TIMEOUT_S = 1.0


class ControlServer:
    """Serves ``handler`` on a 0600 Unix socket at ``path`` until cancelled; removes it on exit."""

    def __init__(
        self,
        path: Path,
        handler: Handler,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        write_timeout_s: float = READ_TIMEOUT_S,
        max_connections: int = 64,
    ) -> None:
        self.path = path
        self._handler = handler
        self._read_timeout_s = read_timeout_s
        self._write_timeout_s = write_timeout_s
        self._slots = anyio.Semaphore(max_connections)
        self._listener: anyio.abc.SocketListener | None = None
        self._identity: tuple[int, int] | None = None

    async def listen(self) -> None:
        """Bind the socket now, accepting nobody yet: a second daemon on this path fails here.

        Raises ``ControlError`` when another daemon answers on the path, the path is not a socket,
        or the socket cannot be bound. ``serve()`` then accepts; ``aclose()`` undoes this.
        """
        _prepare_directory(self.path.parent)
        await _clear_stale_socket(self.path)
        try:
            # anyio binds, chmods, then listens: nobody can connect before the mode is 0600.
            self._listener = await anyio.create_unix_listener(self.path, mode=0o600)
        except OSError as exc:
            raise ControlError(f"cannot listen on {self.path}: {exc}") from exc
        self._identity = _identity(self.path)

    async def aclose(self) -> None:
        """Close a socket ``listen()`` bound and ``serve()`` never took over; idempotent."""
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.aclose()
            _remove_if_ours(self.path, self._identity)

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
            async with listener, anyio.create_task_group() as tg:
                log.info("control.listening", path=str(self.path))
                task_status.started(self.path)
                await self._accept_forever(listener, tg)
        finally:
            _remove_if_ours(self.path, self._identity)

    async def _accept_forever(
        self, listener: anyio.abc.SocketListener, tg: anyio.abc.TaskGroup
    ) -> None:
        while True:
            await self._slots.acquire()
            try:
                stream = await listener.accept()
            except OSError as exc:
                self._slots.release()
                # EMFILE and friends: back off rather than spin; the daemon must keep running.
                log.warning("control.accept_failed", error=str(exc))
                await anyio.sleep(_ACCEPT_BACKOFF_S)
                continue
            tg.start_soon(self._serve_connection, stream)

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
            pid, uid = _peer_credentials(stream.extra(anyio.abc.SocketAttribute.raw_socket))
        except OSError as exc:
            log.warning("control.rejected", reason="peer_unknown", error=str(exc))
            return
        if uid is not None and uid != os.getuid():
            log.warning("control.rejected", reason="peer_uid", peer_uid=uid, peer_pid=pid)
            return
        try:
            line = await self._read_line(stream)
            request = decode_request(line)
        except ProtocolError as exc:
            log.warning("control.rejected", reason="protocol", error=exc.message, peer_pid=pid)
            await self._send(stream, encode_error(exc.code, exc.message))
            return
        except (TimeoutError, anyio.BrokenResourceError) as exc:
            log.warning("control.rejected", reason=type(exc).__name__, peer_pid=pid)
            return
        reply, code = await self._dispatch(request)
        await self._send(stream, reply)
        emit = log.debug if request.cmd in _QUIET_COMMANDS and code is None else log.info
        duration_ms = round((time.monotonic() - started) * 1000, 2)
        emit("control.request", cmd=request.cmd, code=code, peer_pid=pid, duration_ms=duration_ms)

    async def _read_line(self, stream: anyio.abc.SocketStream) -> bytes:
        """The request line; bounded in time (``TimeoutError``) and size (``ProtocolError``)."""
        buffered = BufferedByteReceiveStream(stream)
        with anyio.fail_after(self._read_timeout_s):
            try:
                # At most one receive() chunk past the limit is buffered, never the whole line.
                return await buffered.receive_until(b"\n", MAX_REQUEST_BYTES + 1)
            except anyio.DelimiterNotFound as exc:
                raise ProtocolError(f"request too large (limit {MAX_REQUEST_BYTES} bytes)") from exc
            except anyio.IncompleteRead as exc:
                raise ProtocolError("connection closed before the end of the request line") from exc

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


def _peer_credentials(sock: socket.socket) -> tuple[int | None, int | None]:
    """(pid, uid) of the connected peer; None where the platform will not say."""
    if sys.platform == "linux":
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        pid, uid, _gid = _UCRED.unpack(raw)
        return pid, uid
    if sys.platform == "darwin":
        # LOCAL_PEERCRED fills a struct xucred {u_int cr_version; uid_t cr_uid; ...}.
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
        return None, int(struct.unpack_from("=II", raw)[1])
    # Elsewhere the socket's 0600 mode is the only guard.
    return None, None


def _prepare_directory(directory: Path) -> None:
    """The shared-/tmp fallback must be ours and private; other directories are the user's."""
    if directory == fallback_dir():
        ensure_private_dir(directory)


def ensure_private_dir(directory: Path) -> None:
    """Create ``directory`` 0700, or accept it only if we own it (tightening its mode)."""
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        st = directory.lstat()
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
            directory.chmod(0o700)
    except OSError as exc:
        raise ControlError(f"cannot prepare the socket directory {directory}: {exc}") from exc
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise ControlError(
            f"{directory} is not a directory owned by uid {os.getuid()}; refusing to listen there"
        )


async def _clear_stale_socket(path: Path) -> None:
    """Remove a dead daemon's socket file; refuse a live one or anything that is not a socket."""
    if not _socket_exists(path):
        return
    try:
        stream = await anyio.connect_unix(path)
    except ConnectionRefusedError:
        _remove_stale(path)
        return
    except OSError as exc:
        raise ControlError(f"cannot probe the existing socket {path}: {exc}") from exc
    async with stream:
        pid = await _probe_pid(stream)
    who = f" (pid {pid})" if pid is not None else ""
    raise ControlError(f"another agentmaild{who} is already listening on {path}")


def _socket_exists(path: Path) -> bool:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlError(f"{path} exists and is not a socket; refusing to replace it")
    return True


def _remove_stale(path: Path) -> None:
    log.info("control.stale_removed", path=str(path))
    path.unlink(missing_ok=True)


async def _probe_pid(stream: anyio.abc.SocketStream) -> object:
    """Best effort: the pid a live daemon reports for `ping`, to name it in the refusal."""
    with anyio.move_on_after(_PROBE_TIMEOUT_S):
        try:
            await stream.send(encode_request("ping"))
            line = await BufferedByteReceiveStream(stream).receive_until(b"\n", MAX_RESPONSE_BYTES)
            return decode_response(line).get("pid")
        except Exception:  # only decorates the refusal; any failure just leaves the pid out
            return None
    return None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _remove_if_ours(path: Path, identity: tuple[int, int] | None) -> None:
    """Unlink the socket unless a successor daemon has already replaced it."""
    if identity is None or _identity(path) != identity:
        return
    try:
        path.unlink()
    except OSError as exc:
        log.warning("control.unlink_failed", path=str(path), error=str(exc))
    else:
        log.info("control.stopped", path=str(path))
