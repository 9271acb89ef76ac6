"""Following one turn of a long-lived stream-json agent: which events start, end or fail it.

Pure bookkeeping over parsed output lines, so the stdin channel's ack contract can be read (and
tested) apart from the process handling.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio

from agentmaild.channels.usage import UsageMeter
from agentmaild.mail.jsoninput import storable
from agentmaild.procs.lines import Line

REASON_MAX = 200


@dataclass(slots=True)
class Turn:
    """One line we wrote, followed through the events that say how its turn went."""

    uuid: str
    done: anyio.Event = field(default_factory=anyio.Event)
    replayed: bool = False
    lifecycle: bool = False
    started: bool = False
    result_error: bool | None = None
    summary: str = ""
    error: str | None = None
    usage: UsageMeter = field(default_factory=UsageMeter)  # what the turn cost (channels.usage)

    def settle(self, error: str | None) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


def parse_event(line: Line) -> dict[str, Any] | None:
    if line.truncated or not line.data.strip():
        return None
    try:
        event = json.loads(line.data)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def track(turn: Turn, event: dict[str, Any]) -> None:
    """Advance ``turn`` by one event of the agent's output; settles it when the turn ended."""
    kind = event.get("type")
    if kind == "command_lifecycle" and event.get("command_uuid") == turn.uuid:
        turn.lifecycle = True
        state = event.get("state")
        if state == "started":
            turn.started = True
        elif state == "completed" and not turn.started:
            # Claude skips a uuid it already holds: "completed" with no turn run.
            turn.settle("the CLI skipped the line (uuid already in its session)")
        elif state == "completed":
            failed = turn.result_error is True
            turn.settle(f"result is_error: {turn.summary}" if failed else None)
        elif state == "cancelled":
            turn.settle(f"turn cancelled: {turn.summary or 'no result'}")
    elif kind == "user" and event.get("uuid") == turn.uuid:
        turn.replayed = True
    elif kind == "result" and (turn.replayed or turn.lifecycle):
        turn.usage.feed(event)
        turn.result_error = event.get("is_error") is not False
        turn.summary = storable(str(event.get("result") or event.get("subtype") or "")[:REASON_MAX])
        if not turn.lifecycle:
            turn.settle(f"result is_error: {turn.summary}" if turn.result_error else None)
