"""The Claude preset channels with the REAL Claude Code CLI against a loopback Messages API stub:
batches reach the model, later batches resume the session, acks wait for the turn, API errors
are not acked and the retry (same delivery id) succeeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from agentmaild.channels.base import Channel
from agentmaild.channels.claude import ClaudeSpawnChannel
from agentmaild.channels.stdin import StdinChannel
from agentmaild.config import Config, SpawnConfig, StdinConfig
from agentmaild.errors import DeliveryFailed
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Batch, Message
from agentmaild.render.framing import render_batch
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import claude_binary, claude_env, isolated_home

pytestmark = [
    pytest.mark.claude,
    pytest.mark.timeout(120),
]

REPLY = "ok from stub"
BOUND = 60.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def claude_bin() -> str:
    return claude_binary()


@pytest.fixture
def stub() -> Iterator[AnthropicStub]:
    with AnthropicStub(REPLY) as s:
        yield s


@dataclass
class World:
    store: SqliteMailStore
    db: Path
    project: Path
    env: dict[str, str]
    claude: str

    def register(self, channel: str) -> Agent:
        agent = Agent(
            name="alice",
            capability="builder",
            channel=channel,
            preset="claude",
            command=(self.claude,),
            cwd=str(self.project),
            settings={"env": self.env},
        )
        return self.store.add_agent(agent)

    def mail(self, subject: str, body: str) -> Message:
        msg = Message(
            id=new_id("msg"),
            from_agent="bob",
            to_agent="alice",
            subject=subject,
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

    def channel(self, kind: str) -> Channel:
        agent = self.store.get_agent("alice")
        assert agent is not None
        cfg = Config(
            spawn=SpawnConfig(stall_timeout_s=60.0, kill_grace_s=2.0),
            stdin=StdinConfig(restart_backoff_initial_s=0.1, restart_backoff_max_s=1.0),
        )
        if kind == "spawn":
            return ClaudeSpawnChannel(agent, cfg, self.db)
        return StdinChannel(agent, cfg, self.db)


@pytest.fixture
def world(tmp_path: Path, stub: AnthropicStub, claude_bin: str) -> Iterator[World]:
    project = tmp_path / "proj"
    project.mkdir()
    home = isolated_home(tmp_path, project)
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    try:
        yield World(store, db, project, claude_env(home, stub.base_url), claude_bin)
    finally:
        store.close()


async def wait_request(stub: AnthropicStub, marker: str) -> None:
    await anyio.to_thread.run_sync(lambda: stub.wait_for(marker, timeout=BOUND))


@pytest.mark.parametrize("kind", ["spawn", "stdin"])
async def test_batches_reach_the_model_ack_after_turn_and_resume(
    world: World, stub: AnthropicStub, kind: str
) -> None:
    world.register(kind)
    first = world.mail("first subject", "first body MARKER-1")
    batch1, text1 = world.claim()
    async with world.channel(kind) as channel:
        stub.hold("MARKER-1")
        returned = anyio.Event()

        async def deliver() -> None:
            await channel.deliver(batch1, text1)
            returned.set()

        with anyio.fail_after(BOUND):
            async with anyio.create_task_group() as tg:
                tg.start_soon(deliver)
                await wait_request(stub, "MARKER-1")
                assert await channel.is_busy()
                assert not returned.is_set()  # the model is still answering: no ack yet
                stub.release()
                await returned.wait()
        assert world.store.ack_delivery(batch1.delivery_id, now=time.time()) == 1
        (request,) = stub.conversation_requests("MARKER-1")
        assert first.id in request.last_user_text()
        assert batch1.delivery_id in request.last_user_text()

        second = world.mail("second subject", "second body MARKER-2")
        batch2, text2 = world.claim()
        with anyio.fail_after(BOUND):
            await channel.deliver(batch2, text2)
    (request2,) = stub.conversation_requests("MARKER-2")
    assert second.id in request2.last_user_text()
    history = request2.all_text()
    assert "first body MARKER-1" in history  # the same session, resumed
    assert REPLY in history
    agent = world.store.get_agent("alice")
    assert agent is not None and agent.session_id is not None


@pytest.mark.parametrize("kind", ["spawn", "stdin"])
async def test_api_error_is_not_acked_and_the_retry_succeeds(
    world: World, stub: AnthropicStub, kind: str
) -> None:
    world.register(kind)
    world.mail("s", "body MARKER-E")
    batch, text = world.claim()
    async with world.channel(kind) as channel:
        stub.fail_next(1, status=500)
        with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match="API Error: 500"):
            await channel.deliver(batch, text)
        world.store.release(batch.delivery_id, error="failed", max_attempts=5, now=time.time())
        retry, retry_text = world.claim()
        assert retry.delivery_id == batch.delivery_id
        assert retry.attempt == 2
        with anyio.fail_after(BOUND):
            await channel.deliver(retry, retry_text)
    answered = [r.answered_with for r in stub.conversation_requests("MARKER-E")]
    assert answered[0] == 500
    assert answered[-1] == 200


def _cli(db: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentmaild", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


def test_daemon_delivers_to_a_headless_claude_agent(
    world: World, stub: AnthropicStub, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL")}
    env["PYTHONPATH"] = str(REPO)
    env["AGENTMAILD_DAEMON_POLL_INTERVAL_S"] = "0.2"
    setting = "env=" + json.dumps(world.env)
    db = world.db
    added = _cli(
        db,
        "agents",
        "add",
        "alice",
        "-c",
        "builder",
        "--channel",
        "spawn",
        "--preset",
        "claude",
        "--command",
        world.claude,
        "--cwd",
        str(world.project),
        "--setting",
        setting,
        env=env,
    )
    assert added.returncode == 0, added.stderr[-300:]
    _cli(db, "agents", "add", "bob", "-c", "lead", env=env)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "agentmaild", "serve", "--db", str(db)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        sent = _cli(
            db,
            "send",
            "--from",
            "bob",
            "--to",
            "alice",
            "--subject",
            "hi",
            "--body",
            "daemon MARKER-D",
            "--json",
            env=env,
        )
        assert sent.returncode == 0, sent.stderr
        stub.wait_for("MARKER-D", timeout=BOUND)
        deadline = time.monotonic() + BOUND
        while True:
            msgs = world.store.inbox("alice")
            if msgs and all(m.read for m in msgs):
                break
            assert time.monotonic() < deadline, "mail never acked"
            assert daemon.poll() is None, "daemon exited"
            time.sleep(0.1)
        agent = world.store.get_agent("alice")
        assert agent is not None and agent.session_id is not None
    finally:
        daemon.terminate()
        try:
            out, _ = daemon.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            out, _ = daemon.communicate()
        print(out.decode(errors="replace")[-3000:])
    assert daemon.returncode == 0
