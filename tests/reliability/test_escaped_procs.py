"""Agent processes that escape their turn (setsid, double fork) or outlive a SIGKILLed daemon.

Real `agentmaild serve` subprocesses, real stand-in agents (tests/agents/escape_agent.py) that
double-fork a grandchild into a session of its own, real SQLite: the grandchild is stopped and
reaped when its turn ends; a turn orphaned by a daemon's death is stopped by the next daemon
before the redelivered attempt starts; a journalled pid now held by another process is left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.channels.spawn import SpawnChannel
from agentmaild.config import Config
from agentmaild.daemon.journal import StoreProcJournal
from agentmaild.errors import AgentBusy, DeliveryFailed
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Batch
from agentmaild.procs.pids import start_time
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.records import AgentProc
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import (
    DaemonProc,
    add_spawn,
    agent_cmd,
    assert_sound,
    read_jsonl,
    wait_for,
)
from tests.support.waiting import alive

HANG = {"AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S": "60"}  # a silent turn is not a stall here


def _events(ledger: Path, event: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(ledger) if e["event"] == event]


def _gone(pid: int) -> bool:
    """Not even a zombie is left: the process exited and its parent reaped it."""
    return not Path(f"/proc/{pid}").exists()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    """The agents' ledger; every process it names is SIGKILLed after the test, pass or fail."""
    path = tmp_path / "ledger.jsonl"
    yield path
    for event in read_jsonl(path):
        if alive(event["pid"]):
            os.kill(event["pid"], signal.SIGKILL)


def _send(db: Path, to: str) -> str:
    store = SqliteMailStore(db)
    try:
        return Mailer(store).send(sender="bob", to=to, subject="s", body="go").ids[0]
    finally:
        store.close()


def _setup(db: Path, name: str, command: tuple[str, ...]) -> None:
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="bob", capability="lead"))
        add_spawn(store, name, command)
    finally:
        store.close()


def test_a_setsid_grandchild_is_stopped_and_reaped_when_its_turn_ends(
    db: Path, ledger: Path, daemons: Callable[..., DaemonProc]
) -> None:
    _setup(db, "esc", agent_cmd("escape_agent.py", str(ledger)))
    d = daemons()
    _send(db, "esc")
    (grandchild,) = wait_for(lambda: _events(ledger, "grandchild"), 15, "the grandchild")
    wait_for(lambda: d.events("delivery.acked"), 15, "the turn to be acked")
    # Gone from /proc altogether: stopped, and reaped by the daemon it was re-parented to.
    wait_for(lambda: _gone(grandchild["pid"]), 20, "the escaped grandchild to be gone")
    assert [e["pid"] for e in _events(ledger, "term")] == [grandchild["pid"]]
    (stopped,) = d.events("proc.escaped_stopped")
    assert stopped["pids"] == [grandchild["pid"]] and stopped["agent"] == "esc"
    assert d.events("daemon.subreaper")[0]["enabled"] is True
    assert d.stop() == 0
    assert_sound(db)


def test_an_escapee_that_clears_its_environment_and_double_forks_is_stopped_by_its_cgroup(
    db: Path, ledger: Path, daemons: Callable[..., DaemonProc]
) -> None:
    # setsid, a double fork, and an exec with an empty environment: no marker, no session, no
    # ancestry leads back to the turn; only its cgroup does (procs.cgroups).
    _setup(db, "esc", agent_cmd("escape_agent.py", str(ledger), "--scrub"))
    d = daemons()
    _send(db, "esc")
    # (that its environment is empty once it runs is proved in tests/unit/test_cgroups.py: here
    # the turn may end, and the grandchild be stopped, before it could be looked at)
    (grandchild,) = wait_for(lambda: _events(ledger, "grandchild"), 15, "the grandchild")
    wait_for(lambda: d.events("delivery.acked"), 15, "the turn to be acked")
    wait_for(lambda: _gone(grandchild["pid"]), 20, "the scrubbed escapee to be gone")
    (stopped,) = d.events("proc.escaped_stopped")
    assert stopped["pids"] == [grandchild["pid"]] and stopped["agent"] == "esc"
    assert d.stop() == 0
    assert_sound(db)


def test_without_cgroups_the_group_and_marker_method_still_stops_an_escapee(
    db: Path, ledger: Path, daemons: Callable[..., DaemonProc]
) -> None:
    _setup(db, "esc", agent_cmd("escape_agent.py", str(ledger)))
    d = daemons({"AGENTMAILD_DAEMON_CGROUPS": "false"})
    _send(db, "esc")
    (grandchild,) = wait_for(lambda: _events(ledger, "grandchild"), 15, "the grandchild")
    wait_for(lambda: _gone(grandchild["pid"]), 20, "the escaped grandchild to be gone")
    (stopped,) = d.events("proc.escaped_stopped")
    assert stopped["pids"] == [grandchild["pid"]]
    assert d.stop() == 0


def test_an_escapee_that_exits_during_its_turn_is_reaped_not_left_a_zombie(
    db: Path, ledger: Path, daemons: Callable[..., DaemonProc]
) -> None:
    _setup(db, "esc", agent_cmd("escape_agent.py", str(ledger), "--short"))
    d = daemons(HANG)
    _send(db, "esc")
    (grandchild,) = wait_for(lambda: _events(ledger, "grandchild"), 15, "the grandchild")
    wait_for(lambda: d.events("delivery.acked"), 15, "the turn to be acked")
    # It exited on its own mid-turn; as the daemon's re-parented child only the daemon can reap it.
    wait_for(lambda: _gone(grandchild["pid"]), 20, "the grandchild's zombie to be reaped")
    assert _events(ledger, "term") == []
    assert d.stop() == 0
    assert_sound(db)


def test_the_next_daemon_stops_an_orphaned_turn_before_redelivering(
    db: Path, ledger: Path, daemons: Callable[..., DaemonProc]
) -> None:
    _setup(db, "orphan", agent_cmd("escape_agent.py", str(ledger), "--hang"))
    first = daemons(HANG)
    _send(db, "orphan")
    (start,) = wait_for(lambda: _events(ledger, "start"), 15, "the first attempt to start")
    (grandchild,) = wait_for(lambda: _events(ledger, "grandchild"), 15, "its grandchild")
    first.kill()
    assert alive(start["pid"]) and alive(grandchild["pid"])  # the daemon's death left them running

    second = daemons(HANG)
    starts = wait_for(lambda: _events(ledger, "start")[1:], 15, "the redelivered attempt")
    retry = starts[0]
    assert retry["uuid"] == start["uuid"]  # the same delivery, redelivered
    assert retry["alive_before"] == []  # never two agent processes for the one agent
    terms = {e["pid"]: e["t"] for e in _events(ledger, "term")}
    assert set(terms) == {start["pid"], grandchild["pid"]}
    assert max(terms.values()) < retry["t"], "the orphan must be stopped before the new attempt"
    assert not alive(start["pid"]) and not alive(grandchild["pid"])
    stopped = {(e["agent"], e["pid"]) for e in second.events("daemon.orphan_stopped")}
    assert stopped == {("orphan", start["pid"]), ("orphan", grandchild["pid"])}
    check = SqliteMailStore(db)
    try:
        (row,) = check.list_procs()  # only the redelivered attempt's own, live process
        assert (row.pid, row.agent) == (retry["pid"], "orphan")
        assert row.daemon_pid == second.proc.pid  # type: ignore[union-attr]
    finally:
        check.close()
    assert second.stop() == 0
    assert _gone(retry["pid"]) or not alive(retry["pid"])
    assert_sound(db)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-S", "-c", "import time\nwhile True: time.sleep(60)"],
        stdin=subprocess.DEVNULL, start_new_session=True,
    )


def _row(pid: int, started: str, agent: str) -> AgentProc:
    return AgentProc(pid=pid, start_time=started, pgid=pid, agent=agent, delivery_id="dlv-x",
                     daemon_pid=2**22 + 1, started_at=time.time())


def test_a_journalled_pid_now_held_by_another_process_is_not_signalled(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    reused, recorded = _sleeper(), _sleeper()
    try:
        started = wait_for(lambda: start_time(recorded.pid), 20, "the sleeper's start time")
        store = SqliteMailStore(db)
        # The same pid as a live process, but another start time: the pid was reused.
        store.record_proc(_row(reused.pid, "1", "stale"))
        store.record_proc(_row(recorded.pid, started, "real"))  # the control: that one goes
        store.close()
        d = daemons()
        wait_for(lambda: recorded.poll() is not None, 20, "the recorded orphan to be stopped")
        assert reused.poll() is None, "a reused pid was signalled"
        assert [e["agent"] for e in d.events("daemon.orphan_stopped")] == ["real"]
        check = SqliteMailStore(db)
        try:
            assert check.list_procs() == []  # both rows settled: one stopped, one stale
        finally:
            check.close()
        assert d.stop() == 0
    finally:
        for p in (reused, recorded):
            p.kill()
            p.wait(10)
    assert_sound(db)


async def _deliver_ignoring_failure(channel: SpawnChannel, batch: Batch) -> None:
    with contextlib.suppress(DeliveryFailed):  # it is stopped mid-turn on purpose
        await channel.deliver(batch, "hi")


async def test_a_live_process_of_an_earlier_daemon_keeps_its_agent_busy(
    db: Path, tmp_path: Path
) -> None:
    """Belt and braces behind recovery: no new turn while the journal says one still runs."""
    earlier = _sleeper()
    store = AsyncMailStore(SqliteMailStore(db))
    try:
        started = start_time(earlier.pid)
        assert started is not None
        store.sync.record_proc(_row(earlier.pid, started, "alice"))
        journal = StoreProcJournal(store)
        await journal.load()
        agent = Agent(name="alice", capability="builder", channel="spawn",
                      command=agent_cmd("hang_agent.py", str(tmp_path / "pid.json")))
        channel = SpawnChannel(agent, Config(), db, procs=journal)
        assert await channel.is_busy()
        batch = Batch(delivery_id="dlv-1", agent="alice", messages=(), attempt=1, lease_until=0)
        with pytest.raises(AgentBusy, match=f"pid {earlier.pid}"):
            await channel.deliver(batch, "hi")
        earlier.kill()
        earlier.wait(10)
        assert not await channel.is_busy()
        assert store.sync.list_procs() == []  # the dead predecessor's row is dropped
        # A turn of ours is journalled while it runs, with its pid and start time, then dropped.
        async with anyio.create_task_group() as tg:
            tg.start_soon(_deliver_ignoring_failure, channel, batch)
            pid_file = tmp_path / "pid.json"
            with anyio.fail_after(30):
                while not pid_file.exists():  # noqa: ASYNC110 - another process's progress
                    await anyio.sleep(0.01)
            (row,) = store.sync.list_procs()
            assert (row.agent, row.delivery_id, row.daemon_pid) == ("alice", "dlv-1", os.getpid())
            assert row.start_time == start_time(row.pid)
            await channel.aclose()
        assert store.sync.list_procs() == []
    finally:
        if earlier.poll() is None:
            earlier.kill()
            earlier.wait(10)
        await store.aclose()
    assert_sound(db)
