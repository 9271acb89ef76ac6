"""The codex, gemini and opencode spawn presets with the REAL CLIs against loopback API stand-ins:
batches reach the model with their message ids, the session id is stored and resumed, acks wait
for the turn, API errors are not acked and the retry (same delivery id) succeeds, and a daemon
stopped by SIGTERM leaves no vendor process behind."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.factory import make_channel
from agentmaild.channels.vendor_spawn import VendorSpawnChannel
from agentmaild.channels.vendors import PRESETS, codex_thread_holder
from agentmaild.config import Config, SpawnConfig
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed, StoreError
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Batch, Message
from agentmaild.render.framing import render_batch
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import FAST, daemon_factory
from tests.support.loopback_api import LoopbackApi
from tests.support.vendor_env import VENDORS, pids_with_env, vendor_binary
from tests.support.waiting import wait_for, wait_until

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(150)]

REPLY = "ok from the stand-in"
BOUND = 60.0
# OpenCode retries HTTP 5xx/429 without end and prints nothing meanwhile: the daemon's stall
# timeout is what ends such a turn. Codex and Gemini are told not to retry and fail at once.
ERROR_STATUS = {"codex": 500, "gemini": 429, "opencode": 500}
ERROR_STALL_S = 25.0  # generous: under load OpenCode may take 15 s to its first request
CONFIG = Config(spawn=SpawnConfig(stall_timeout_s=60.0, kill_grace_s=2.0))


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
    binary: str

    def register(self) -> Agent:
        agent = Agent(
            name="alice",
            capability="builder",
            channel="spawn",
            preset=self.vendor,
            command=(self.binary,),
            cwd=str(self.project),
            settings={"env": self.env},
        )
        return self.store.add_agent(agent)

    def mail(self, body: str) -> Message:
        msg = Message(
            id=new_id("msg"),
            from_agent="bob",
            to_agent="alice",
            subject=f"about {body.split()[-1]}",
            body=body,
            created_at=iso_now(),
        )
        (stored,) = self.store.insert(InsertRequest(messages=(msg,), now=time.time())).messages
        return stored

    def claim(self) -> tuple[Batch, str]:
        batch = self.store.claim(
            "alice", max_messages=10, max_chars=10_000, lease_s=300, now=time.time()
        )
        assert batch is not None
        text = render_batch(
            batch.messages, agent="alice", delivery_id=batch.delivery_id, attempt=batch.attempt
        )
        return batch, text

    def channel(self) -> VendorSpawnChannel:
        agent = self.store.get_agent("alice")
        assert agent is not None
        channel = make_channel(agent, CONFIG, self.db)
        assert isinstance(channel, VendorSpawnChannel)
        return channel

    def stored_session(self) -> str | None:
        agent = self.store.get_agent("alice")
        return agent.session_id if agent is not None else None


@pytest.fixture(params=sorted(VENDORS))
def world(request: Any, tmp_path: Path) -> Iterator[World]:
    vendor = VENDORS[request.param]
    binary = vendor_binary(vendor.name)
    project = tmp_path / "proj"
    project.mkdir()
    db = tmp_path / "store" / "mail.db"
    with vendor.api(REPLY) as api:
        home, env = vendor.setup(tmp_path, api)
        store = SqliteMailStore(db)
        try:
            yield World(vendor.name, api, store, db, tmp_path, project, home, env, binary)
        finally:
            store.close()


async def _wait_request(api: LoopbackApi, marker: str) -> None:
    await anyio.to_thread.run_sync(lambda: api.wait_for(marker, timeout=BOUND))


async def test_batches_reach_the_model_ack_after_turn_and_resume(world: World) -> None:
    world.register()
    first = world.mail("first body MARKER-1")
    batch1, text1 = world.claim()
    async with world.channel() as channel:
        world.api.hold("MARKER-1")
        returned = anyio.Event()

        async def deliver() -> None:
            await channel.deliver(batch1, text1)
            returned.set()

        with anyio.fail_after(BOUND):
            async with anyio.create_task_group() as tg:
                tg.start_soon(deliver)
                await _wait_request(world.api, "MARKER-1")
                assert await channel.is_busy()
                if world.vendor != "opencode":  # its first event comes after the model's answer
                    # The id is in the store while the model is still answering.
                    await wait_until(lambda: world.stored_session() is not None)
                if world.vendor == "codex":  # a running codex holds its thread's writer lock
                    held_by = codex_thread_holder(world.home, world.stored_session() or "")
                    assert held_by is not None and held_by != os.getpid()
                assert not returned.is_set()  # the turn is still running: no ack yet
                world.api.release()
                await returned.wait()
        assert world.store.ack_delivery(batch1.delivery_id, now=time.time()) == 1
        session = world.stored_session()
        assert session is not None and session == channel.session_id
        if world.vendor == "codex":  # Codex's own busy signal: the thread's writer lock
            await _held_thread_is_busy(world, channel, session)
        request = world.api.conversation_requests("MARKER-1")[-1]
        assert first.id in request.last_user_text()
        assert batch1.delivery_id in request.last_user_text()

        second = world.mail("second body MARKER-2")
        batch2, text2 = world.claim()
        with anyio.fail_after(BOUND):
            await channel.deliver(batch2, text2)
    (request2,) = world.api.conversation_requests("MARKER-2")
    assert second.id in request2.last_user_text()
    history = request2.all_text()
    assert "first body MARKER-1" in history  # the same session, resumed
    assert REPLY in history
    assert world.stored_session() == session


async def _held_thread_is_busy(world: World, channel: VendorSpawnChannel, thread: str) -> None:
    """A person's ``codex resume`` holds the thread's writer lock: busy, and no turn starts."""
    lock = world.home / ".codex" / "thread-writer-locks" / f"{thread}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)  # where `codex resume` takes it
    world.mail("held body MARKER-H")
    batch, text = world.claim()
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert await channel.is_busy()
        assert channel.busy_reason() == f"session held by pid {os.getpid()}"
        with pytest.raises(AgentBusy):
            await channel.deliver(batch, text)
    assert not await channel.is_busy()
    assert world.api.conversation_requests("MARKER-H") == []  # no turn ran
    world.store.release(batch.delivery_id, error="busy", max_attempts=5, now=time.time())
    retry, retry_text = world.claim()
    with anyio.fail_after(BOUND):
        await channel.deliver(retry, retry_text)
    assert world.store.ack_delivery(retry.delivery_id, now=time.time()) == 1


async def test_api_error_is_not_acked_and_the_retry_succeeds(world: World) -> None:
    world.register()
    world.mail("body MARKER-E")
    batch, text = world.claim()
    status = ERROR_STATUS[world.vendor]
    if world.vendor == "opencode":
        world.store.update_agent(
            "alice", {"settings": {"env": world.env, "stall_timeout_s": ERROR_STALL_S}}
        )
    channel = world.channel()
    world.api.fail_next(1 if world.vendor != "opencode" else 1000, status=status)
    with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed) as failed:
        await channel.deliver(batch, text)
    world.api.clear_failures()
    world.store.release(batch.delivery_id, error="failed", max_attempts=5, now=time.time())
    retry, retry_text = world.claim()
    assert retry.delivery_id == batch.delivery_id
    assert retry.attempt == 2
    if world.vendor == "opencode":
        world.store.update_agent("alice", {"settings": {"env": world.env}})
        await channel.aclose()
        channel = world.channel()  # a new one, as the daemon makes after a settings change
    async with channel:
        with anyio.fail_after(BOUND):
            await channel.deliver(retry, retry_text)
    answered = [r.answered_with for r in world.api.conversation_requests("MARKER-E")]
    assert answered[0] == status, failed.value
    assert answered[-1] == 200
    assert world.store.ack_delivery(retry.delivery_id, now=time.time()) == 1


@pytest.mark.parametrize("world", ["codex", "opencode"], indirect=True)
async def test_a_session_id_never_stored_is_not_acked_and_the_new_session_is_logged(
    world: World,
) -> None:
    """Codex and OpenCode choose their session ids. When the id the turn announced never reached
    the store (here the write fails; a daemon killed mid-turn is the same case), the batch is not
    acked, and its redelivery starts a new session that says so in the log: no silent fork."""
    agent = world.register()
    world.mail("body MARKER-S")
    batch, text = world.claim()

    async def refuse(session_id: str) -> None:
        raise StoreError(f"cannot write {session_id} (test)")

    channel = VendorSpawnChannel(
        agent, CONFIG, world.db, preset=PRESETS[world.vendor], save_session=refuse
    )
    with anyio.fail_after(BOUND), pytest.raises(AgentUnavailable, match="cannot store the session"):
        await channel.deliver(batch, text)
    assert world.stored_session() is None
    world.store.release(batch.delivery_id, error="failed", max_attempts=5, now=time.time())
    retry, retry_text = world.claim()
    assert (retry.delivery_id, retry.attempt) == (batch.delivery_id, 2)
    with capture_logs() as logs:
        async with world.channel() as again:
            with anyio.fail_after(BOUND):
                await again.deliver(retry, retry_text)
    [line] = [e for e in logs if e["event"] == "spawn.session_started_on_redelivery"]
    assert (line["delivery_id"], line["preset"]) == (batch.delivery_id, world.vendor)
    assert world.stored_session() == again.session_id is not None
    first, *_, last = world.api.conversation_requests("MARKER-S")
    assert first.answered_with == 200
    # A new session: the redelivery's request does not carry the first attempt's turn.
    assert sum("MARKER-S" in t for t in last.user_texts()) == 1 and REPLY not in last.all_text()


def test_daemon_delivers_then_sigterm_leaves_no_vendor_process(world: World) -> None:
    with daemon_factory(world.db, world.tmp, defaults=FAST, text=True) as make:
        # A short drain: the held turn is never going to finish by itself.
        daemon = make(env={"AGENTMAILD_DAEMON_SHUTDOWN_GRACE_S": "2"}, start=False)
        added = daemon.cli(
            "agents", "add", "alice", "-c", "builder", "--channel", "spawn",
            "--preset", world.vendor, "--command", world.binary, "--cwd", str(world.project),
            "--setting", "env=" + json.dumps(world.env),
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert daemon.cli("agents", "add", "bob", "-c", "lead").returncode == 0
        daemon.start()
        sent = daemon.cli(
            "send", "--from", "bob", "--to", "alice", "-s", "hi", "--body", "hi MARKER-D"
        )
        assert sent.returncode == 0, sent.stderr
        world.api.wait_for("MARKER-D", timeout=BOUND)
        wait_for(lambda: _all_read(world), BOUND, "the first mail acked")

        world.api.hold("MARKER-T")
        sent = daemon.cli(
            "send", "--from", "bob", "--to", "alice", "-s", "hi", "--body", "then MARKER-T"
        )
        assert sent.returncode == 0, sent.stderr
        world.api.wait_for("MARKER-T", timeout=BOUND)
        assert pids_with_env("HOME", str(world.home)), "the vendor CLI should be running"
        assert daemon.stop() == 0, daemon.tail()
        wait_for(lambda: not pids_with_env("HOME", str(world.home)), 15, "no vendor process")
    world.api.release()
    assert not _all_read(world)  # the interrupted turn's mail was never acked


def _all_read(world: World) -> bool:
    msgs = world.store.inbox("alice")
    return bool(msgs) and all(m.read for m in msgs)
