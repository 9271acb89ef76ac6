"""An MCP client from the ``mcp`` SDK, over stdio, to a real ``python -m agentmaild mcp`` process;
the notifications the server sent are kept for the test to wait on."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from mcp import ClientSession, StdioServerParameters, stdio_client


@dataclass
class Heard:
    """What the server said on its own: ``resources/updated`` uris and log lines."""

    updated: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        params = getattr(root, "params", None)
        method = getattr(root, "method", "")
        if method == "notifications/resources/updated" and params is not None:
            self.updated.append(str(params.uri))
        elif method == "notifications/message" and params is not None:
            self.logs.append(str(params.data))


@asynccontextmanager
async def mcp_session(
    env: dict[str, str],
    *args: str,
    module: tuple[str, ...] = ("agentmaild", "mcp"),
    errlog: TextIO = sys.stderr,
) -> AsyncIterator[tuple[ClientSession, Heard]]:
    """An initialized session with ``agentmaild mcp ARGS`` (or ``python -m MODULE ARGS``) under
    ``env``; the server's stderr goes to ``errlog``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", *module, *args], env=env)
    heard = Heard()
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, message_handler=heard) as session,
    ):
        await session.initialize()
        yield session, heard


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)
