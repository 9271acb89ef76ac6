"""One real vendor CLI set up against its loopback stand-in, with a store to mail and claim from.

The long-lived channels' e2e tests (``test_vendor_acp``, ``test_vendor_codex_app``,
``test_vendor_opencode_server``) share it: ``World.register`` adds an agent on a protocol,
``mail``/``claim`` make the batch a daemon would deliver, ``channel`` builds the agent's channel
with test-speed restarts, ``all_read`` says whether every mail of an agent was acked;
``deliver_held`` proves the ack waits for the turn's end; ``daemon_then_sigterm`` registers an
agent through the CLI, has a real daemon deliver to it, and stops that daemon mid-turn: no vendor
process may outlive it, the interrupted mail stays unacked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.channels.base import Channel
from agentmaild.channels.factory import make_channel
from agentmaild.config import Config, SpawnConfig, StdinConfig
from agentmaild.errors import DeliveryFailed
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Batch, Message
from agentmaild.render.framing import render_batch
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import FAST, daemon_factory
from tests.support.loopback_api import LoopbackApi, RecordedRequest
from tests.support.vendor_env import VENDORS, pids_with_env
from tests.support.waiting import wait_for

REPLY = "ok from the stand-in"


@dataclass
class World:
    vendor: str
    api: LoopbackApi
    store: SqliteMailStore
    db: Path
    tmp: Path
    project: Path
    home: Path
    env: dict[str, str]
    argv: list[str]

    def register(self, name: str, protocol: str, **settings: Any) -> Agent:
        agent = Agent(
            name=name,
            capability="builder",
            channel="stdin",
            command=tuple(self.argv),
            cwd=str(self.project),
            settings={"env": self.env, "protocol": protocol, **settings},
        )
        return self.store.add_agent(agent)

    def mail(self, to: str, body: str) -> Message:
        msg = Message(
            id=new_id("msg"), from_agent="bob", to_agent=to, subject="s", body=body,
            created_at=iso_now(),
        )  # fmt: skip
        (stored,) = self.store.insert(InsertRequest(messages=(msg,), now=time.time())).messages
        return stored

    def claim(self, name: str) -> tuple[Batch, str]:
        batch = self.store.claim(name, max_messages=10, max_chars=10_000, lease_s=300,
                                 now=time.time())  # fmt: skip
        assert batch is not None
        text = render_batch(
            batch.messages, agent=name, delivery_id=batch.delivery_id, attempt=batch.attempt
        )
        return batch, text

    def channel(self, name: str) -> Channel:
        agent = self.store.get_agent(name)
        assert agent is not None
        cfg = Config(
            spawn=SpawnConfig(stall_timeout_s=60.0, kill_grace_s=2.0),
            stdin=StdinConfig(restart_backoff_initial_s=0.1, stall_timeout_s=60.0),
        )
        return make_channel(agent, cfg, self.db)

    async def deliver_acked(self, channel: Channel, batch: Batch, text: str, bound: float) -> None:
        """Deliver within ``bound`` and ack, as the daemon's loop does when the channel returns."""
        with anyio.fail_after(bound):
            await channel.deliver(batch, text)
        assert self.store.ack_delivery(batch.delivery_id, now=time.time()) == 1

    async def error_then_retry(
        self, channel: Channel, name: str, marker: str, status: int, says: str | None, bound: float
    ) -> None:
        """A mail whose model call fails with HTTP ``status``: not acked (``DeliveryFailed``
        matching ``says``) and the turn over (not busy); released, the retry under the same
        delivery id is acked."""
        self.mail(name, f"body {marker}")
        batch, text = self.claim(name)
        self.api.fail_next(1, status=status)
        with anyio.fail_after(bound), pytest.raises(DeliveryFailed, match=says):
            await channel.deliver(batch, text)
        self.api.clear_failures()
        assert not await channel.is_busy()
        self.store.release(batch.delivery_id, error="failed", max_attempts=5, now=time.time())
        retry, retry_text = self.claim(name)
        assert (retry.delivery_id, retry.attempt) == (batch.delivery_id, 2)
        await self.deliver_acked(channel, retry, retry_text, bound)
        answered = [r.answered_with for r in self.api.conversation_requests(marker)]
        assert answered[0] == status and answered[-1] == 200

    def all_read(self, name: str) -> bool:
        msgs = self.store.inbox(name)
        return bool(msgs) and all(m.read for m in msgs)


@contextmanager
def vendor_world(vendor_name: str, tmp: Path, argv: list[str]) -> Iterator[World]:
    """The vendor's stand-in running and its CLI's HOME written, for the block's duration."""
    vendor = VENDORS[vendor_name]
    project = tmp / "proj"
    project.mkdir()
    db = tmp / "store" / "mail.db"
    with vendor.api(REPLY) as api:
        home, env = vendor.setup(tmp, api)
        store = SqliteMailStore(db)
        try:
            yield World(vendor.name, api, store, db, tmp, project, home, env, argv)
        finally:
            store.close()


def daemon_then_sigterm(
    world: World, add: list[str], env: dict[str, str], bound: float
) -> RecordedRequest:
    """``agents add carol <add>`` with ``env``; a mail delivered and acked through a real daemon;
    a second turn held at the stand-in while SIGTERM stops the daemon. The first model call."""
    home = ("HOME", str(world.home))
    before = set(pids_with_env(*home))  # e.g. a server the test module runs itself

    def ours() -> set[int]:
        return set(pids_with_env(*home)) - before

    with daemon_factory(world.db, world.tmp, defaults=FAST, text=True) as make:
        daemon = make(env={"AGENTMAILD_DAEMON_SHUTDOWN_GRACE_S": "2"}, start=False)
        added = daemon.cli(
            "agents", "add", "carol", "-c", "builder", *add, "--cwd", str(world.project),
            "--setting", "env=" + json.dumps(env),
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert daemon.cli("agents", "add", "bob", "-c", "lead").returncode == 0
        daemon.start()
        sent = daemon.cli("send", "--from", "bob", "--to", "carol", "-s", "hi", "--body",
                          "hi MARKER-D")  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        first = world.api.wait_for("MARKER-D", timeout=bound)
        wait_for(lambda: world.all_read("carol"), bound, "the first mail acked")
        assert ours(), "the vendor process should still run"

        world.api.hold("MARKER-T")
        sent = daemon.cli("send", "--from", "bob", "--to", "carol", "-s", "hi", "--body",
                          "then MARKER-T")  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        world.api.wait_for("MARKER-T", timeout=bound)
        assert daemon.stop() == 0, daemon.tail()
        wait_for(lambda: not ours(), 15, "no vendor process")
    world.api.release()
    assert not world.all_read("carol")  # the interrupted turn's mail was never acked
    return first


async def deliver_held(
    world: World,
    channel: Channel,
    batch: Batch,
    text: str,
    bound: float,
    meanwhile: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Deliver with the turn's model call held at the stand-in (``hold`` on the first message's
    body): meanwhile the channel is busy and ``deliver`` has not returned (no ack before the
    turn ends), and ``meanwhile`` runs; then released, ``deliver`` returns."""
    marker = batch.messages[0].body
    world.api.hold(marker)
    done = anyio.Event()

    async def turn() -> None:
        await channel.deliver(batch, text)
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        with anyio.fail_after(bound):
            await anyio.to_thread.run_sync(world.api.wait_for, marker, bound)
        assert await channel.is_busy() and not done.is_set()
        if meanwhile is not None:
            await meanwhile()
        world.api.release()
        with anyio.fail_after(bound):
            await done.wait()
