"""The first hour of running the daemon: a retried dead letter starts afresh, a removed agent's turn
is stopped at once, and a long busy spell is explained in `status` and the log.

Real `agentmaild serve` subprocesses and real stand-in agents; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentmaild.control.client import poke
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import FAST, DaemonProc, agent_cmd, daemon_factory
from tests.support.waiting import alive, wait_for


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups a test started through the daemon; SIGKILLed at the end, whatever happened."""
    started: list[int] = []
    yield started
    for pgid in started:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


# -- retry of a dead letter -------------------------------------------------------------------
def test_retried_dead_letter_starts_its_backoff_afresh_under_the_same_id(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "doomed.jsonl"
    store.add_agent(
        Agent(
            name="doomed",
            capability="builder",
            channel="spawn",
            command=agent_cmd("record_agent.py", str(rec), "--exit", "1"),
        )
    )
    d = daemons(
        {
            "AGENTMAILD_DAEMON_MAX_ATTEMPTS": "5",
            "AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "0.2",
            "AGENTMAILD_DAEMON_BACKOFF_MAX_S": "30",
        }
    )
    Mailer(store).send(sender="bob", to="doomed", subject="lost?", body="x")
    poke(d.sock, ["doomed"])
    [dead] = wait_for(lambda: store.dead_letters("doomed"), 20, "the first dead letter")
    first_round = [e["backoff_s"] for e in d.events("delivery.failed")]
    assert first_round == [0.2, 0.4, 0.8, 1.6]

    result = d.cli("retry", "--agent", "doomed", "--json")
    answered = time.time()  # after the CLI's cold start, which a loaded machine stretches
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["requeued"] == [dead.delivery_id]
    retried = wait_for(
        lambda: len(d.events("delivery.failed")) >= 6 and d.events("delivery.failed")[4:6],
        20,
        "two failed attempts after the retry",
    )
    # Before the fix the loop went on from failure 5: 6.4 s, then 12.8 s, ...
    assert [e["backoff_s"] for e in retried] == [0.2, 0.4]
    assert {e["delivery_id"] for e in retried} == {dead.delivery_id}
    assert _at(retried[0]) - answered < 3.0  # the first redelivery: at once
    # The first backoff plus a cold agent start: before the fix it was 6.4 s, so 4 s of slack for
    # a loaded machine still tell the two apart.
    assert _at(retried[1]) - _at(retried[0]) < 0.2 + 4.0
    [again] = wait_for(lambda: store.dead_letters("doomed"), 20, "the second dead letter")
    assert again.delivery_id == dead.delivery_id


def test_retry_cuts_short_the_backoff_of_the_agents_other_failing_batch(
    store: SqliteMailStore, tmp_path: Path, db: Path
) -> None:
    """The loop is backing off after another batch failed: the retried one still goes at once."""
    config = tmp_path / "agentmaild.toml"
    knobs = "max_attempts = 2\nbackoff_jitter = 0\nbackoff_max_s = 60\n"
    config.write_text(f"[daemon]\n{knobs}backoff_initial_s = 0.05\n")
    store.add_agent(
        Agent(
            name="doomed",
            capability="builder",
            channel="spawn",
            command=agent_cmd("record_agent.py", str(tmp_path / "doomed.jsonl"), "--exit", "1"),
        )
    )
    quick = {k: v for k, v in FAST.items() if "BACKOFF" not in k}  # the file sets them
    with daemon_factory(db, tmp_path, defaults=quick, text=True) as make:
        d = make({"AGENTMAILD_CONFIG": str(config)})
        mailer = Mailer(store)
        mailer.send(sender="bob", to="doomed", subject="first", body="x")
        poke(d.sock, ["doomed"])
        [dead] = wait_for(lambda: store.dead_letters("doomed"), 15, "the first dead letter")
        config.write_text(f"[daemon]\n{knobs}backoff_initial_s = 20\n")
        assert d.proc is not None
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: d.events("daemon.reloaded"), 20, "the reload")
        mailer.send(sender="bob", to="doomed", subject="second", body="x")
        poke(d.sock, ["doomed"])
        wait_for(
            lambda: [e for e in d.events("delivery.failed") if e["backoff_s"] == 20],
            20,
            "the second batch to fail and back off 20 s",
        )
        def attempts_of_the_dead_one() -> list[dict[str, Any]]:
            return [e for e in d.events("delivery.failed") if e["delivery_id"] == dead.delivery_id]

        before = len(attempts_of_the_dead_one())
        result = d.cli("retry", "--agent", "doomed", "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["requeued"] == [dead.delivery_id]
        wait_for(
            lambda: len(attempts_of_the_dead_one()) > before,
            20,
            "the retried batch's attempt, not 20 s of the other batch's backoff later",
        )


# -- removing an agent mid-turn ---------------------------------------------------------------
@pytest.mark.parametrize("channel", ["stdin", "spawn"])
def test_removing_an_agent_mid_turn_stops_its_process_and_gives_the_batch_back(
    channel: str,
    store: SqliteMailStore,
    tmp_path: Path,
    daemons: Callable[..., DaemonProc],
    groups: list[int],
) -> None:
    pid_file = tmp_path / "hang.pid"
    store.add_agent(
        Agent(
            name="hang",
            capability="builder",
            channel=channel,
            command=agent_cmd("hang_agent.py", str(pid_file), "--grandchild"),
        )
    )
    d = daemons({"AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "0.5"})  # stall timeouts stay 600 s
    mid = Mailer(store).send(sender="bob", to="hang", subject="long job", body="x").ids[0]
    poke(d.sock, ["hang"])
    wait_for(pid_file.exists, 15, "the agent to read its batch")
    pids = json.loads(pid_file.read_text())
    groups.append(pids["pid"])  # its own session: the pid is the group
    assert store.counts()["hang"].in_flight == 1

    result = d.cli("agents", "remove", "hang")
    assert result.returncode == 0, result.stderr
    wait_for(
        lambda: not alive(pids["pid"]) and not alive(pids["grandchild"]),
        20,
        "the removed agent's process group to be gone",
    )
    wait_for(lambda: d.events("delivery.abandoned"), 20, "the abandoned delivery's log line")
    [abandoned] = d.events("delivery.abandoned")
    assert abandoned["agent"] == "hang" and abandoned["reason"] == "agent removed"
    counts = store.counts()["hang"]
    assert counts.in_flight == 0 and counts.dead_letters == 0
    assert store.get_message(mid).read is False  # type: ignore[union-attr]
    assert not d.events("delivery.failed") and not d.events("delivery.dead")


# -- why an agent is busy ---------------------------------------------------------------------
def _table(text: str) -> dict[str, dict[str, str]]:
    """`status` text as {agent: {column: cell}}; REASON is the last column, spaces and all."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("AGENT"))
    header = lines[head]
    names = header.split("  ")
    names = [n.strip() for n in names if n.strip()]
    starts = [header.index(n) for n in names]
    rows = {}
    for line in lines[head + 1 :]:
        cells = [
            line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)], strict=True)
        ]
        rows[cells[0]] = dict(zip(names, cells, strict=True))
    return rows


def test_status_says_why_an_agent_is_busy_and_flags_a_long_turn_once(
    store: SqliteMailStore,
    tmp_path: Path,
    daemons: Callable[..., DaemonProc],
    groups: list[int],
) -> None:
    pid_file = tmp_path / "hang.pid"
    for name, command in (
        ("hang", agent_cmd("hang_agent.py", str(pid_file))),
        ("napper", agent_cmd("record_agent.py", str(tmp_path / "napper.jsonl"))),
    ):
        store.add_agent(Agent(name=name, capability="builder", channel="stdin", command=command))
    d = daemons({"AGENTMAILD_DAEMON_BUSY_WARN_AFTER_S": "0.5"})
    assert d.ctl("pause", {"agent": "napper"})["paused"] == ["napper"]
    Mailer(store).send(sender="bob", to="hang", subject="long job", body="x")
    poke(d.sock, ["hang"])
    wait_for(pid_file.exists, 15, "the agent to read its batch")
    groups.append(json.loads(pid_file.read_text())["pid"])

    row = wait_for(lambda: (r := d.status_row("hang"))["stuck"] and r, 20, "a stuck flag")
    assert row["busy_reason"] == "in turn" and row["busy_for_s"] >= 0.5
    assert d.status_row("napper")["busy_reason"] == "paused"
    [warned] = wait_for(lambda: d.events("delivery.busy_long"), 20, "the busy_long warning")
    assert warned["agent"] == "hang" and warned["reason"] == "in turn"
    assert warned["busy_for_s"] >= 0.5 and warned["delivery_id"] == row["in_flight_delivery"]

    human = d.cli("status")
    assert human.returncode == 0, human.stderr
    table = _table(human.stdout)
    assert re.fullmatch(r"stuck \d+s: in turn", table["hang"]["REASON"])
    assert table["napper"]["REASON"] == "paused"
    # Several supervisor ticks (0.2 s apart) later, still one warning for this one spell.
    wait_for(lambda: d.status_row("hang")["busy_for_s"] >= 2.5, 20, "a longer spell")
    assert len(d.events("delivery.busy_long")) == 1
