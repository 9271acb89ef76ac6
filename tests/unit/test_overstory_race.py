"""Issue 16 item 5: ``ov mail check`` reads mail the daemon has claimed, before it is injected.

The race is set up exactly: the store's claim returns, then Overstory reads, then the loop goes on
(``ReadAfterClaim`` runs Overstory's read right after the real claim). A mixed team of both
registries then gets group mail, banners and refusals the same way from either tool.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.channels.testing import FakeChannel
from agentmaild.delivery.loop import DeliveryLoop
from agentmaild.delivery.types import LoopSettings, StepResult
from agentmaild.errors import RecipientRefused
from agentmaild.hot import check as fast
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Batch
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.overstory import OverstoryProject

SETTINGS = LoopSettings(poll_interval_s=0.01, lease_s=30.0, max_attempts=3)


class ReadAfterClaim(AsyncMailStore):
    """The real store; right after a claim returns, Overstory reads (the race, made certain)."""

    def __init__(self, store: SqliteMailStore, overstory_reads: Callable[[], object]) -> None:
        super().__init__(store)
        self.overstory_reads = overstory_reads

    async def claim(self, agent: str, **kw: Any) -> Batch | None:
        batch = await super().claim(agent, **kw)
        self.overstory_reads()
        return batch


@pytest.fixture
def ov(tmp_path: Path) -> OverstoryProject:
    project = OverstoryProject(tmp_path / "proj")
    project.session("lead-1", "lead")
    project.session("ov-builder-9", "builder", parent="lead-1")
    return project


@pytest.fixture
def store(ov: OverstoryProject) -> Any:
    s = SqliteMailStore(ov.mail_db)
    s.add_agent(Agent(name="am-builder-1", capability="builder", channel="spawn"))
    yield s
    s.close()


def _loop(
    store: SqliteMailStore, channel: FakeChannel, reads: Callable[[], object]
) -> DeliveryLoop:
    agent = store.get_agent("am-builder-1")
    assert agent is not None
    astore = ReadAfterClaim(store, reads)
    return DeliveryLoop(agent, channel, astore, Mailer(store), SETTINGS)


async def test_a_message_read_meanwhile_is_noted_not_repeated(
    ov: OverstoryProject, store: SqliteMailStore
) -> None:
    mailer = Mailer(store)
    first = mailer.send(sender="lead-1", to="am-builder-1", subject="one", body="BODY-ONE").ids[0]
    second = mailer.send(sender="lead-1", to="am-builder-1", subject="two", body="BODY-TWO").ids[0]
    channel = FakeChannel()
    loop = _loop(store, channel, lambda: ov.read(first))
    with anyio.fail_after(30):
        assert await loop.step() is StepResult.DELIVERED
    ((batch, text),) = channel.delivered
    assert "read elsewhere" in text and first in text
    assert "BODY-ONE" not in text and "BODY-TWO" in text
    one, two = store.get_message(first), store.get_message(second)
    assert one is not None and two is not None
    # The daemon records who acked what: the other tool for the first, this batch for the second.
    assert one.acked_by == "elsewhere" and one.acked_at is not None
    assert two.acked_by == batch.delivery_id


async def test_a_batch_read_entirely_elsewhere_costs_no_turn(
    ov: OverstoryProject, store: SqliteMailStore
) -> None:
    mid = Mailer(store).send(sender="lead-1", to="am-builder-1", subject="s", body="b").ids[0]
    channel = FakeChannel()
    loop = _loop(store, channel, lambda: ov.check("am-builder-1"))
    with anyio.fail_after(30):
        assert await loop.step() is StepResult.DELIVERED
    assert channel.attempts == []
    m = store.get_message(mid)
    assert m is not None and m.read and m.acked_by == "elsewhere"
    with anyio.fail_after(30):
        assert await loop.step() is StepResult.IDLE  # nothing left in flight or pending


def test_a_mixed_team_gets_the_same_mail_banners_and_refusals_from_either_tool(
    ov: OverstoryProject, store: SqliteMailStore
) -> None:
    """Overstory's agents (lead-1, ov-builder-9, Builder 1) and ours (am-builder-1, Lead)."""
    ov.session("Builder 1", "builder", parent="lead-1")
    store.add_agent(Agent(name="Lead", capability="lead"))
    mailer = Mailer(store)
    # Group mail from us reaches both registries' builders, with Overstory's banner for each.
    sent = mailer.send(sender="Lead", to="@builders", subject="stop", body="b", priority="urgent")
    team = ["Builder 1", "am-builder-1", "ov-builder-9"]
    assert sorted(m.to_agent for m in sent.messages) == team
    for name in team:
        assert ov.marker(name) is not None
    # Each reads it with its own tool: Overstory's agents with `ov mail check --inject`...
    for name in ("Builder 1", "ov-builder-9"):
        banner, read = ov.check_inject(name)
        assert banner == 'PRIORITY: urgent priority message from Lead — "stop"' and len(read) == 1
    # ...ours through our hot path: one banner, the marker consumed.
    text, ids = fast.check_inject("am-builder-1", str(ov.mail_db))
    assert text.count("PRIORITY:") == 1 and len(ids) == 1 and ov.marker("am-builder-1") is None
    # Mail from Overstory to one of ours carries its banner into our inject.
    ov.send("am-builder-1", "rebase", sender="lead-1", priority="high")
    text, _ = fast.check_inject("am-builder-1", str(ov.mail_db))
    assert text.startswith('PRIORITY: high priority message from lead-1 — "rebase"')
    # Refusals agree: an agent Overstory completed is refused by us, and out of our groups.
    ov.set_state("ov-builder-9", "completed")
    with pytest.raises(RecipientRefused, match="completed"):
        mailer.send(sender="Lead", to="ov-builder-9", subject="s", body="b")
    again = mailer.send(sender="Lead", to="@builders", subject="s2", body="b")
    assert sorted(m.to_agent for m in again.messages) == ["Builder 1", "am-builder-1"]
