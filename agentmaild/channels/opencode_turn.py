"""TurnWatch: one OpenCode server turn followed through the server's events, for the ack rule.

Fed every event of ``GET /event`` after our ``prompt_async``; only our session's count. The turn
starts with ``session.status`` busy (or retry) and ends with the next ``session.idle`` (or
``session.status`` idle). ``error`` is the first ``session.error`` or failed assistant message on
the way; ``gave_up`` is set when OpenCode's own retries pass ``max_retries`` (it retries a 5xx or
429 without end); ``usage`` sums the turn's ``step-finish`` parts (tokens, cost). Pure
bookkeeping: the channel does the I/O.
"""

from __future__ import annotations

from typing import Any

from agentmaild.channels.usage import UsageMeter
from agentmaild.errors import AgentUnavailable
from agentmaild.mail.jsoninput import storable
from agentmaild.models import Agent

REASON_MAX = 200
DEFAULT_MAX_RETRIES = 2


def max_retries(agent: Agent) -> int:
    """``settings.max_retries``: OpenCode's own retries of a turn before we give up on it."""
    value = agent.settings.get("max_retries", DEFAULT_MAX_RETRIES)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AgentUnavailable(f"settings.max_retries must be a whole number ≥ 0, got {value!r}")
    return value


class TurnWatch:
    def __init__(self, session: str, max_retries: int) -> None:
        self.session = session
        self.max_retries = max_retries
        self.started = False
        self.ended = False
        self.error: str | None = None
        self.gave_up: str | None = None
        self.usage = UsageMeter()

    def see(self, event: dict[str, Any]) -> bool:
        """Take one event; True when it was one of our session's."""
        props = event.get("properties")
        if not isinstance(props, dict) or props.get("sessionID") != self.session:
            return False
        self.usage.feed(event)
        kind = event.get("type")
        if kind == "session.status":
            self._status(props.get("status"))
        elif kind == "session.idle":
            self.ended = self.ended or self.started
        elif kind == "session.error":
            self._fail(props.get("error"))
        elif kind == "message.updated":
            info = props.get("info")
            if isinstance(info, dict) and info.get("role") == "assistant" and info.get("error"):
                self._fail(info.get("error"))
        return True

    def _status(self, status: object) -> None:
        kind = status.get("type") if isinstance(status, dict) else None
        if kind in ("busy", "retry"):
            self.started = True
        elif kind == "idle":
            self.ended = self.ended or self.started
        if kind == "retry" and isinstance(status, dict):
            attempt = status.get("attempt")
            if isinstance(attempt, int) and attempt > self.max_retries:
                why = f"gave up after {attempt - 1} API retries: {status.get('message')}"
                self.gave_up = storable(why[:REASON_MAX])

    def _fail(self, error: object) -> None:
        if self.error is None:
            self.error = describe(error)


def describe(error: object) -> str:
    """An OpenCode error object (``name``, ``data.message``, ``data.statusCode``) in one line."""
    if not isinstance(error, dict):
        return storable(str(error)[:REASON_MAX])
    data = error.get("data")
    if not isinstance(data, dict):
        data = {}
    code = data.get("statusCode")
    text = f"{error.get('name')}: {data.get('message')}" + (f" (HTTP {code})" if code else "")
    return storable(text[:REASON_MAX])
