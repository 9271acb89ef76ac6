"""Mid-turn delivery by ``turn/steer`` with the REAL ``codex app-server`` against the loopback
Responses API stand-in, which holds one long turn calling a tool about every second.

Default policy (``high``): urgent mail stored mid-turn is in the model's next request of that same
turn, under a delivery of its own acked once as ``mid-turn`` (Codex accepted the steer), and the
turn goes on; normal mail stored at the same moment waits, in no delivery, for the next turn.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import pytest

from tests.support.midturn_codex import LongToolTurn, most_tool_results, send, tool_results
from tests.support.vendor_env import vendor_binary
from tests.support.vendor_world import World, vendor_world
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(180)]

BOUND = 90.0


@pytest.fixture
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    argv = [vendor_binary("codex"), "app-server"]
    with vendor_world("codex", tmp_path_factory.mktemp("codex-mid"), argv) as world:
        yield world


async def test_urgent_mail_steers_the_running_turn_and_normal_mail_waits(world: World) -> None:
    world.register("erin", "codex-app")
    turn = LongToolTurn()
    world.api.tool_call = turn  # type: ignore[attr-defined]
    send(world, "erin", "LONG-JOB: work until told otherwise", "normal")
    batch, text = world.claim("erin")
    async with world.channel("erin") as channel:
        done = anyio.Event()

        async def deliver() -> None:
            await channel.deliver(batch, text)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver)
            await anyio.to_thread.run_sync(
                wait_for, lambda: most_tool_results(world) >= 2, BOUND, "two tool calls")
            sent_at = time.monotonic()
            urgent = send(world, "erin", "URGENT-MID: the API changed", "urgent")
            normal = send(world, "erin", "NORMAL-LATER: lunch at noon", "normal")
            with anyio.fail_after(BOUND):
                seen = await anyio.to_thread.run_sync(world.api.wait_for, "URGENT-MID", BOUND)
            print(f"urgent mail in the model's context {seen.received_at - sent_at:.2f}s "
                  "after it was stored")  # fmt: skip
            assert "LONG-JOB" in seen.all_text() and tool_results(seen) >= 2  # the same turn
            assert "NORMAL-LATER" not in seen.all_text() and not done.is_set()
            history = list(world.store.list_attempts(agent="erin"))
            assert [(a.outcome, a.message_ids) for a in history] == [("mid-turn", (urgent,))]
            assert f"(delivery {history[0].delivery_id})" in seen.all_text()
            # the turn goes on with the urgent mail in it, the normal mail in no delivery
            calls = tool_results(seen)
            await anyio.to_thread.run_sync(
                wait_for, lambda: most_tool_results(world) > calls, BOUND, "more tool calls")
            assert not any("NORMAL-LATER" in r.all_text() for r in world.api.model_requests())
            stored = world.store.get_message(normal)
            assert stored is not None and not stored.read and stored.delivery_id is None
            turn.end()
            with anyio.fail_after(BOUND):
                await done.wait()
        assert world.store.ack_delivery(batch.delivery_id, now=time.time()) == 1
        after, after_text = world.claim("erin")
        assert after.message_ids == (normal,)  # the urgent one is never claimed again
        with anyio.fail_after(BOUND):
            await channel.deliver(after, after_text)
        assert "NORMAL-LATER" in world.api.conversation_requests("NORMAL-LATER")[-1].all_text()
    assert len(world.store.list_attempts(agent="erin")) == 1
