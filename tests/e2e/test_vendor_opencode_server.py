"""The opencode-server channel with the REAL ``opencode serve`` against the loopback Chat
Completions stand-in. One server, started by this module, serves the attach tests
(``settings.url``): batches reach the model with their message ids, the second batch lands in
the same session, the ack waits for the turn (busy meanwhile, also for a second channel that asks
``/session/status``), an API error (400) is not acked and the retry under the same delivery id
succeeds, a 500 that OpenCode would retry without end is aborted after ``max_retries`` and retried
by us. Then the daemon-started server: a killed server restarts and keeps the session, and a
daemon stopped by SIGTERM leaves no OpenCode process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator

import anyio
import pytest

from agentmaild.channels.opencode_server import OpencodeServerChannel
from tests.support.vendor_env import vendor_binary
from tests.support.vendor_world import World, daemon_then_sigterm, deliver_held, vendor_world
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(240)]

BOUND = 120.0
PROTOCOL = "opencode-server"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    argv = [vendor_binary("opencode"), "serve"]
    with vendor_world("opencode", tmp_path_factory.mktemp("opencode-server"), argv) as world:
        yield world


@pytest.fixture(scope="module")
def server(world: World) -> Iterator[str]:
    """An ``opencode serve`` the daemon did not start: its URL."""
    proc = subprocess.Popen(
        [*world.argv, "--port", "0"], cwd=world.project, env=world.env, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # bounded by the module's timeout
            found = re.search(rb"listening on (http://\S+)", line)
            if found:
                yield found.group(1).decode()
                break
        else:
            raise AssertionError(f"opencode serve exited {proc.wait()} before it listened")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _channel(world: World, name: str) -> OpencodeServerChannel:
    channel = world.channel(name)
    assert isinstance(channel, OpencodeServerChannel)
    return channel


async def test_attached_batches_in_one_session_acked_after_the_turn(
    world: World, server: str
) -> None:
    world.register("alice", PROTOCOL, url=server)
    first = world.mail("alice", "first body MARKER-1")
    batch1, text1 = world.claim("alice")
    async with _channel(world, "alice") as channel:

        async def second_channel_sees_busy() -> None:
            async with _channel(world, "alice") as other:  # as a restarted daemon would ask
                assert await other.is_busy()
                assert other.busy_reason() == "the session runs a turn of its own"

        await deliver_held(world, channel, batch1, text1, BOUND, second_channel_sees_busy)
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
        assert "first body MARKER-1" in request2.all_text()  # the same session
        assert channel.describe()["pid"] is None  # attached: no process of ours


@pytest.mark.parametrize(("status", "says"), [(400, "APIError"), (500, "gave up")])
async def test_an_api_error_is_not_acked_and_retried_under_the_same_delivery_id(
    world: World, server: str, status: int, says: str
) -> None:
    name = f"err{status}"
    world.register(name, PROTOCOL, url=server, max_retries=0)
    world.mail(name, f"warm-up MARKER-W{status}")
    warm, warm_text = world.claim(name)
    marker = f"MARKER-E{status}"
    async with _channel(world, name) as channel:
        await world.deliver_acked(channel, warm, warm_text, BOUND)
        # OpenCode asks for the session's title on its own, maybe after the turn: let that call
        # pass first, so that the failure below meets our turn.
        await anyio.to_thread.run_sync(world.api.wait_answered, f"MARKER-W{status}", 2, BOUND)
        await world.error_then_retry(channel, name, marker, status, says, BOUND)
    assert f"warm-up MARKER-W{status}" in world.api.conversation_requests(marker)[-1].all_text()


async def test_started_server_killed_restarts_and_keeps_the_session(world: World) -> None:
    world.register("dave", PROTOCOL)
    world.mail("dave", "before MARKER-K1")
    batch1, text1 = world.claim("dave")
    async with _channel(world, "dave") as channel:
        await world.deliver_acked(channel, batch1, text1, BOUND)
        session = channel.describe()["session_id"]
        pid = channel.describe()["pid"]
        assert isinstance(pid, int)
        os.killpg(pid, signal.SIGKILL)  # the server dies between batches
        await wait_until(lambda: not channel.describe()["running"], BOUND)
        world.mail("dave", "after MARKER-K2")
        batch2, text2 = world.claim("dave")
        await world.deliver_acked(channel, batch2, text2, BOUND)
        assert channel.describe()["starts"] == 2
        assert channel.describe()["session_id"] == session
    assert "before MARKER-K1" in world.api.conversation_requests("MARKER-K2")[-1].all_text()


def test_daemon_delivers_then_sigterm_leaves_no_opencode_process(world: World) -> None:
    add = ["--channel", PROTOCOL, "--command", " ".join(world.argv)]
    daemon_then_sigterm(world, add, world.env, BOUND)
