"""Shared thread hops (store/hops.py): one call at a time, queued calls share a hop, cancellation
never loses a result."""

from __future__ import annotations

import threading

import anyio
import pytest

from agentmaild.store.hops import Hops


async def test_calls_queued_meanwhile_share_one_hop_and_keep_their_order() -> None:
    hops = Hops()
    gate = threading.Event()
    order: list[int] = []
    results: dict[int, int] = {}

    def first() -> int:
        gate.wait(30)
        order.append(0)
        return 0

    async def call(i: int) -> None:
        def work() -> int:
            order.append(i)
            return i * 10

        results[i] = await hops.run(work)

    async with anyio.create_task_group() as tg:
        tg.start_soon(hops.run, first)
        await anyio.wait_all_tasks_blocked()
        for i in range(1, 21):
            tg.start_soon(call, i)
        await anyio.wait_all_tasks_blocked()
        gate.set()  # the first hop ends; the 20 queued meanwhile run in the next one
    assert order == list(range(21))
    assert results == {i: i * 10 for i in range(1, 21)}
    assert (hops.hops, hops.calls) == (2, 21)


async def test_an_error_reaches_its_own_caller_only() -> None:
    hops = Hops()

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await hops.run(boom)
    assert await hops.run(lambda: 7) == 7


async def test_a_cancelled_caller_still_gets_its_result_first() -> None:
    hops = Hops()
    started, gate = threading.Event(), threading.Event()
    got: list[int] = []

    def slow() -> int:
        started.set()
        gate.wait(30)
        return 42

    async def caller(scope_box: list[anyio.CancelScope]) -> None:
        with anyio.CancelScope() as scope:
            scope_box.append(scope)
            got.append(await hops.run(slow))  # the result arrives despite the cancel
            await anyio.sleep(30)  # the next checkpoint delivers the cancellation
        got.append(-1)

    box: list[anyio.CancelScope] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(caller, box)
        await anyio.to_thread.run_sync(started.wait, 30)
        box[0].cancel()
        gate.set()
    assert got == [42, -1]


async def test_a_quick_read_runs_in_the_callers_thread_only_while_no_hop_runs() -> None:
    hops = Hops()
    here = threading.get_ident()
    assert await hops.run(threading.get_ident, quick=True) == here  # idle: no hop taken
    assert (hops.inline, hops.hops) == (1, 0)
    gate = threading.Event()
    seen: list[int] = []

    async def quick_meanwhile() -> None:
        seen.append(await hops.run(threading.get_ident, quick=True))

    async with anyio.create_task_group() as tg:
        tg.start_soon(hops.run, lambda: gate.wait(30))
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(quick_meanwhile)  # a hop is running: it waits its turn in the thread
        await anyio.wait_all_tasks_blocked()
        assert seen == []
        gate.set()
    assert seen and seen[0] != here and hops.inline == 1
    assert await hops.run(threading.get_ident) != here  # not marked quick: always a hop
