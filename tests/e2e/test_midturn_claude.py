"""Mid-turn delivery with the REAL Claude Code CLI, headless (daemon spawn turns, agentmaild's
hooks installed in the project), against the loopback model stand-in holding one long turn that
calls a tool about every second (``tests/support/midturn_rig``).

Default policy (``high``): urgent mail sent mid-turn is in the model's next request of that same
turn (read off the request body the stand-in got), under a delivery of its own acked once as
``mid-turn``, and the turn goes on; normal mail sent at the same moment reaches the model only in
the next turn. Policy ``none``: the urgent mail waits for the turn's end too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.midturn_rig import Rig, busy_claude, start_long_turn
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.claude, pytest.mark.timeout(240)]


def _next_turn(rig: Rig, marker: str, long_job: str) -> None:
    """``marker`` reached the model in a later turn: a prompt of its own, not the long job's."""
    seen = rig.stub.wait_for(marker, timeout=90, last_user=True)
    assert long_job not in seen.last_user_text()


@pytest.mark.parametrize("channel", ["spawn", "stdin"])
def test_urgent_mail_enters_the_running_turn_and_normal_mail_waits(
    tmp_path: Path, channel: str
) -> None:
    with busy_claude(tmp_path, channel=channel) as rig:
        job = start_long_turn(rig)
        sent_at = time.monotonic()
        urgent = rig.send("stop that", "URGENT-MID: the API changed", priority="urgent")
        normal = rig.send("fyi", "NORMAL-LATER: lunch at noon")
        seen = rig.stub.wait_for("URGENT-MID", timeout=60)
        latency = seen.received_at - sent_at
        print(f"urgent mail in the model's context {latency:.2f}s after the send")
        # the same turn: the long job's prompt and its tool results come before it
        # Claude Code 2.x puts a hook's additionalContext after the tool result it followed
        assert job in seen.all_text() and rig.tool_calls_seen(job) >= 2
        assert "URGENT-MID" in json.dumps(seen.messages[-1])
        assert "NORMAL-LATER" not in seen.all_text()
        # the same framing as every delivery, under its delivery id, acked once as mid-turn
        ((delivery_id, outcome),) = rig.history(urgent)
        assert outcome == "mid-turn" and f"(delivery {delivery_id})" in seen.all_text()
        assert rig.store.get_message(urgent).acked_by == delivery_id  # type: ignore[union-attr]
        # the turn goes on: more tool calls, the urgent mail once in its context, no normal mail
        calls = rig.tool_calls_seen(job)
        rig.stub.wait_for_count(lambda r: r.is_messages and "URGENT-MID" in r.all_text(), 3,
                                timeout=60)  # fmt: skip
        assert rig.tool_calls_seen(job) > calls
        last = rig.requests_with("URGENT-MID")[-1]
        assert last.all_text().count(f"message 1/1: {urgent}") == 1
        assert not rig.requests_with("NORMAL-LATER")
        assert rig.store.get_message(normal).read is False  # type: ignore[union-attr]
        rig.turn.end()
        _next_turn(rig, "NORMAL-LATER", job)
        wait_for(lambda: rig.history(normal), 60, "the normal mail's ack")
        assert [o for _, o in rig.history(normal)] == ["acked"]
        assert len(rig.history(urgent)) == 1  # never delivered a second time
        assert all(r.all_text().count(f"message 1/1: {urgent}") <= 1
                   for r in rig.stub.messages_requests())  # fmt: skip


def test_policy_none_keeps_even_urgent_mail_for_the_turns_end(tmp_path: Path) -> None:
    with busy_claude(tmp_path, policy="none") as rig:
        job = start_long_turn(rig)
        urgent = rig.send("stop that", "URGENT-WAITS", priority="urgent")
        # two more tool calls with the urgent mail waiting: none of them carries it
        calls = rig.tool_calls_seen(job)
        wait_for(lambda: rig.tool_calls_seen(job) >= calls + 2, 60, "two more tool calls")
        assert not rig.requests_with("URGENT-WAITS")
        assert rig.store.get_message(urgent).read is False  # type: ignore[union-attr]
        rig.turn.end()
        _next_turn(rig, "URGENT-WAITS", job)
        wait_for(lambda: rig.history(urgent), 60, "the urgent mail's ack")
        assert [o for _, o in rig.history(urgent)] == ["acked"]
