"""JSON-RPC 2.0 over an ACP agent's stdio: our calls and their answers, the agent's own requests.

Pure bookkeeping (no process handling), so the ACP channel's ack rules can be read apart:
``Calls`` numbers our requests and settles each when its response line arrives (or when the
process ends); ``client_answer`` is our safe reply to a request the agent sends us (a permission
request is cancelled, anything else is "method not found": we advertise no fs or terminal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio

from agentmaild.mail.jsoninput import storable

REASON_MAX = 200


@dataclass(slots=True)
class Call:
    """One request we sent, until its response (or the process's end) settles it."""

    method: str
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: str | None = None

    def settle(self, result: Any = None, error: str | None = None) -> None:
        if not self.done.is_set():
            self.result, self.error = result, error
            self.done.set()


class Calls:
    """Our outstanding requests by JSON-RPC id."""

    def __init__(self) -> None:
        self._next = 0
        self._open: dict[int, Call] = {}

    def new(self, method: str, params: dict[str, Any]) -> tuple[Call, bytes]:
        self._next += 1
        call = Call(method)
        self._open[self._next] = call
        line = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        return call, encode(line)

    def answer(self, message: dict[str, Any]) -> bool:
        """Settle the call ``message`` responds to; False when it is no response of ours."""
        key = message.get("id")
        call = self._open.pop(key, None) if isinstance(key, int) else None
        if call is None:
            return False
        error = message.get("error")
        if error is not None:
            call.settle(error=describe_error(error))
        else:
            call.settle(result=message.get("result"))
        return True

    def fail_all(self, reason: str) -> None:
        calls, self._open = self._open, {}
        for call in calls.values():
            call.settle(error=reason)


def describe_error(error: object) -> str:
    """One storable line for a JSON-RPC error object (code, message, data.errorName)."""
    if not isinstance(error, dict):
        return storable(f"error {str(error)[:REASON_MAX]}")
    data = error.get("data")
    name = data.get("errorName") if isinstance(data, dict) else None
    text = f"error {error.get('code')}: {error.get('message')}"
    if name:
        text += f" ({name})"
    return storable(text[:REASON_MAX])


def client_answer(message: dict[str, Any]) -> bytes:
    """Our reply to a request the agent sent us: deny what we cannot safely grant."""
    if message.get("method") == "session/request_permission":
        reply: dict[str, Any] = {"result": {"outcome": {"outcome": "cancelled"}}}
    else:
        reply = {"error": {"code": -32601, "message": "not supported by agentmaild"}}
    return encode({"jsonrpc": "2.0", "id": message.get("id"), **reply})


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"
