"""HistoryPruner: expired delivery history goes at start and each tick, with reloaded settings."""

from __future__ import annotations

import anyio
from structlog.testing import capture_logs

from agentmaild.config import StoreConfig
from agentmaild.daemon.retention import HistoryPruner
from agentmaild.models import Attempt
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.memory import MemoryMailStore
from tests.support.waiting import wait_until

NOW = 1_700_000_000.0
DAY_S = 86400.0


def seeded(*ages_days: float) -> MemoryMailStore:
    store = MemoryMailStore()
    for n, age in enumerate(ages_days):
        store.record_attempt(
            Attempt(
                delivery_id=f"dlv-{n:08d}",
                agent="bob",
                message_ids=(),
                attempt=1,
                outcome="acked",
                at=NOW - age * DAY_S,
            )
        )
    return store


async def test_prunes_at_start_then_each_tick_with_the_current_settings() -> None:
    store = seeded(40, 10, 1)
    settings = [StoreConfig()]  # a SIGHUP swaps the config; the pruner reads it each pass
    stop = anyio.Event()
    pruner = HistoryPruner(
        AsyncMailStore(store), lambda: settings[-1], stop, interval_s=0.01, wall=lambda: NOW
    )
    with capture_logs() as logs, anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pruner.run)
            await wait_until(lambda: len(store.list_attempts()) == 2)
            settings.append(StoreConfig(attempts_keep_days=5))
            await wait_until(lambda: len(store.list_attempts()) == 1)
            stop.set()  # run() returns by itself: the task group exits without a cancel
    assert [a.delivery_id for a in store.list_attempts()] == ["dlv-00000002"]
    pruned = [(e["deleted"], e["keep_days"]) for e in logs if e["event"] == "daemon.history_pruned"]
    assert pruned == [(1, 30.0), (1, 5.0)]


async def test_a_failing_store_is_logged_not_fatal() -> None:
    store = seeded(40)
    store.close()

    class Broken(AsyncMailStore):
        async def purge_attempts(self, *, older_than: float) -> int:
            from agentmaild.errors import StoreError

            raise StoreError("disk I/O error")

    pruner = HistoryPruner(Broken(store), StoreConfig, anyio.Event(), wall=lambda: NOW)
    with capture_logs() as logs:
        assert await pruner.prune() == 0
    assert [e["error"] for e in logs if e["event"] == "daemon.history_prune_failed"] == [
        "disk I/O error"
    ]
