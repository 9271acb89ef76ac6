"""A busy Codex for the mid-turn proof and bench: the Responses API stand-in's ``tool_call``
answering one long turn with a tool call about every second until ``end()`` (``LongToolTurn``),
plus what reads the recorded requests.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Message
from agentmaild.store.records import InsertRequest
from tests.support.loopback_api import RecordedRequest
from tests.support.vendor_world import World

LONG_JOB = "LONG-JOB"


class LongToolTurn:
    """The stand-in's ``tool_call``: a call per request of the long job until ``end``."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.ended = threading.Event()

    def end(self) -> None:
        self.ended.set()

    def __call__(self, req: RecordedRequest) -> tuple[str, dict[str, Any]] | None:
        if self.ended.is_set() or LONG_JOB not in json.dumps(req.body):
            return None
        self.ended.wait(self.interval_s)  # the model "thinks" for a tool interval
        return None if self.ended.is_set() else ("agentmaild_test_tool", {"n": 1})


def tool_results(req: RecordedRequest) -> int:
    """The tool results a Responses request carries (one per call of its turn so far)."""
    items = req.body.get("input") if isinstance(req.body, dict) else None
    return sum(1 for i in items or [] if isinstance(i, dict)
               and i.get("type") == "function_call_output")  # fmt: skip


def most_tool_results(world: World) -> int:
    return max((tool_results(r) for r in world.api.model_requests()), default=0)


def send(world: World, to: str, body: str, priority: str = "normal") -> str:
    """Mail stored as a sender's would be (the channel under test looks for it itself)."""
    msg = Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject="s", body=body,
                  priority=priority, created_at=iso_now())  # type: ignore[arg-type]
    world.store.insert(InsertRequest(messages=(msg,), now=time.time()))
    return msg.id
