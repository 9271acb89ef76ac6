"""Send → in the model's context for a busy agent (issue 30): urgent mail (mid-turn, default
policy ``high``) against normal mail (turn boundary), sent at the same moment, in the same run.

The agent's turn calls a tool about once a second (the model stand-in "thinks" for
``INTERVAL_S`` before each call). Both messages go out together; urgent is timed to the first
model request holding it (the same turn: the hook's additionalContext, or Codex's turn/steer);
the turn is then let run ``TURN_TAIL`` more tool calls and ends, and normal is timed to the first
request holding it (the next turn). Per channel:

- ``claude spawn`` / ``claude stdin``: the real Claude Code CLI run by a real ``agentmaild
  serve`` (hooks installed in the project; PostToolUse hands the mail over);
- ``codex-app``: the real ``codex app-server`` driven by the channel (``turn/steer``).

Ours: urgent (median of the rounds); baseline: normal. Target: urgent ≤ INTERVAL_S + 0.5 s.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from benchlib import Figure

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.midturn_codex import LONG_JOB, LongToolTurn, most_tool_results  # noqa: E402
from tests.support.midturn_codex import send as store_mail  # noqa: E402
from tests.support.midturn_rig import Rig, busy_claude  # noqa: E402
from tests.support.vendor_env import vendor_binary  # noqa: E402
from tests.support.vendor_world import World, vendor_world  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

INTERVAL_S = 1.0
TURN_TAIL = 2  # tool calls the turn makes after the urgent mail reached it, then it ends
BOUND_S = 120.0


def _claude_round(rig: Rig, n: int) -> tuple[float, float]:
    rig.turn.ended.clear()
    job = f"LONG-JOB round {n}"
    rig.send("the long job", job)
    deadline = time.monotonic() + BOUND_S
    while rig.tool_calls_seen(job) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    sent = time.monotonic()
    rig.send("stop that", f"URGENT-{n}", priority="urgent")
    rig.send("fyi", f"NORMAL-{n}")
    urgent = rig.stub.wait_for(f"URGENT-{n}", timeout=BOUND_S).received_at - sent
    calls = rig.tool_calls_seen(f"URGENT-{n}")
    deadline = time.monotonic() + BOUND_S
    while rig.tool_calls_seen(f"URGENT-{n}") < calls + TURN_TAIL and time.monotonic() < deadline:
        time.sleep(0.05)
    rig.turn.end()
    normal = rig.stub.wait_for(f"NORMAL-{n}", timeout=BOUND_S).received_at - sent
    return urgent, normal


def claude(channel: str, rounds: int) -> tuple[list[float], list[float]]:
    urgent, normal = [], []
    with tempfile.TemporaryDirectory(prefix="bench-midturn-") as tmp, \
            busy_claude(Path(tmp), INTERVAL_S, channel=channel) as rig:  # fmt: skip
        for n in range(rounds):
            u, v = _claude_round(rig, n)
            urgent.append(u)
            normal.append(v)
            time.sleep(0.5)  # the normal mail's turn ends and is acked
    return urgent, normal


async def _codex_round(world: World, channel: object, n: int) -> tuple[float, float]:
    turn = LongToolTurn(INTERVAL_S)
    world.api.tool_call = turn  # type: ignore[attr-defined]
    store_mail(world, "bench", f"{LONG_JOB} round {n}")
    batch, text = world.claim("bench")
    result: dict[str, float] = {}

    async def deliver() -> None:
        await channel.deliver(batch, text)  # type: ignore[attr-defined]

    async with anyio.create_task_group() as tg:
        tg.start_soon(deliver)
        base = most_tool_results(world)
        await anyio.to_thread.run_sync(
            wait_for, lambda: most_tool_results(world) > base, BOUND_S, "a tool call")
        sent = time.monotonic()
        store_mail(world, "bench", f"URGENT-{n}", "urgent")
        store_mail(world, "bench", f"NORMAL-{n}")
        seen = await anyio.to_thread.run_sync(world.api.wait_for, f"URGENT-{n}", BOUND_S)
        result["urgent"] = seen.received_at - sent
        calls = most_tool_results(world)
        await anyio.to_thread.run_sync(
            wait_for, lambda: most_tool_results(world) >= calls + TURN_TAIL, BOUND_S, "the tail")
        turn.end()
    world.store.ack_delivery(batch.delivery_id, now=time.time())
    after, after_text = world.claim("bench")
    await channel.deliver(after, after_text)  # type: ignore[attr-defined]
    world.store.ack_delivery(after.delivery_id, now=time.time())
    normal = world.api.wait_for(f"NORMAL-{n}", BOUND_S).received_at - sent
    return result["urgent"], normal


def codex_app(rounds: int) -> tuple[list[float], list[float]]:
    async def run(world: World) -> tuple[list[float], list[float]]:
        urgent, normal = [], []
        async with world.channel("bench") as channel:
            for n in range(rounds):
                u, v = await _codex_round(world, channel, n)
                urgent.append(u)
                normal.append(v)
        return urgent, normal

    with tempfile.TemporaryDirectory(prefix="bench-midturn-codex-") as tmp, \
            vendor_world("codex", Path(tmp), [vendor_binary("codex"), "app-server"]) as world:
        world.register("bench", "codex-app")
        return anyio.run(run, world)


def _figure(channel: str, urgent: list[float], normal: list[float]) -> Figure:
    u, v = statistics.median(urgent), statistics.median(normal)
    return Figure(
        name=f"mid-turn send→context, urgent vs normal ({channel})",
        ours=u, unit="s", baseline=v, baseline_label="normal mail, next turn",
        target=("<=", INTERVAL_S + 0.5), target_on="ours",
        notes=[f"tool interval {INTERVAL_S:g} s; urgent {[round(x, 2) for x in urgent]} s, "
               f"normal {[round(x, 2) for x in normal]} s (turn ends {TURN_TAIL} tool calls "
               "after the urgent mail reached it)"],
    )  # fmt: skip


def run(quick: bool) -> list[Figure]:
    rounds = 1 if quick else 3
    figures = [_figure(f"claude {c}", *claude(c, rounds)) for c in ("spawn", "stdin")]
    figures.append(_figure("codex-app turn/steer", *codex_app(rounds)))
    return figures


if __name__ == "__main__":
    for f in run("--quick" in sys.argv):
        print(f.name, f"{f.ours:.2f}s vs {f.baseline:.2f}s", f.verdict(), *f.notes)
