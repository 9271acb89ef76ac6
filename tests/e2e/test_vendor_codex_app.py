"""The codex-app channel with the REAL ``codex app-server`` against the loopback Responses API
stand-in: batches reach the model with their message ids, the second batch lands in the same
thread, the ack waits for ``turn/completed`` (busy meanwhile), an API error is not acked and the
retry (same delivery id) succeeds in that thread, a killed app-server restarts and resumes the
stored thread, and a daemon stopped by SIGTERM leaves no Codex process behind. The daemon's agent
names its provider with ``-c`` flags only (``-c model_provider=…``, ``wire_api=responses``)."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator

import anyio
import pytest

from agentmaild.channels.codex_app import CodexAppChannel
from agentmaild.errors import AgentBusy
from tests.support.vendor_env import API_KEY, vendor_binary
from tests.support.vendor_world import World, daemon_then_sigterm, deliver_held, vendor_world
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(180)]

BOUND = 90.0
PROTOCOL = "codex-app"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    argv = [vendor_binary("codex"), "app-server"]
    with vendor_world("codex", tmp_path_factory.mktemp("codex-app"), argv) as world:
        yield world


def _channel(world: World, name: str) -> CodexAppChannel:
    channel = world.channel(name)
    assert isinstance(channel, CodexAppChannel)
    return channel


async def test_batches_in_one_thread_ack_after_the_turn_and_an_api_error_retried(
    world: World,
) -> None:
    world.register("alice", PROTOCOL)
    first = world.mail("alice", "first body MARKER-1")
    batch1, text1 = world.claim("alice")
    async with _channel(world, "alice") as channel:
        await deliver_held(world, channel, batch1, text1, BOUND)
        assert world.store.ack_delivery(batch1.delivery_id, now=time.time()) == 1
        stored = world.store.get_agent("alice")
        assert stored is not None and stored.session_id == channel.describe()["session_id"]
        request = world.api.conversation_requests("MARKER-1")[-1]
        assert first.id in request.last_user_text()
        assert batch1.delivery_id in request.last_user_text()
        assert not await channel.is_busy()

        second = world.mail("alice", "second body MARKER-2")
        batch2, text2 = world.claim("alice")
        await world.deliver_acked(channel, batch2, text2, BOUND)
        request2 = world.api.conversation_requests("MARKER-2")[-1]
        assert second.id in request2.last_user_text()
        assert "first body MARKER-1" in request2.all_text()  # the same thread

        await world.error_then_retry(channel, "alice", "MARKER-E", 500, "turn failed", BOUND)
        assert channel.describe()["starts"] == 1
    assert "second body MARKER-2" in world.api.conversation_requests("MARKER-E")[-1].all_text()
    agent = world.store.get_agent("alice")
    assert agent is not None and agent.session_id == stored.session_id


async def test_killed_app_server_restarts_and_resumes_its_thread(world: World) -> None:
    world.register("dave", PROTOCOL)
    world.mail("dave", "before MARKER-K1")
    batch1, text1 = world.claim("dave")
    async with _channel(world, "dave") as channel:
        with anyio.fail_after(BOUND):
            await channel.deliver(batch1, text1)
        assert world.store.ack_delivery(batch1.delivery_id, now=time.time()) == 1
        thread = channel.describe()["session_id"]
        pid = channel.describe()["pid"]
        assert isinstance(pid, int)
        os.killpg(pid, signal.SIGKILL)  # the app-server dies between batches
        await wait_until(lambda: not channel.describe()["running"])
        world.mail("dave", "after MARKER-K2")
        batch2, text2 = world.claim("dave")
        # A person's `codex resume` holds the thread's writer lock: no app-server of ours starts.
        lock = world.home / ".codex" / "thread-writer-locks" / f"{thread}.lock"
        assert lock.is_file()  # the app-server took it, as `codex resume` does
        with lock.open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            assert await channel.is_busy()
            assert channel.busy_reason() == f"pid {os.getpid()} holds session {thread}"
            with pytest.raises(AgentBusy):
                await channel.deliver(batch2, text2)
        assert not await channel.is_busy()
        with anyio.fail_after(BOUND):
            await channel.deliver(batch2, text2)
        assert channel.describe()["starts"] == 2
        assert channel.describe()["session_id"] == thread
    assert "before MARKER-K1" in world.api.conversation_requests("MARKER-K2")[-1].all_text()


def test_daemon_delivers_then_sigterm_leaves_no_codex_process(world: World) -> None:
    provider = [
        "-c", "model_provider=flags", "-c", "model_providers.flags.name=flags",
        "-c", f"model_providers.flags.base_url={world.api.base_url}/v1",
        "-c", "model_providers.flags.wire_api=responses",
        "-c", "model_providers.flags.env_key=FLAGS_API_KEY",
        "-c", "model_providers.flags.request_max_retries=0",
    ]  # fmt: skip
    add = ["--channel", PROTOCOL, "--command", " ".join([*world.argv, *provider])]
    first = daemon_then_sigterm(world, add, {**world.env, "FLAGS_API_KEY": API_KEY}, BOUND)
    assert first.headers.get("authorization") == f"Bearer {API_KEY}"  # the -c provider's key
