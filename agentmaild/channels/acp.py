"""AcpChannel: a long-lived Agent Client Protocol agent (``gemini --acp``, ``opencode acp``, …).

The daemon starts the agent's command and speaks JSON-RPC 2.0 lines over its stdio:
``initialize`` → ``authenticate`` (only when the agent advertises a method we may use:
``settings.acp_auth_method``, else ``gemini-api-key``) → ``session/load`` of the stored session
(when the agent can load; a failed load starts afresh) or ``session/new`` → one
``session/prompt`` per batch. A new session id is stored before the first prompt.
Ack contract: ``deliver`` returns when the prompt's response says ``stopReason: "end_turn"``.
Any other stop reason, a JSON-RPC error (e.g. the model API failed), a crash mid-turn or
``stall_timeout_s`` of silence raise ``DeliveryFailed``: the loop retries the same delivery id.
Busy: from our prompt's write until its response; with no process of ours running, while a
process an earlier daemon started still runs. Requests the agent sends us are answered safely
(permission: cancelled; fs/terminal: not supported); ``session/update`` notifications
are ignored. The prompt's response carries the turn's tokens (``channels.usage``). Process,
restarts and the turn's bookkeeping are ``RpcChannel``'s.
Stored as channel ``stdin`` with ``settings.protocol = "acp"`` (no schema change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.acp_rpc import Call
from agentmaild.channels.rpc_channel import RpcChannel
from agentmaild.channels.stdin_host import _Process
from agentmaild.models import Agent

log: FilteringBoundLogger = structlog.get_logger(__name__)

PROTOCOL = "acp"
DEFAULT_AUTH = "gemini-api-key"


class AcpChannel(RpcChannel):
    """An ACP agent's process and session; one ``session/prompt`` in flight at a time."""

    kind = "acp"
    protocol = PROTOCOL
    logger = log

    async def _open_session(self, proc: _Process) -> str:
        init = await self._result(
            proc,
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                },
            },
        )
        auth = _auth_method(init, self.agent.settings.get("acp_auth_method"))
        if auth is not None:
            await self._result(proc, "authenticate", {"methodId": auth})
        cwd = self.agent.cwd or str(Path.cwd())
        stored = self._session_id_value
        if stored is not None and _can_load(init):
            params = {"sessionId": stored, "cwd": cwd, "mcpServers": []}
            call = await self._send(proc, "session/load", params)
            await call.done.wait()
            if call.error is None:
                self._log.info("acp.session_loaded", session_id=stored)
                return stored
            self._log.warning("acp.load_failed", session_id=stored, reason=call.error)
        opened = await self._result(proc, "session/new", {"cwd": cwd, "mcpServers": []})
        session = opened.get("sessionId") if isinstance(opened, dict) else None
        return await self._new_session(session, "session/new")

    async def _start_turn(self, proc: _Process, session: str, text: str) -> Call:
        params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
        return await self._send(proc, "session/prompt", params)

    async def _cancel_turn(self, proc: _Process) -> str:
        await self._notify(proc, "session/cancel", {"sessionId": self._session_id_value})
        return "session/cancel"

    def _verdict(self, call: Call) -> str | None:
        stop = call.result.get("stopReason") if isinstance(call.result, dict) else None
        if call.error is None and stop != "end_turn":
            return f"stopReason {stop!r}, not end_turn"
        return call.error


def is_acp(agent: Agent) -> bool:
    return agent.settings.get("protocol") == PROTOCOL


def _auth_method(init: Any, wanted: object) -> str | None:
    methods = init.get("authMethods") if isinstance(init, dict) else None
    ids = [m.get("id") for m in methods or [] if isinstance(m, dict)]
    choice = wanted if isinstance(wanted, str) and wanted else DEFAULT_AUTH
    return choice if choice in ids else None


def _can_load(init: Any) -> bool:
    caps = init.get("agentCapabilities") if isinstance(init, dict) else None
    return isinstance(caps, dict) and caps.get("loadSession") is True
