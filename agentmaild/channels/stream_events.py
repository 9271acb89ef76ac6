"""What a turn's stream-json stdout says, as far as the ack decision needs it (``spawn``), with
what it cost (``usage``) and its last lines (``login``, for a reason a person can act on)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentmaild.channels.login import OutputTail
from agentmaild.channels.usage import UsageMeter
from agentmaild.mail.jsoninput import storable
from agentmaild.procs.lines import Line

_REASON_MAX = 200


@dataclass(slots=True)
class StreamJsonEvents:
    """What a turn's stream-json stdout said, as far as the ack decision needs it."""

    result_seen: bool = False
    result_is_error: bool | None = None
    result_summary: str = ""
    user_uuids: set[str] = field(default_factory=set)  # replayed user lines
    lifecycle: dict[str, str] = field(default_factory=dict)  # uuid -> last command_lifecycle state
    lines: int = 0
    unparsed: int = 0
    usage: UsageMeter = field(default_factory=UsageMeter)  # what the turn cost (channels.usage)
    tail: OutputTail = field(default_factory=OutputTail)  # stdout's and stderr's last lines

    def feed(self, line: Line) -> None:
        self.lines += 1
        self.tail.feed(line)
        if line.truncated or not line.data.strip():
            self.unparsed += line.truncated
            return
        try:
            event = json.loads(line.data)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or absurdly nested
            self.unparsed += 1
            return
        if isinstance(event, dict):
            self.usage.feed(event)
            self._record(event)

    def _record(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "result":
            self.result_seen = True
            self.result_is_error = event.get("is_error") is not False
            detail = event.get("subtype") or ""
            if self.result_is_error and isinstance(event.get("result"), str):
                detail = f"{detail}: {event['result']}" if detail else event["result"]
            self.result_summary = storable(str(detail)[:_REASON_MAX])
        elif kind == "user" and isinstance(event.get("uuid"), str):
            self.user_uuids.add(event["uuid"])
        elif kind == "command_lifecycle":
            # Claude Code names our line in ``command_uuid``; the event's own ``uuid`` is new.
            target = event.get("command_uuid", event.get("uuid"))
            if isinstance(target, str):
                self.lifecycle[target] = str(event.get("state") or event.get("status") or "")
