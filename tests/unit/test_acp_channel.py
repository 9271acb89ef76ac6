"""AcpChannel against tests/support/acp_agent.py, a scripted ACP agent: handshake, session
stored and reused, ack on end_turn only, JSON-RPC errors, crash → restart → session/load, the
agent's own requests answered safely, busy while a prompt runs, no process left after close."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.channels.acp import AcpChannel
from agentmaild.channels.factory import make_channel
from agentmaild.config import Config, SpawnConfig, StdinConfig
from agentmaild.errors import DeliveryFailed
from agentmaild.models import Agent, Batch, Message
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.waiting import alive, wait_until

AGENT = Path(__file__).resolve().parents[1] / "support" / "acp_agent.py"


@dataclass
class Rig:
    tmp: Path
    db: Path

    def agent(self, **env: str) -> Agent:
        sessions = self.tmp / "sessions"
        sessions.mkdir(exist_ok=True)
        full_env = {
            "ACP_RECORD": str(self.tmp / "record.jsonl"),
            "ACP_SESSIONS": str(sessions),
            "ACP_GATE": str(self.tmp / "gate"),
            **env,
        }
        agent = Agent(
            name="alice",
            capability="builder",
            channel="stdin",
            command=(sys.executable, str(AGENT)),
            settings={"protocol": "acp", "env": full_env},
        )
        store = SqliteMailStore(self.db)
        try:
            store.add_agent(agent)
        finally:
            store.close()
        return agent

    def records(self, method: str | None = None) -> list[dict[str, Any]]:
        path = self.tmp / "record.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        return [r for r in rows if method is None or r.get("method") == method]

    def stored_session(self) -> str | None:
        store = SqliteMailStore(self.db)
        try:
            agent = store.get_agent("alice")
        finally:
            store.close()
        assert agent is not None
        return agent.session_id

    def history(self, session: str) -> list[str]:
        return [json.loads(x) for x in (self.tmp / "sessions" / session).read_text().splitlines()]


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp=tmp_path, db=tmp_path / "store" / "mail.db")


def channel(rig: Rig, agent: Agent) -> AcpChannel:
    config = Config(
        spawn=SpawnConfig(stall_timeout_s=30.0, kill_grace_s=0.5),
        stdin=StdinConfig(
            restart_backoff_initial_s=0.05, restart_backoff_max_s=0.2, stall_timeout_s=30.0
        ),
    )
    made = make_channel(agent, config, rig.db)
    assert isinstance(made, AcpChannel)
    return made


def batch(delivery_id: str) -> Batch:
    msg = Message(
        id=f"msg-{delivery_id}", from_agent="bob", to_agent="alice", subject="s", body="b"
    )
    return Batch(delivery_id=delivery_id, agent="alice", messages=(msg,))


async def test_authenticates_stores_the_session_and_reuses_it(rig: Rig) -> None:
    agent = rig.agent(ACP_AUTH="1")
    async with channel(rig, agent) as ch:
        await ch.deliver(batch("d1"), "first msg-d1")
        session = rig.stored_session()
        assert session is not None
        await ch.deliver(batch("d2"), "second msg-d2")
    methods = [r["method"] for r in rig.records() if "method" in r]
    assert methods == [
        "initialize",
        "authenticate",
        "session/new",
        "session/prompt",
        "session/prompt",
    ]
    assert rig.records("authenticate")[0]["params"] == {"methodId": "gemini-api-key"}
    assert rig.history(session) == ["first msg-d1", "second msg-d2"]
    assert {r["params"]["sessionId"] for r in rig.records("session/prompt")} == {session}


async def test_no_authenticate_when_not_advertised(rig: Rig) -> None:
    async with channel(rig, rig.agent()) as ch:
        await ch.deliver(batch("d1"), "hi")
    assert rig.records("authenticate") == []


async def test_rpc_error_and_refusal_are_not_acked_then_the_retry_succeeds(rig: Rig) -> None:
    async with channel(rig, rig.agent()) as ch:
        with pytest.raises(DeliveryFailed, match="error 500: model API 500"):
            await ch.deliver(batch("d1"), "FAIL d1")
        with pytest.raises(DeliveryFailed, match="refusal"):
            await ch.deliver(batch("d2"), "REFUSE d2")
        await ch.deliver(batch("d1"), "retry d1")
        assert ch.describe()["starts"] == 1
    session = rig.stored_session()
    assert session is not None
    assert rig.history(session) == ["REFUSE d2", "retry d1"]


async def test_crash_mid_turn_restarts_and_loads_the_stored_session(rig: Rig) -> None:
    async with channel(rig, rig.agent()) as ch:
        await ch.deliver(batch("d1"), "one")
        session = rig.stored_session()
        with pytest.raises(DeliveryFailed, match="exited"):
            await ch.deliver(batch("d2"), "CRASH")
        await ch.deliver(batch("d2"), "two")
        assert ch.describe()["starts"] == 2
    assert session is not None
    assert rig.history(session) == ["one", "two"]
    assert [r["params"]["sessionId"] for r in rig.records("session/load")] == [session]
    assert len(rig.records("session/new")) == 1


async def test_failed_load_opens_a_new_session_and_stores_it(rig: Rig) -> None:
    agent = rig.agent(ACP_NO_LOAD="1")
    async with channel(rig, agent) as ch:
        await ch.deliver(batch("d1"), "one")
        first = rig.stored_session()
        with pytest.raises(DeliveryFailed):
            await ch.deliver(batch("d2"), "CRASH")
        await ch.deliver(batch("d2"), "two")
    second = rig.stored_session()
    assert first is not None and second is not None and first != second
    assert rig.records("session/load") == []


async def test_permission_request_is_cancelled_and_the_turn_still_acks(rig: Rig) -> None:
    async with channel(rig, rig.agent()) as ch:
        await ch.deliver(batch("d1"), "ASK d1")
    (answer,) = [r for r in rig.records() if r["event"] == "permission_answer"]
    assert answer["id"] == "perm-1"
    assert answer["result"] == {"outcome": {"outcome": "cancelled"}}


async def test_busy_while_a_prompt_runs_and_no_process_left_after_close(rig: Rig) -> None:
    async with channel(rig, rig.agent()) as ch:
        assert not await ch.is_busy()
        async with anyio.create_task_group() as tg:
            tg.start_soon(ch.deliver, batch("d1"), "SLOW d1")
            await wait_until(lambda: rig.records("session/prompt"))
            assert await ch.is_busy()
            assert ch.busy_reason() == "in turn"
            (rig.tmp / "gate").write_text("go")
        assert not await ch.is_busy()
        pid = ch.describe()["pid"]
        assert isinstance(pid, int) and alive(pid)
    assert not alive(pid)
