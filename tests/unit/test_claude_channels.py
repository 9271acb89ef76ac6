"""ClaudeSpawnChannel and StdinChannel against tests/agents/fake_claude.py, a scripted stand-in
for ``claude -p`` stream-json: sessions, ack rules, every failure mode, busy, env, restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.channels.claude import ClaudeSpawnChannel, session_holder
from agentmaild.channels.factory import make_channel
from agentmaild.channels.stdin import StdinChannel
from agentmaild.config import Config, SpawnConfig, StdinConfig
from agentmaild.daemon.journal import StoreProcJournal
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch, Message
from agentmaild.procs.child import ChildExit
from agentmaild.procs.pids import start_time
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.waiting import alive
from tests.support.waiting import wait_until as wait_for

BOUND = 30.0
FAKE = Path(__file__).resolve().parents[1] / "agents" / "fake_claude.py"
STREAM_FLAGS = [
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--replay-user-messages",
]


@dataclass
class Rig:
    """One agent wired to the stand-in: its store, HOME, record file and one-shot mode file."""

    tmp: Path
    db: Path
    home: Path
    record: Path
    mode_file: Path
    bin_dir: Path

    def agent(self, channel: str = "spawn", **kw: Any) -> Agent:
        env = {
            "HOME": str(self.home),
            "FAKE_CLAUDE_RECORD": str(self.record),
            "FAKE_CLAUDE_MODE_FILE": str(self.mode_file),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            **kw.pop("env", {}),
        }
        settings = {"env": env, **kw.pop("settings", {})}
        kw.setdefault("command", (str(self.bin_dir / "claude"),))
        kw.setdefault("preset", "claude")
        agent = Agent(
            name="alice",
            capability="builder",
            channel=channel,
            settings=settings,
            **kw,
        )
        store = SqliteMailStore(self.db)
        try:
            if store.get_agent(agent.name) is not None:
                store.remove_agent(agent.name)
            store.add_agent(agent)
        finally:
            store.close()
        return agent

    def next_turn(self, mode: str) -> None:
        self.mode_file.write_text(mode)

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        rows = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [r for r in rows if event is None or r["event"] == event]

    def stored_session(self) -> str | None:
        store = SqliteMailStore(self.db)
        try:
            agent = store.get_agent("alice")
        finally:
            store.close()
        assert agent is not None
        return agent.session_id


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "claude"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    wrapper.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    return Rig(
        tmp=tmp_path,
        db=tmp_path / "store" / "mail.db",
        home=home,
        record=tmp_path / "record.jsonl",
        mode_file=tmp_path / "mode",
        bin_dir=bin_dir,
    )


def config(**stdin: Any) -> Config:
    values: dict[str, Any] = {
        "restart_backoff_initial_s": 0.05,
        "restart_backoff_max_s": 0.2,
        "stall_timeout_s": 30.0,  # only the stall tests may stall, cold start or not
    }
    values.update(stdin)
    return Config(
        spawn=SpawnConfig(stall_timeout_s=30.0, kill_grace_s=0.5),
        stdin=StdinConfig(**values),
    )


def batch(delivery_id: str = "dlv-1", body: str = "hello", attempt: int = 1) -> Batch:
    msg = Message(
        id=f"msg-{delivery_id}", from_agent="bob", to_agent="alice", subject="s", body=body
    )
    return Batch(delivery_id=delivery_id, agent="alice", messages=(msg,), attempt=attempt)


def spawn(rig: Rig, agent: Agent, **kw: Any) -> ClaudeSpawnChannel:
    channel = make_channel(agent, config(), rig.db)
    assert isinstance(channel, ClaudeSpawnChannel)
    return channel


def stdin(rig: Rig, agent: Agent, **cfg: Any) -> StdinChannel:
    channel = make_channel(agent, config(**cfg), rig.db)
    assert isinstance(channel, StdinChannel)
    return channel


def without_mcp(argv: list[str]) -> list[str]:
    """``argv`` without the MCP server's flags (``--mcp-config JSON --allowedTools mcp__…
    --settings JSON``, the settings holding the hook that refuses the tools to subagents), which
    must be there, once."""
    at = argv.index("--mcp-config")
    assert argv[at + 2 : at + 5] == ["--allowedTools", "mcp__agentmail", "--settings"]
    assert json.loads(argv[at + 1])["mcpServers"]["agentmail"]["args"][:3] == [
        "-m", "agentmaild.hot.mcp_relay", "--agent"]  # fmt: skip
    [guard] = json.loads(argv[at + 5])["hooks"]["PreToolUse"]
    assert guard["matcher"] == "mcp__agentmail__.*"
    assert " hook pre-tool-use --agent " in guard["hooks"][0]["command"]
    return argv[:at] + argv[at + 6 :]


def session_args(argv: list[str]) -> list[str]:
    return [a for a in argv if a in ("--resume", "--session-id")]


# ---- spawn, Claude preset ------------------------------------------------------------------


async def test_spawn_first_turn_chooses_and_persists_session_then_resumes(rig: Rig) -> None:
    agent = rig.agent()
    saved: list[tuple[str, int]] = []
    channel = ClaudeSpawnChannel(agent, config(), rig.db)
    real_saver = channel.session._saver

    async def saver(session_id: str) -> None:
        saved.append((session_id, len(rig.records())))  # nothing started yet when it lands
        await real_saver(session_id)

    channel.session._saver = saver
    async with channel:
        await channel.deliver(batch("dlv-1", "first body"), "first text")
        await channel.deliver(batch("dlv-2", "second body"), "second text")

    (first, second) = rig.records("start")
    session = rig.stored_session()
    assert session is not None
    assert saved == [(session, 0)]
    assert without_mcp(first["argv"]) == [*STREAM_FLAGS, "--session-id", session]
    assert without_mcp(second["argv"]) == [*STREAM_FLAGS, "--resume", session]
    lines = rig.records("line")
    assert [(r["uuid"], r["text"], r["session"], r["history"]) for r in lines] == [
        ("dlv-1", "first text", session, 0),
        ("dlv-2", "second text", session, 1),
    ]
    assert channel.describe()["session_id"] == session


async def test_spawn_claude_from_path_and_command_extras(rig: Rig) -> None:
    async with spawn(rig, rig.agent(command=None)) as channel:
        await channel.deliver(batch(), "t")
    ch = spawn(rig, rig.agent(command=(str(rig.bin_dir / "claude"), "--model", "m")))
    async with ch:
        ch.session.established = True
        ch.session.id = rig.records("line")[0]["session"]
        await ch.deliver(batch("dlv-2"), "t")
    first, second = rig.records("start")
    assert first["argv"][:7] == STREAM_FLAGS
    assert second["argv"][-2:] == ["--model", "m"]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("exit:2", "exit code 2"),
        ("is_error", "exit code 1; result is_error: .*API Error: 500"),
        ("crash", "exit code 3"),
        ("hang", "stalled"),
    ],
)
async def test_spawn_failure_is_not_acked_and_retry_succeeds(
    rig: Rig, mode: str, reason: str
) -> None:
    # The stall clock runs from the spawn, through the fake's cold start, and the retry that must
    # succeed has the same setting: 2 s, not 0.5, so a loaded machine does not stall the retry.
    agent = rig.agent(settings={"stall_timeout_s": 2.0})
    async with spawn(rig, agent) as channel:
        rig.next_turn(mode)
        with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match=reason):
            await channel.deliver(batch("dlv-1"), "text")
        assert not await channel.is_busy()
        await channel.deliver(batch("dlv-1", attempt=2), "text")
    starts, lines = rig.records("start"), rig.records("line")
    # the delivery id again, made unique per attempt: Claude would skip a uuid it already holds
    assert [r["uuid"] for r in lines] == ["dlv-1", "dlv-1.2"]
    assert not any(alive(r["pid"]) for r in starts)
    session = rig.stored_session()
    assert session is not None and all(r["session"] == session for r in lines)


async def test_spawn_exit0_without_completed_lifecycle_is_not_acked(rig: Rig) -> None:
    # exit 0 and a good result, but the turn for *our* uuid never completed
    from agentmaild.channels.claude import ClaudeEvents

    events = ClaudeEvents()
    events._record({"type": "command_lifecycle", "command_uuid": "other", "state": "completed"})
    channel = spawn(rig, rig.agent())
    done = ChildExit(pid=1, returncode=0, stalled=False, killed=False, duration_s=0.0)
    with pytest.raises(DeliveryFailed, match="unseen"):
        channel._judge_lifecycle(done, events, "dlv-1")


@pytest.mark.parametrize("mode", ["garbage", "huge", "no_lifecycle"])
async def test_spawn_survives_odd_output(rig: Rig, mode: str) -> None:
    async with spawn(rig, rig.agent()) as channel:
        rig.next_turn(mode)
        with anyio.fail_after(BOUND):
            await channel.deliver(batch(), "text")
    log = rig.db.parent / "logs" / "alice.log"
    assert log.exists()
    assert log.stat().st_size <= config().spawn.log_max_bytes


@asynccontextmanager
async def foreign_holder(rig: Rig, agent: Agent) -> AsyncIterator[subprocess.Popen[bytes]]:
    """Another live process (the stand-in CLI) holding the agent's Claude session."""
    env = {**os.environ, **agent.settings["env"]}
    other = subprocess.Popen(  # noqa: ASYNC220 - a foreign holder, outside any scope of ours
        [sys.executable, str(FAKE), *STREAM_FLAGS, "--session-id", agent.session_id or ""],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert other.stdin is not None
        other.stdin.write(b'{"type":"user","uuid":"u0","message":{"content":[{"text":"x"}]}}\n')
        other.stdin.flush()
        transcript = rig.home / ".fake-claude" / f"{agent.session_id}.jsonl"
        await wait_for(transcript.exists)
        assert session_holder(rig.home, agent.session_id or "") == other.pid
        yield other
    finally:
        if other.poll() is None:
            other.kill()
        other.wait()


async def test_spawn_busy_while_another_live_process_holds_the_session(rig: Rig) -> None:
    agent = rig.agent(session_id="11111111-2222-3333-4444-555555555555")
    async with foreign_holder(rig, agent) as other:
        async with spawn(rig, agent) as channel:
            assert await channel.is_busy()
            with pytest.raises(AgentBusy, match=f"held by live pid {other.pid}"):
                await channel.deliver(batch(), "t")
            os.kill(other.pid, signal.SIGKILL)  # leaves a stale sessions/<pid>.json behind
            other.wait()
            assert (rig.home / ".claude" / "sessions" / f"{other.pid}.json").exists()
            assert not await channel.is_busy()
            await channel.deliver(batch(), "t")  # the orphan's session exists: resumed
        (start,) = rig.records("start")[1:]
        assert start["argv"][-2:] == ["--resume", agent.session_id]


async def test_spawn_missing_conversation_falls_back_to_session_id(rig: Rig) -> None:
    session = "99999999-2222-3333-4444-555555555555"  # stored, but never reached Claude
    async with spawn(rig, rig.agent(session_id=session)) as channel:
        with pytest.raises(DeliveryFailed):
            await channel.deliver(batch(), "t")
        await channel.deliver(batch(attempt=2), "t")
    assert [r["argv"][-2:] for r in rig.records("start")] == [
        ["--resume", session],
        ["--session-id", session],
    ]


async def test_spawn_env_hygiene(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
    agent = rig.agent(env={"CLAUDE_CODE_MAX_RETRIES": "0"})
    async with spawn(rig, agent) as channel:
        await channel.deliver(batch("dlv-env"), "t")
    env = rig.records("start")[0]["env"]
    assert "CLAUDECODE" not in env
    assert "CLAUDE_CODE_ENTRYPOINT" not in env
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"  # explicit per-agent env is kept
    assert env["AGENTMAIL_AGENT"] == "alice"
    assert env["AGENTMAIL_DB"] == str(rig.db.absolute())
    assert env["AGENTMAIL_DELIVERY"] == "dlv-env"
    assert env["HOME"] == str(rig.home)


def test_factory_routes_claude_spawn_and_stdin(rig: Rig) -> None:
    assert isinstance(make_channel(rig.agent(), config(), rig.db), ClaudeSpawnChannel)
    plain = Agent(name="p", capability="builder", channel="spawn", command=("x",))
    assert type(make_channel(plain, config(), rig.db)).__name__ == "SpawnChannel"
    stdin_agent = Agent(name="s", capability="builder", channel="stdin", command=("x",))
    assert isinstance(make_channel(stdin_agent, config(), rig.db), StdinChannel)
    with pytest.raises(AgentUnavailable, match="ack_on"):
        make_channel(rig.agent("stdin", settings={"ack_on": "never"}), config(), rig.db)


# ---- stdin -----------------------------------------------------------------------------------


async def test_stdin_one_process_many_turns_acked_per_turn(rig: Rig) -> None:
    async with stdin(rig, rig.agent("stdin")) as channel:
        await channel.deliver(batch("dlv-1"), "one")
        await channel.deliver(batch("dlv-2"), "two")
        pid = channel.describe()["pid"]
        assert isinstance(pid, int) and alive(pid)
    assert not alive(pid)
    (start,) = rig.records("start")
    session = rig.stored_session()
    assert without_mcp(start["argv"]) == [*STREAM_FLAGS, "--session-id", session]
    assert [(r["uuid"], r["history"]) for r in rig.records("line")] == [("dlv-1", 0), ("dlv-2", 1)]
    assert rig.records("start")[0]["env"]["AGENTMAIL_DELIVERY"] == "stdin"


async def test_stdin_process_is_journalled_while_it_runs(rig: Rig) -> None:
    agent = rig.agent("stdin")
    store = AsyncMailStore(SqliteMailStore(rig.db))
    try:
        journal = StoreProcJournal(store)
        await journal.load()
        async with make_channel(agent, config(), rig.db, procs=journal) as channel:
            await channel.deliver(batch("dlv-1"), "one")
            pid = channel.describe()["pid"]
            (row,) = store.sync.list_procs()  # a long-lived process: no delivery id of its own
            assert (row.pid, row.pgid, row.agent, row.delivery_id) == (pid, pid, "alice", None)
            assert row.start_time == start_time(row.pid)
        assert store.sync.list_procs() == []  # stopped with the channel, so forgotten
    finally:
        await store.aclose()


async def test_stdin_busy_until_the_turn_completes(rig: Rig) -> None:
    gate = rig.tmp / "gate"
    async with stdin(rig, rig.agent("stdin")) as channel:
        rig.next_turn(f"gate:{gate}")
        returned = anyio.Event()

        async def deliver() -> None:
            await channel.deliver(batch(), "t")
            returned.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver)
            await wait_for(lambda: rig.records("line"))
            assert await channel.is_busy()
            assert not returned.is_set()
            with pytest.raises(AgentBusy, match="still running"):
                await channel.deliver(batch("dlv-2"), "t")
            gate.touch()
            with anyio.fail_after(BOUND):
                await returned.wait()
        assert not await channel.is_busy()


async def test_stdin_failed_turn_then_retry_same_uuid_same_process(rig: Rig) -> None:
    async with stdin(rig, rig.agent("stdin")) as channel:
        rig.next_turn("is_error")
        with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match="cancelled: API Error"):
            await channel.deliver(batch("dlv-1"), "t")
        await channel.deliver(batch("dlv-1", attempt=2), "t")
    assert [r["uuid"] for r in rig.records("line")] == ["dlv-1", "dlv-1.2"]
    assert len(rig.records("start")) == 1


async def test_stdin_process_gone_between_turns_is_restarted(rig: Rig) -> None:
    async with stdin(rig, rig.agent("stdin")) as channel:
        rig.next_turn("exit:0")  # a good turn, then the process leaves
        await channel.deliver(batch("dlv-1"), "t")
        await wait_for(lambda: not channel.describe()["running"])
        await channel.deliver(batch("dlv-2"), "t")
    _, second_start = rig.records("start")
    assert second_start["argv"][-2:] == ["--resume", rig.stored_session()]


async def test_stdin_crash_mid_turn_restarts_with_backoff_and_resumes(rig: Rig) -> None:
    async with stdin(
        rig, rig.agent("stdin"), restart_backoff_initial_s=0.3, restart_backoff_max_s=1.0
    ) as channel:
        await channel.deliver(batch("dlv-1"), "good")
        first_pid = channel.describe()["pid"]
        rig.next_turn("crash")
        with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match="exited mid-turn"):
            await channel.deliver(batch("dlv-2"), "boom")
        started = time.monotonic()
        await channel.deliver(batch("dlv-2", attempt=2), "boom")
        assert time.monotonic() - started >= 0.25  # the restart waited out the backoff
        assert channel.describe()["pid"] != first_pid
    session = rig.stored_session()
    first, second = rig.records("start")
    assert session_args(first["argv"]) == ["--session-id"]
    assert second["argv"][-2:] == ["--resume", session]
    assert [(r["uuid"], r["pid"]) for r in rig.records("line")] == [
        ("dlv-1", first["pid"]),
        ("dlv-2", first["pid"]),
        ("dlv-2.2", second["pid"]),
    ]


async def test_stdin_restart_backoff_grows_and_is_capped(rig: Rig) -> None:
    agent = rig.agent("stdin", env={"FAKE_CLAUDE_MODE": "crash"})
    gaps = []
    with capture_logs() as logs:
        ch = stdin(rig, agent, restart_backoff_initial_s=0.1, restart_backoff_max_s=0.15)
        async with ch:
            for attempt in range(1, 4):
                started = time.monotonic()
                with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed):
                    await ch.deliver(batch(attempt=attempt), "t")
                gaps.append(time.monotonic() - started)
    # The cap is read off the planned delays, not off a wall clock that a loaded machine stretches.
    planned = [e["restart_in_s"] for e in logs if e["event"] == "stdin.exited"]
    assert planned[:3] == [0.1, 0.15, 0.15]  # doubled, then capped (uncapped: 0.2, 0.4)
    assert gaps[1] >= 0.09  # and each restart really waited its delay
    assert gaps[2] >= 0.14


async def test_stdin_stall_kills_the_group(rig: Rig) -> None:
    # The first turn's stall clock includes the fake's cold start, and so does the restart's: 2 s.
    async with stdin(rig, rig.agent("stdin"), stall_timeout_s=2.0) as channel:
        rig.next_turn("hang")
        with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match="stalled"):
            await channel.deliver(batch(), "t")
        (start,) = rig.records("start")
        await wait_for(lambda: not alive(start["pid"]))
        await channel.deliver(batch(attempt=2), "t")  # restarted


async def test_stdin_idle_between_turns_is_not_a_stall(rig: Rig) -> None:
    # 2 s: the first turn's stall clock includes the fake's cold start (0.2 s did, under load).
    async with stdin(rig, rig.agent("stdin"), stall_timeout_s=2.0) as channel:
        await channel.deliver(batch("dlv-1"), "t")
        await anyio.sleep(2.5)  # longer than the stall timeout, with no turn running
        await channel.deliver(batch("dlv-2"), "t")
    assert len(rig.records("start")) == 1


@pytest.mark.parametrize("mode", ["garbage", "huge", "no_lifecycle"])
async def test_stdin_survives_odd_output(rig: Rig, mode: str) -> None:
    async with stdin(rig, rig.agent("stdin")) as channel:
        rig.next_turn(mode)
        with anyio.fail_after(BOUND):
            await channel.deliver(batch("dlv-1"), "t")
            await channel.deliver(batch("dlv-2"), "t")
    assert len(rig.records("start")) == 1


async def test_stdin_ack_on_write_returns_before_the_turn_ends(rig: Rig) -> None:
    gate = rig.tmp / "gate"
    agent = rig.agent("stdin", settings={"ack_on": "write"})
    rig.next_turn(f"gate:{gate}")
    async with stdin(rig, agent) as channel:
        with anyio.fail_after(BOUND):
            await channel.deliver(batch(), "t")
        await wait_for(lambda: rig.records("line"))
        assert not await channel.is_busy()
        with anyio.fail_after(BOUND):
            await channel.aclose()  # the gated turn never ends: EOF, grace, then TERM
    assert not alive(rig.records("start")[0]["pid"])


async def test_stdin_busy_while_another_live_process_holds_the_session(rig: Rig) -> None:
    agent = rig.agent("stdin", session_id="11111111-2222-3333-4444-555555555555")
    async with foreign_holder(rig, agent) as other:
        async with stdin(rig, agent) as channel:
            assert await channel.is_busy()
            with pytest.raises(AgentBusy, match="held by live pid"):
                await channel.deliver(batch(), "t")
            other.stdin.close()  # the holder ends cleanly: its file goes
            other.wait()
            assert not await channel.is_busy()
            await channel.deliver(batch(), "t")


async def test_stdin_missing_executable_is_unavailable(rig: Rig) -> None:
    agent = rig.agent("stdin", command=(str(rig.tmp / "nope"),))
    async with stdin(rig, agent) as channel:
        with pytest.raises(AgentUnavailable, match="not found"):
            await channel.deliver(batch(), "t")


async def test_stdin_generic_cli_with_command_template(rig: Rig) -> None:
    agent = rig.agent("stdin", preset=None, command=(sys.executable, str(FAKE), "--x", "{agent}"))
    async with stdin(rig, agent) as channel:
        await channel.deliver(batch(), "t")
    (start,) = rig.records("start")
    assert start["argv"] == ["--x", "alice"]


async def test_stdin_cancelled_deliver_stays_busy_until_the_turn_ends(rig: Rig) -> None:
    gate = rig.tmp / "gate"
    async with stdin(rig, rig.agent("stdin")) as channel:
        rig.next_turn(f"gate:{gate}")
        with anyio.move_on_after(0.3):
            await channel.deliver(batch(), "t")
        assert await channel.is_busy()
        gate.touch()
        with anyio.fail_after(BOUND):
            while await channel.is_busy():  # noqa: ASYNC110 - the agent's turn has no event
                await anyio.sleep(0.01)


async def test_a_uuid_the_cli_already_holds_is_not_acked(rig: Rig) -> None:
    # Claude answers a known uuid with replay + "completed" and never runs the turn.
    async with spawn(rig, rig.agent()) as channel:
        await channel.deliver(batch("dlv-1"), "t")
        with pytest.raises(DeliveryFailed, match="without a result"):
            await channel.deliver(batch("dlv-1"), "t")
    rig.agent("stdin")
    async with stdin(rig, rig.agent("stdin")) as channel2:
        await channel2.deliver(batch("dlv-9"), "t")
        with pytest.raises(DeliveryFailed, match="skipped"):
            await channel2.deliver(batch("dlv-9"), "t")
