"""A store that fails around a claim must not strand the claimed batch for a whole lease.

Seen with a PostgreSQL restart mid-run: a claim committed on the server while its connection
died, so the loop saw an error, crashed and restarted, and the batch stayed claimed by nobody
until its 300 s lease ended. Two ways in, each tested over the real SQLite store failing on cue
(tests/support/faulty_store.py): a claim whose answer is lost (the supervisor re-queues the
agent's claims before the next loop runs, and a failed re-queue is one more crash), and a
failed look for mail read elsewhere after a claim (the batch is delivered whole).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.base import Channel
from agentmaild.channels.testing import FakeChannel
from agentmaild.config import Config
from agentmaild.config.sections import DaemonConfig
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.supervisor import Supervisor
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.errors import StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.aio import AsyncMailStore
from tests.support.faulty_store import FaultyStore
from tests.support.waiting import wait_until

LEASE_S = 300.0  # far longer than any wait below: only the re-queue can hand the batch back


def lost_answer() -> StoreError:
    return StoreError("store write failed: server closed the connection unexpectedly")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FaultyStore]:
    s = FaultyStore(tmp_path / "mail.db")
    s.add_agent(Agent(name="lead", capability="lead"))
    s.add_agent(Agent(name="alice", capability="builder", channel="spawn"))
    yield s
    s.close()


class Rig:
    def __init__(self, store: FaultyStore, kind: type[FakeChannel] = FakeChannel) -> None:
        self.channels: list[FakeChannel] = []
        self.kind = kind
        config = Config(daemon=DaemonConfig(poll_interval_s=0.01, lease_s=LEASE_S,
                                            backoff_initial_s=0.01, backoff_max_s=0.05))
        self.supervisor = Supervisor(AsyncMailStore(store), Mailer(store), config, self.channel)

    def channel(self, agent: Agent, config: Config) -> Channel:
        self.channels.append(self.kind())
        return self.channels[-1]

    def delivered(self) -> list[str]:
        return [b.delivery_id for c in self.channels for b, _ in c.delivered]


def deliveries(store: FaultyStore) -> list[tuple[str, str]]:
    rows = store.connection.execute("SELECT id, state FROM am_deliveries ORDER BY id").fetchall()
    return [(str(r["id"]), str(r["state"])) for r in rows]


@pytest.mark.parametrize("requeue_fails", [0, 2])
async def test_a_claim_whose_answer_was_lost_is_requeued_before_the_loop_restarts(
    store: FaultyStore, requeue_fails: int
) -> None:
    Mailer(store).send(sender="lead", to="alice", subject="s", body="b")
    store.lost["claim"] = [lost_answer()]
    store.faults["reap_agent"] = [lost_answer() for _ in range(requeue_fails)]
    rig = Rig(store)
    with capture_logs() as logs, anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(rig.supervisor.run)
            await wait_until(lambda: rig.delivered())
            rig.supervisor.stop()
    [(claimed, state)] = deliveries(store)  # one delivery: the lost claim's, redelivered
    assert rig.delivered() == [claimed] and state == "acked"
    assert rig.channels[-1].delivered[0][0].attempt == 2
    crashes = [e for e in logs if e["event"] == "supervisor.loop_crashed"]
    assert len(crashes) == 1 + requeue_fails
    [line] = [e for e in logs if e["event"] == "supervisor.requeued_unsure_claims"]
    assert line["agent"] == "alice" and line["deliveries"] == [claimed]
    assert store.calls["reap_agent"] == 1 + requeue_fails


class CrashOnce(FakeChannel):
    """A channel whose first busy check raises: a loop crash that is not the claim's."""

    crashed = False

    async def is_busy(self) -> bool:
        if not CrashOnce.crashed:
            CrashOnce.crashed = True
            raise RuntimeError("channel bug")
        return await super().is_busy()


async def test_a_loop_that_crashed_before_claiming_requeues_nothing(store: FaultyStore) -> None:
    Mailer(store).send(sender="lead", to="alice", subject="s", body="b")
    rig = Rig(store, CrashOnce)
    with capture_logs() as logs, anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(rig.supervisor.run)
            await wait_until(lambda: rig.delivered())
            rig.supervisor.stop()
    assert len([e for e in logs if e["event"] == "supervisor.loop_crashed"]) == 1
    assert "reap_agent" not in store.calls
    [(claimed, state)] = deliveries(store)
    assert rig.delivered() == [claimed] and state == "acked"


async def test_a_failed_look_for_mail_read_elsewhere_delivers_the_batch_whole(
    store: FaultyStore,
) -> None:
    for n in range(2):
        Mailer(store).send(sender="lead", to="alice", subject="s", body=f"b{n}")
    store.faults["unread_among"] = [lost_answer()]
    agent = store.get_agent("alice")
    assert agent is not None
    channel = FakeChannel()
    loop = DeliveryLoop(agent, channel, AsyncMailStore(store), Mailer(store),
                        LoopSettings(lease_s=LEASE_S))
    with capture_logs() as logs:
        assert await loop.step() is StepResult.DELIVERED
    [(batch, _)] = channel.delivered
    assert len(batch.messages) == 2
    assert deliveries(store) == [(batch.delivery_id, "acked")]
    [line] = [e for e in logs if e["event"] == "delivery.recheck_failed"]
    assert line["delivery_id"] == batch.delivery_id and "connection" in line["error"]
    assert not loop.claim_unsure
