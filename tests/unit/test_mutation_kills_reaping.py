"""The supervisor's reaping, in-process: a real SQLite store and poll gate, FakeChannel loops.

Written against the survivors of ``make mutate``: an expired claim is reaped on the first tick
and redelivered under its own id; after that a sweep is due once a lease (at most every 30 s),
not on every tick in between; a tick with nothing changed and no sweep due reads nothing more
than ``data_version``; a tick whose store read fails is logged and the next one goes on; and
every tick looks for a loop busy past its warning.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.base import Channel
from agentmaild.channels.testing import FakeChannel
from agentmaild.config import Config
from agentmaild.config.sections import DaemonConfig
from agentmaild.delivery.supervisor import Supervisor
from agentmaild.errors import StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.aio import AsyncMailStore, PollGate
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.waiting import wait_until


class Clock:
    """A fixed monotonic clock that counts its reads (the tick reads it every time round)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


class CountingGate(PollGate):
    """The real poll gate, counting the ticks that got as far as asking for pending agents or
    for the registry's version; ``fail_next`` makes the next reads of ``changed`` fail."""

    asked = 0
    registry_reads = 0
    fail_next = 0

    async def changed(self) -> bool:
        if self.fail_next:
            self.fail_next -= 1
            raise StoreError("poll query failed: disk I/O error")
        return await super().changed()

    async def registry_version(self) -> int:
        self.registry_reads += 1
        return await super().registry_version()

    async def pending_agents(self) -> set[str]:
        found = await super().pending_agents()
        self.asked += 1
        return found


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "mail.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteMailStore]:
    s = SqliteMailStore(db)
    s.add_agent(Agent(name="lead", capability="lead"))
    for name in ("alice", "bob"):
        s.add_agent(Agent(name=name, capability="builder", channel="spawn"))
    yield s
    s.close()


class Rig:
    def __init__(
        self, store: SqliteMailStore, lease_s: float, gate: PollGate | None, *,
        busy: frozenset[str] = frozenset(), busy_warn_after_s: float = 600.0,
    ) -> None:
        self.channels: dict[str, FakeChannel] = {}
        self.clock = Clock()
        self.busy = busy
        config = Config(daemon=DaemonConfig(poll_interval_s=0.01, lease_s=lease_s,
                                            busy_warn_after_s=busy_warn_after_s))
        self.supervisor = Supervisor(
            AsyncMailStore(store), Mailer(store), config, self.channel, gate=gate, clock=self.clock
        )

    def channel(self, agent: Agent, config: Config) -> Channel:
        self.channels[agent.name] = FakeChannel(busy=agent.name in self.busy)
        return self.channels[agent.name]

    def delivered(self, agent: str) -> list[str]:
        channel = self.channels.get(agent)
        return [b.delivery_id for b, _ in channel.delivered] if channel else []


def expired_claim(store: SqliteMailStore, agent: str) -> str:
    Mailer(store).send(sender="lead", to=agent, subject="s", body="b")
    batch = store.claim(agent, max_messages=5, max_chars=10_000, lease_s=1.0, now=time.time() - 60)
    assert batch is not None
    return batch.delivery_id


def state_of(store: SqliteMailStore, delivery_id: str) -> str:
    row = store.connection.execute(
        "SELECT state FROM am_deliveries WHERE id = ?", (delivery_id,)
    ).fetchone()
    return str(row["state"])


@pytest.mark.parametrize("gated", [True, False])
async def test_the_first_tick_reaps_an_expired_claim_and_redelivers_it(
    store: SqliteMailStore, db: Path, gated: bool
) -> None:
    lost = expired_claim(store, "alice")
    gate = await CountingGate.open(db) if gated else None
    rig = Rig(store, 300.0, gate)
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(rig.supervisor.run)
            await wait_until(lambda: rig.delivered("alice"))
            Mailer(store).send(sender="lead", to="bob", subject="s", body="b")
            await wait_until(lambda: rig.delivered("bob"))  # a changed store wakes its loop
            rig.supervisor.stop()
    if gate is not None:
        await gate.aclose()
    assert rig.delivered("alice") == [lost]
    assert rig.channels["alice"].delivered[0][0].attempt == 2
    assert state_of(store, lost) == "acked"
    [line] = [e for e in logs if e["event"] == "supervisor.reaped_expired"]
    assert line["deliveries"] == [lost] and line["log_level"] == "warning"


@pytest.mark.parametrize(("lease_s", "sweep_after_s"), [(5.0, 5.0), (300.0, 30.0)])
async def test_a_sweep_is_due_once_a_lease_and_not_on_every_tick(
    store: SqliteMailStore, db: Path, lease_s: float, sweep_after_s: float
) -> None:
    gate = await CountingGate.open(db)
    rig = Rig(store, lease_s, gate)
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(rig.supervisor.run)
            await wait_until(lambda: gate.asked >= 1)  # the first tick swept (nothing to reap)
            await wait_until(lambda: {r["state"] for r in rig.supervisor.snapshot().values()}
                             == {"idle"})
            lost = expired_claim(store, "alice")
            Mailer(store).send(sender="bob", to="lead", subject="s", body="b")  # no loop: pull
            Mailer(store).send(sender="lead", to="bob", subject="s", body="b")
            # Bob's mail is delivered by a tick that ran after the claim expired: no sweep yet.
            await wait_until(lambda: rig.delivered("bob"))
            assert state_of(store, lost) == "claimed"
            assert not [e for e in logs if e["event"] == "supervisor.reaped_expired"]
            rig.clock.now += sweep_after_s  # one lease (capped at 30 s) since the last sweep
            await wait_until(lambda: rig.delivered("alice"))
            rig.supervisor.stop()
    await gate.aclose()
    assert rig.delivered("alice") == [lost]


async def test_an_unchanged_store_is_not_asked_for_pending_agents(
    store: SqliteMailStore, db: Path
) -> None:
    gate = await CountingGate.open(db)
    rig = Rig(store, 300.0, gate)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(rig.supervisor.run)
            await wait_until(lambda: gate.asked >= 1)
            seen, reads = gate.asked, rig.clock.reads
            registry_reads = gate.registry_reads
            await wait_until(lambda: rig.clock.reads >= reads + 20)  # many ticks, no change
            assert gate.asked == seen and gate.registry_reads == registry_reads
            rig.supervisor.stop()
    await gate.aclose()



async def test_a_failed_tick_is_logged_and_the_next_one_goes_on(
    store: SqliteMailStore, db: Path
) -> None:
    gate = await CountingGate.open(db)
    rig = Rig(store, 300.0, gate)
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(rig.supervisor.run)
            await wait_until(lambda: gate.asked >= 1)
            gate.fail_next = 1
            await wait_until(lambda: gate.fail_next == 0)
            Mailer(store).send(sender="lead", to="bob", subject="s", body="b")
            await wait_until(lambda: rig.delivered("bob"))
            rig.supervisor.stop()
    await gate.aclose()
    assert [e for e in logs if e["event"] == "supervisor.tick_failed"] == [{
        "event": "supervisor.tick_failed", "log_level": "warning",
        "error": "poll query failed: disk I/O error",
    }]


async def test_each_tick_warns_of_a_loop_busy_past_its_warning(
    store: SqliteMailStore, db: Path
) -> None:
    gate = await CountingGate.open(db)
    rig = Rig(store, 300.0, gate, busy=frozenset({"alice"}), busy_warn_after_s=5.0)
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(rig.supervisor.run)
            await wait_until(lambda: rig.supervisor.snapshot()["alice"]["state"] == "busy")
            rig.clock.now += 5.0  # the loops share the supervisor's clock
            await wait_until(lambda: any(e["event"] == "delivery.busy_long" for e in logs))
            rig.supervisor.stop()
    await gate.aclose()
    [line] = [e for e in logs if e["event"] == "delivery.busy_long"]
    assert (line["agent"], line["busy_for_s"], line["delivery_id"]) == ("alice", 5.0, None)
