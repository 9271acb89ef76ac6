"""SpawnChannel with real child processes: the stdin line, argv, env, cwd, success rules, stalls,
cancellation, busy, bounded logs, and the factory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.channels.claude import ClaudeSpawnChannel
from agentmaild.channels.commands import render_argv
from agentmaild.channels.factory import make_channel
from agentmaild.channels.spawn import SpawnChannel
from agentmaild.channels.stdin import StdinChannel
from agentmaild.channels.tmux import TmuxChannel
from agentmaild.config import Config, SpawnConfig
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch, Message
from tests.support.waiting import alive
from tests.support.waiting import wait_until as wait_for

BOUND = 30.0  # upper bound for any single wait: only a hang reaches it, never a loaded machine
AGENTS = Path(__file__).resolve().parents[1] / "agents"
PY = sys.executable


def real(path: str | Path) -> str:
    return os.path.realpath(path)


def agent_cmd(name: str, *args: str) -> tuple[str, ...]:
    return (PY, str(AGENTS / name), *args)


def make_agent(command: tuple[str, ...], **kw: Any) -> Agent:
    return Agent(
        name=kw.pop("name", "alice"), capability="builder", channel="spawn", command=command, **kw
    )


def make_config(**spawn: Any) -> Config:
    # No test here outside the stall tests may stall, even with a cold start on a loaded machine.
    values: dict[str, Any] = {"stall_timeout_s": 30.0, "kill_grace_s": 0.5}
    values.update(spawn)
    return Config(spawn=SpawnConfig(**values))


def batch(delivery_id: str = "dlv-1", attempt: int = 1) -> Batch:
    msg = Message(id="msg-1", from_agent="bob", to_agent="alice", subject="s", body="b")
    return Batch(delivery_id=delivery_id, agent="alice", messages=(msg,), attempt=attempt)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store" / "mail.db"


async def test_one_stream_json_line_with_text_verbatim_and_env(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("AGENTMAIL_")]:
        monkeypatch.delenv(key)  # e.g. AGENTMAIL_TEST_PG: inherited by the agent like any other
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/kept")  # not CLAUDE_CODE_*: inherited
    out = tmp_path / "rec.jsonl"
    text = "hi; rm -rf / && echo $(touch pwned) `id` \"q\" 'q' \\n {agent}\nline 2 ✓"
    channel = SpawnChannel(make_agent(agent_cmd("record_agent.py", str(out))), make_config(), store)
    with anyio.fail_after(BOUND):
        await channel.deliver(batch("dlv-42"), text)
    (rec,) = records(out)
    assert rec["uuid"] == "dlv-42"
    assert rec["text"] == text
    assert rec["event"] == {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": None,
        "uuid": "dlv-42",
    }
    assert rec["rest_of_stdin"] == ""  # exactly one line, then EOF
    scope = rec["env"].pop("AGENTMAIL_SCOPE")  # the marker that finds escaped descendants
    assert scope.startswith(f"{os.getpid()}-")
    assert rec["env"] == {
        "AGENTMAIL_AGENT": "alice",
        "AGENTMAIL_DB": str(store),  # the fixture's path is absolute already
        "AGENTMAIL_DELIVERY": "dlv-42",
    }
    assert rec["claude_env"] == []
    assert not (tmp_path / "pwned").exists()
    assert channel.describe()["last_exit_code"] == 0
    assert not await channel.is_busy()


async def test_argv_placeholders_substituted_without_a_shell(tmp_path: Path, store: Path) -> None:
    out = tmp_path / "rec.jsonl"
    command = agent_cmd(
        "record_agent.py",
        str(out),
        "--who={agent}",
        "{session_id}",
        "id-{delivery_id}",
        "{unknown}",
        "{agent",
        "$HOME",
        "a b;c",
    )
    agent = make_agent(command, session_id="sess-9")
    async with SpawnChannel(agent, make_config(), store) as channel:
        await channel.deliver(batch("dlv-7"), "x")
    (rec,) = records(out)
    assert rec["argv"][1:] == [
        str(out),
        "--who=alice",
        "sess-9",
        "id-dlv-7",
        "{unknown}",
        "{agent",
        "$HOME",
        "a b;c",
    ]


def test_render_argv_is_one_pass() -> None:
    values = {"agent": "{delivery_id}", "session_id": "", "delivery_id": "D"}
    assert render_argv(("{agent}/{delivery_id}", "{{agent}}"), values) == [
        "{delivery_id}/D",
        "{{delivery_id}}",
    ]


async def test_shebang_script_runs_directly_and_cwd_is_honoured(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "rec.jsonl"
    monkeypatch.setenv("RECORD_FILE", str(out))
    workdir = tmp_path / "work"
    workdir.mkdir()
    agent = make_agent((str(AGENTS / "record_agent.py"),), cwd=str(workdir))
    async with SpawnChannel(agent, make_config(), store) as channel:
        with anyio.fail_after(BOUND):
            await channel.deliver(batch(), "x")
    (rec,) = records(out)
    assert real(rec["cwd"]) == real(workdir)


async def test_non_zero_exit_fails_the_delivery(tmp_path: Path, store: Path) -> None:
    agent = make_agent(agent_cmd("record_agent.py", str(tmp_path / "r"), "--exit", "1"))
    channel = SpawnChannel(agent, make_config(), store)
    with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match="exit code 1"):
        await channel.deliver(batch(), "x")
    assert channel.describe()["last_exit_code"] == 1
    assert channel.describe()["last_error"] == "exit code 1"
    assert not await channel.is_busy()


async def test_flaky_agent_fails_twice_then_delivers(tmp_path: Path, store: Path) -> None:
    counter = tmp_path / "count"
    channel = SpawnChannel(
        make_agent(agent_cmd("flaky_agent.py", str(counter), "2")), make_config(), store
    )
    outcomes = []
    for attempt in (1, 2, 3):
        try:
            await channel.deliver(batch("dlv-f", attempt), "x")
            outcomes.append("ok")
        except DeliveryFailed:
            outcomes.append("failed")
    assert outcomes == ["failed", "failed", "ok"]
    assert [r["uuid"] for r in records(Path(f"{counter}.log"))] == ["dlv-f"] * 3


async def test_stall_terms_then_kills_the_group(tmp_path: Path, store: Path) -> None:
    pid_file = tmp_path / "pids.json"
    agent = make_agent(agent_cmd("hang_agent.py", str(pid_file), "--ignore-term", "--grandchild"))
    # The watchdog runs from the spawn, so its 2 s include the cold start before the pid file is
    # written (0.3 s did not, on a loaded machine): silence after that is what it kills.
    channel = SpawnChannel(agent, make_config(stall_timeout_s=2.0, kill_grace_s=0.3), store)
    with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match="stalled"):
        await channel.deliver(batch(), "x")
    pids = json.loads(pid_file.read_text())
    assert not alive(pids["pid"])
    await wait_for(lambda: not alive(pids["grandchild"]), within_s=BOUND)
    assert channel.describe()["last_exit_code"] == -9
    assert not await channel.is_busy()


async def test_per_agent_stall_timeout_setting(tmp_path: Path, store: Path) -> None:
    agent = make_agent(
        agent_cmd("hang_agent.py", str(tmp_path / "p")), settings={"stall_timeout_s": 0.2}
    )
    channel = SpawnChannel(agent, make_config(stall_timeout_s=600.0), store)
    with anyio.fail_after(BOUND), pytest.raises(DeliveryFailed, match=r"no output for 0\.2s"):
        await channel.deliver(batch(), "x")


async def test_cancelled_delivery_kills_and_reaps_the_child(tmp_path: Path, store: Path) -> None:
    pid_file = tmp_path / "pids.json"
    agent = make_agent(agent_cmd("hang_agent.py", str(pid_file), "--ignore-term", "--grandchild"))
    channel = SpawnChannel(agent, make_config(kill_grace_s=0.3), store)
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            tg.start_soon(channel.deliver, batch(), "x")
            await wait_for(pid_file.exists)
            pids = json.loads(pid_file.read_text())
            assert await channel.is_busy()
            assert channel.describe()["pid"] == pids["pid"]
            with pytest.raises(AgentBusy, match="still running"):
                await channel.deliver(batch("dlv-2"), "y")  # never two turns at once
            tg.cancel_scope.cancel()
    assert not alive(pids["pid"])
    await wait_for(lambda: not alive(pids["grandchild"]), within_s=BOUND)
    assert not await channel.is_busy()
    assert channel.describe()["pid"] is None


async def test_aclose_terminates_a_running_turn(tmp_path: Path, store: Path) -> None:
    pid_file = tmp_path / "pids.json"
    agent = make_agent(agent_cmd("hang_agent.py", str(pid_file), "--grandchild"))
    channel = SpawnChannel(agent, make_config(kill_grace_s=2.0), store)
    failures: list[DeliveryFailed] = []

    async def deliver() -> None:
        try:
            await channel.deliver(batch(), "x")
        except DeliveryFailed as exc:
            failures.append(exc)

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver)
            await wait_for(pid_file.exists)
            await channel.aclose()
    pids = json.loads(pid_file.read_text())
    assert [f.message for f in failures] == ["killed by SIGTERM"]
    assert not alive(pids["pid"])
    await wait_for(lambda: not alive(pids["grandchild"]), within_s=BOUND)
    with pytest.raises(AgentUnavailable, match="closed"):
        await channel.deliver(batch(), "x")


async def test_huge_output_is_bounded_in_the_log(store: Path) -> None:
    agent = make_agent(
        agent_cmd("noisy_agent.py", "24", "--lines", "10", "--result"),
        settings={"success": "result"},  # garbage is skipped, the result line still counts
    )
    config = make_config(log_max_bytes=64 * 1024, log_keep=2)
    channel = SpawnChannel(agent, config, store)
    with anyio.fail_after(BOUND * 3):
        await channel.deliver(batch(), "x")
    logs = sorted((store.parent / "logs").iterdir())
    assert [p.name for p in logs] == ["alice.log", "alice.log.1", "alice.log.2"][: len(logs)]
    assert all(p.stat().st_size <= 64 * 1024 for p in logs)
    current = (store.parent / "logs" / "alice.log").read_bytes()
    assert b"line 9 of noise" in current
    assert b"[stderr] stderr noise 9" in current
    assert b"--- exit 0" in current


async def test_log_rotation_is_bounded_by_count_over_turns(store: Path) -> None:
    agent = make_agent(agent_cmd("noisy_agent.py", "0.05", "--lines", "2"))
    channel = SpawnChannel(agent, make_config(log_max_bytes=20_000, log_keep=1), store)
    for n in range(6):
        await channel.deliver(batch(f"dlv-{n}"), "x")
    names = sorted(p.name for p in (store.parent / "logs").iterdir())
    assert names == ["alice.log", "alice.log.1"]
    assert channel.describe()["turns"] == 6


@pytest.mark.parametrize(
    ("command", "cwd", "match"),
    [
        (("no-such-agent-cli-xyz",), None, "not found on PATH"),
        (("/nonexistent/bin/agent",), None, "not found or not executable"),
        ((PY, "-c", "pass"), "/nonexistent/dir", "is not a directory"),
        ((), None, "has no command"),
        ((PY, "--resume", "{session_id}"), None, "no session id"),
    ],
)
async def test_unstartable_agents_are_unavailable(
    store: Path, command: tuple[str, ...], cwd: str | None, match: str
) -> None:
    channel = SpawnChannel(make_agent(command, cwd=cwd), make_config(), store)
    with pytest.raises(AgentUnavailable, match=match):
        await channel.deliver(batch(), "x")
    assert not await channel.is_busy()


async def test_non_executable_file_is_unavailable(tmp_path: Path, store: Path) -> None:
    plain = tmp_path / "agent.py"
    plain.write_text("print('hi')\n")
    channel = SpawnChannel(make_agent((str(plain),)), make_config(), store)
    with pytest.raises(AgentUnavailable, match="not executable"):
        await channel.deliver(batch(), "x")


@pytest.mark.parametrize(
    ("rule", "flags", "error"),
    [
        ("result", (), None),
        ("result", ("--is-error",), "is_error: error_during_execution: API Error: 500"),
        ("result", ("--no-result",), "without a result event"),
        ("result", ("--exit", "2"), "exit code 2"),
        ("exit0", ("--is-error",), None),  # the generic rule looks at the exit code only
        ("exit0", ("--no-result",), None),
    ],
)
async def test_success_rules(
    tmp_path: Path, store: Path, rule: str, flags: tuple[str, ...], error: str | None
) -> None:
    record = tmp_path / "seen.jsonl"
    agent = make_agent(
        agent_cmd("result_agent.py", "--record", str(record), *flags), settings={"success": rule}
    )
    channel = SpawnChannel(agent, make_config(), store)
    with anyio.fail_after(BOUND):
        if error is None:
            await channel.deliver(batch("dlv-r"), "x")
        else:
            with pytest.raises(DeliveryFailed, match=error):
                await channel.deliver(batch("dlv-r"), "x")
    assert records(record)[0]["uuid"] == "dlv-r"


def test_bad_settings_are_unavailable(store: Path) -> None:
    with pytest.raises(AgentUnavailable, match=r"settings\.success"):
        SpawnChannel(make_agent(("x",), settings={"success": "vibes"}), make_config(), store)
    with pytest.raises(AgentUnavailable, match=r"settings\.stall_timeout_s"):
        SpawnChannel(make_agent(("x",), settings={"stall_timeout_s": -1}), make_config(), store)


def test_factory_maps_channels(store: Path) -> None:
    config = make_config()
    spawn = make_channel(make_agent(("x",)), config, store)
    assert isinstance(spawn, SpawnChannel)
    assert spawn.kind == "spawn"
    stdin = make_channel(
        Agent(name="a", capability="builder", channel="stdin", command=("x",)), config, store
    )
    assert isinstance(stdin, StdinChannel)
    tmux = make_channel(
        Agent(name="a", capability="builder", channel="tmux", tmux_target="s:0.0", tmux_socket="t"),
        config,
        store,
    )
    assert isinstance(tmux, TmuxChannel)
    claude = make_channel(
        Agent(name="a", capability="builder", channel="spawn", preset="claude"), config, store
    )
    assert isinstance(claude, ClaudeSpawnChannel)
    with pytest.raises(ValueError, match="pull"):
        make_channel(Agent(name="a", capability="builder", channel="pull"), config, store)
    with pytest.raises(AgentUnavailable, match="unknown channel"):
        make_channel(Agent(name="a", capability="builder", channel="carrier-pigeon"), config, store)
