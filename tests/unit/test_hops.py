"""Shared thread hops (store/hops.py): one call at a time, queued calls share a hop, cancellation
never loses a result."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from agentmaild.store.hops import Hops
from agentmaild.store.notnow import NOT_NOW


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


async def _while_a_hop_runs(hops: Hops, **kind: bool) -> list[int]:
    """Make a call (``threading.get_ident``, marked ``kind``) while another hop holds the thread;
    it must not have run before that hop ends. The thread it ran in."""
    gate = threading.Event()
    seen: list[int] = []

    async def meanwhile() -> None:
        seen.append(await hops.run(threading.get_ident, **kind))

    async with anyio.create_task_group() as tg:
        tg.start_soon(hops.run, lambda: gate.wait(30))
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(meanwhile)
        await anyio.wait_all_tasks_blocked()
        assert seen == []
        gate.set()
    return seen


async def test_a_quick_read_runs_in_the_callers_thread_only_while_no_hop_runs() -> None:
    hops = Hops()
    here = threading.get_ident()
    assert await hops.run(threading.get_ident, quick=True) == here  # idle: no hop taken
    assert (hops.inline, hops.hops) == (1, 0)
    seen = await _while_a_hop_runs(hops, quick=True)  # it waits its turn in the thread
    assert seen and seen[0] != here and hops.inline == 1
    assert await hops.run(threading.get_ident) != here  # not marked quick: always a hop


async def test_an_inline_runner_takes_grouped_calls_only_while_no_hop_runs() -> None:
    tried: list[int] = []

    def inline(fn: Any) -> Any:
        tried.append(threading.get_ident())
        return fn()

    hops = Hops(inline=inline)
    here = threading.get_ident()
    assert await hops.run(threading.get_ident, grouped=True) == here  # idle: run at once
    assert (hops.inline_writes, hops.hops) == (1, 0)
    assert await hops.run(threading.get_ident) != here  # not grouped: always a hop
    seen = await _while_a_hop_runs(hops, grouped=True)  # it queues behind the hop, as ever
    assert seen and seen[0] != here
    assert tried == [here] and hops.inline_writes == 1


async def test_a_call_the_inline_runner_declines_takes_its_hop_once() -> None:
    ran: list[int] = []

    def work() -> str:
        ran.append(threading.get_ident())
        return "done"

    hops = Hops(inline=lambda fn: NOT_NOW)  # e.g. another process holds the write lock
    assert await hops.run(work, grouped=True) == "done"
    assert len(ran) == 1 and ran[0] != threading.get_ident()
    assert (hops.inline_writes, hops.hops) == (0, 1)


async def test_no_result_of_a_group_is_handed_back_before_the_group_commits() -> None:
    """A caller woken by the hop before reads its result only once its own hop is over: a
    group's calls have all run before its COMMIT, which may still fail and run them again."""
    first_gate, ran_all, commit = threading.Event(), threading.Event(), threading.Event()

    def group(calls: Any) -> None:
        for call in calls:
            call.run()
        ran_all.set()
        commit.wait(30)  # the COMMIT, slow

    hops = Hops(group)
    real = hops._hop

    async def busy_loop_hop(fn: Any, *args: Any) -> Any:
        """The second hop's thread runs its calls before the loop gets to the next waiter (a
        busy event loop: here, held until the group ran every call)."""
        if hops.hops == 0:
            return await real(fn, *args)
        thread = threading.Thread(target=fn, args=args)
        thread.start()
        ran_all.wait(30)  # blocks the event loop's thread, as a busy loop would be
        await anyio.to_thread.run_sync(thread.join, 30)

    hops._hop = busy_loop_hop  # type: ignore[assignment]
    results: dict[str, str] = {}

    async def grouped(name: str) -> None:
        results[name] = await hops.run(lambda: name, grouped=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(hops.run, lambda: first_gate.wait(30))
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(grouped, "b")
        tg.start_soon(grouped, "c")  # both queue behind the first hop, to share the next one
        await anyio.wait_all_tasks_blocked()
        first_gate.set()
        await anyio.to_thread.run_sync(ran_all.wait, 30)  # b and c ran; their group commits
        await anyio.wait_all_tasks_blocked()
        assert results == {}  # neither is told of a write that is not committed yet
        commit.set()
    assert results == {"b": "b", "c": "c"} and hops.hops == 2
