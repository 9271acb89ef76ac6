"""The daemon's MCP socket (``<control socket>.mcp``): the MCP server of a spawned turn without
its cold start.

A spawn preset's turn starts ``agentmaild.hot.mcp_relay`` (stdlib only), which connects here and
names its agent on the first line (``{"agent": NAME}``); the rest of the connection is the MCP
stdio wire, served by the same ``serve.MailServer`` as ``agentmaild mcp`` (its door on the
daemon's store, as that agent). The daemon loads the SDK once — at start when an agent has a
preset, else on the first connection — instead of every turn loading it again.

Only peers of the daemon's uid are served: they could as well start ``agentmaild mcp --agent
NAME`` themselves. The socket file is 0600 and removed at exit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import structlog
from anyio.streams.buffered import BufferedByteReceiveStream

from agentmaild.control.peer import peer_credentials
from agentmaild.errors import AgentmaildError
from agentmaild.hot.mcp_relay import mcp_socket_of
from agentmaild.ids import check_name

if TYPE_CHECKING:
    from agentmaild.store.location import StoreLocation

log = structlog.get_logger(__name__)
_FIRST_LINE_MAX = 1024
_FIRST_LINE_S = 5.0
_LINE_MAX = 64 * 1024 * 1024  # one JSON-RPC message; the mail rules cap bodies far below this


class _LinesIn:
    """The connection's lines, as ``stdio_server`` reads a text file (``async for line``)."""

    def __init__(self, buffered: BufferedByteReceiveStream) -> None:
        self.buffered = buffered

    def __aiter__(self) -> _LinesIn:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.buffered.receive_until(b"\n", _LINE_MAX)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound,
                anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):  # fmt: skip
            raise StopAsyncIteration from None  # the relay is gone, or sent a line too long
        return line.decode("utf-8", "replace")


class _LinesOut:
    """The connection's write side, as ``stdio_server`` writes a text file."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream, self.pending = stream, bytearray()

    async def write(self, text: str) -> None:
        self.pending += text.encode()

    async def flush(self) -> None:
        data, self.pending = bytes(self.pending), bytearray()
        try:
            await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the relay is gone (its turn ended): the read side ends the session


def preload() -> None:
    """Load the SDK and the server (a worker thread at the daemon's start)."""
    import agentmaild.mcpserver.serve  # noqa: F401


class McpSocket:
    """The listener and its sessions, one per connected relay."""

    def __init__(self, control: Path, location: StoreLocation) -> None:
        self.path = Path(mcp_socket_of(str(control)))
        self.location = location

    async def serve(
        self,
        preload_now: bool,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        self.path.unlink(missing_ok=True)  # ours: the control socket's bind proved no daemon runs
        try:
            listener = await anyio.create_unix_listener(self.path, mode=0o600)
        except OSError as exc:  # e.g. a configured control socket too long for the suffix
            # Not fatal: a preset's relay finds no socket and starts `agentmaild mcp` itself.
            log.warning("mcp.socket_unbound", path=str(self.path), error=str(exc))
            task_status.started()
            return
        task_status.started()
        try:
            if preload_now:
                await anyio.to_thread.run_sync(preload)
            async with listener:
                await listener.serve(self._session)
        finally:
            self.path.unlink(missing_ok=True)

    async def _session(self, stream: anyio.abc.SocketStream) -> None:
        try:
            await self._session_on(stream)
        except Exception as exc:  # one session's failure is never the daemon's
            log.warning("mcp.session_failed", error=f"{type(exc).__name__}: {exc}")

    async def _session_on(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            _pid, uid = peer_credentials(stream.extra(anyio.abc.SocketAttribute.raw_socket))
            if uid is not None and uid != os.getuid():
                log.warning("mcp.refused", reason="peer of another uid", uid=uid)
                return
            buffered = BufferedByteReceiveStream(stream)
            try:
                with anyio.fail_after(_FIRST_LINE_S):
                    first = await buffered.receive_until(b"\n", _FIRST_LINE_MAX)
                agent = check_name(str(json.loads(first)["agent"]), "agent")
            except Exception as exc:  # garbage, silence, a name that is not one
                log.warning("mcp.refused", reason=f"bad first line: {type(exc).__name__}")
                return
            await self._serve_agent(agent, buffered, stream)

    async def _serve_agent(
        self, agent: str, buffered: BufferedByteReceiveStream, stream: anyio.abc.SocketStream
    ) -> None:
        from agentmaild.mcpserver.doors import StoreDoor
        from agentmaild.mcpserver.serve import MailServer

        try:
            door = await anyio.to_thread.run_sync(StoreDoor, self.location, agent)
        except AgentmaildError as exc:
            log.warning("mcp.refused", agent=agent, reason=exc.message)
            return
        log.info("mcp.session", agent=agent)
        streams: tuple[Any, Any] = (_LinesIn(buffered), _LinesOut(stream))
        try:
            await MailServer(door, False).run(streams)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(door.close)
            log.info("mcp.session_ended", agent=agent)
