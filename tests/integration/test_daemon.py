"""End to end: `agentmaild serve` as a real subprocess, scripted agents as real child processes.

Every wait is on something observable (a file, the store, the socket) under a deadline.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmaild.control.client import poke
from agentmaild.mail.mailer import Mailer
from agentmaild.models import PRIORITY_RANK, Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc, agent_cmd, raw_exchange
from tests.support.net import daemon_answers
from tests.support.store_targets import StoreTarget, cli, ok
from tests.support.waiting import read_jsonl as records
from tests.support.waiting import wait_for

MSG_RE = re.compile(r"--- message \d+/\d+: (msg-[a-z0-9]+) ---")
def add_spawn(store: SqliteMailStore, name: str, command: tuple[str, ...], **kw: Any) -> None:
    store.add_agent(Agent(name=name, capability="builder", channel="spawn", command=command, **kw))


def unread(store: SqliteMailStore, agent: str) -> int:
    return len(store.inbox(agent, unread_only=True))


def test_200_messages_to_5_agents_delivered_in_priority_order(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    mailer = Mailer(store)
    rng = random.Random(7)
    names = [f"worker-{i}" for i in range(5)]
    sent: dict[str, list[Any]] = {n: [] for n in names}
    for n in names:
        add_spawn(store, n, agent_cmd("record_agent.py", str(tmp_path / f"{n}.jsonl")))
    for i in range(200):
        to = names[i % 5]
        priority = rng.choice(list(PRIORITY_RANK))
        m = mailer.send(
            sender="bob", to=to, subject=f"m{i}", body=f"body {i}", priority=priority
        ).messages[0]
        sent[to].append(m)
    d = daemons()
    wait_for(lambda: store.totals()["unread"] == 0, 60, "all 200 messages acked")
    for n in names:
        seen = [mid for r in records(tmp_path / f"{n}.jsonl") for mid in MSG_RE.findall(r["text"])]
        expected = sorted(sent[n], key=lambda m: (PRIORITY_RANK[m.priority], m.created_at, m.id))
        assert seen == [m.id for m in expected]  # each exactly once, urgent → low
    assert d.ctl("status")["totals"]["unread"] == 0
    assert sum(r["delivered_total"] for r in d.ctl("status")["agents"] if r["loop"]) >= 10


def test_fail_twice_then_succeed_shows_retries_and_backoff(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    counter = tmp_path / "flaky.count"
    add_spawn(store, "flaky", agent_cmd("flaky_agent.py", str(counter), "2"))
    d = daemons(
        {"AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "0.4", "AGENTMAILD_DAEMON_BACKOFF_MAX_S": "2"}
    )
    mid = Mailer(store).send(sender="bob", to="flaky", subject="hi", body="x").ids[0]
    poke(d.sock, ["flaky"])
    row = wait_for(lambda: (r := d.status_row("flaky"))["backoff_s"] > 0 and r, 20, "backoff")
    assert row["failures"] >= 1 and row["last_delivery"]["result"] == "failed"
    wait_for(lambda: store.get_message(mid).read, 15, "the third attempt to ack")  # type: ignore[union-attr]
    runs = records(Path(str(counter) + ".log"))
    assert [r["run"] for r in runs] == [1, 2, 3]
    assert len({r["uuid"] for r in runs}) == 1  # one delivery id across the retries
    result = d.cli("status", "--json")
    assert result.returncode == 0, result.stderr
    [flaky] = [r for r in json.loads(result.stdout)["agents"] if r["agent"] == "flaky"]
    assert flaky["failed_total"] == 2 and flaky["delivered_total"] == 1
    assert flaky["failures"] == 0 and flaky["unread"] == 0
    assert [e["attempt"] for e in d.events("delivery.failed")] == [1, 2]
    assert [e["attempt"] for e in d.events("delivery.acked")] == [3]


def test_always_failing_agent_dead_letters_ndr_and_retry(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "dead.jsonl"
    add_spawn(store, "doomed", agent_cmd("record_agent.py", str(rec), "--exit", "1"))
    d = daemons({"AGENTMAILD_DAEMON_MAX_ATTEMPTS": "3"})
    mid = Mailer(store).send(sender="bob", to="doomed", subject="lost?", body="x").ids[0]
    poke(d.sock, ["doomed"])
    [dead] = wait_for(lambda: store.dead_letters("doomed"), 15, "a dead letter")
    assert dead.message_ids == (mid,) and dead.attempts == 3
    assert len({r["uuid"] for r in records(rec)}) == 1
    ndr = wait_for(lambda: store.inbox("bob", unread_only=True), 20, "the NDR")
    assert ndr[0].type == "error" and mid in ndr[0].body
    assert d.status_row("doomed")["dead_letters"] == 1
    human = d.cli("status")
    assert "doomed" in human.stdout and human.returncode == 0
    store.update_agent("doomed", {"command": list(agent_cmd("record_agent.py", str(rec)))})
    result = d.cli("retry", "--agent", "doomed", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["requeued"] == [dead.delivery_id]
    wait_for(lambda: store.get_message(mid).read, 15, "the retried delivery")  # type: ignore[union-attr]
    assert {r["uuid"] for r in records(rec)} == {dead.delivery_id}


def test_sigkill_mid_delivery_then_restart_loses_nothing(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec, gate = tmp_path / "kill.jsonl", tmp_path / "gate"
    add_spawn(store, "victim", agent_cmd("gated_agent.py", str(rec), str(gate)), parent="bob")
    mailer = Mailer(store)
    ids = [
        mailer.send(sender="bob", to="victim", subject=f"s{i}", body="x").ids[0] for i in range(3)
    ]
    first = daemons()
    [started] = wait_for(lambda: records(rec), 15, "the first turn to start")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    os.kill(started["pid"], signal.SIGKILL)  # the turn died with the daemon's machine, say
    assert all(not store.get_message(i).read for i in ids)  # type: ignore[union-attr]
    gate.touch()
    second = daemons()
    wait_for(lambda: all(store.get_message(i).read for i in ids), 15, "redelivery")  # type: ignore[union-attr]
    runs = [r for r in records(rec) if r["phase"] == "started"]
    assert {r["uuid"] for r in runs} == {started["uuid"]}  # every repeat: the first delivery id
    assert "REDELIVERY" in runs[-1]["text"]
    interrupted = [m for m in store.inbox("bob") if m.from_agent == "agentmaild"]
    assert len(interrupted) == 1 and "victim" in interrupted[0].body
    assert second.events("daemon.recovered")[-1]["requeued"] == 1  # the log is shared: the last


def test_garbage_on_the_socket_gets_errors_and_daemon_keeps_serving(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = daemons()
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(str(d.sock))
    slow.sendall(b'{"v": 1, "cmd"')  # ...and never finishes the line
    try:
        reply = json.loads(raw_exchange(d.sock, b"not json at all\n"))
        assert reply["ok"] is False and reply["error"]["code"] == "protocol"
        huge = raw_exchange(d.sock, b"x" * (10 * 1024 * 1024) + b"\n")
        assert huge == b"" or json.loads(huge)["error"]["code"] == "protocol"
        reply = json.loads(raw_exchange(d.sock, b'{"v": 1, "cmd": "frobnicate", "args": {}}\n'))
        assert reply["error"]["code"] == "unknown_command"
        bad_arg = b'{"v": 1, "cmd": "pause", "args": {"agent": 5}}\n'
        reply = json.loads(raw_exchange(d.sock, bad_arg))
        assert reply["error"]["code"] == "invalid"
        assert d.ctl("ping")["pong"] is True  # served while the slow client still hangs on
        slow.settimeout(10)
        assert slow.recv(1024) == b""  # the slow client is cut off at the read deadline
    finally:
        slow.close()
    assert d.ctl("ping")["pid"] == d.proc.pid  # type: ignore[union-attr]


def test_sigterm_drains_in_flight_delivery_and_exits_0(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec, gate = tmp_path / "drain.jsonl", tmp_path / "gate"
    add_spawn(store, "slow", agent_cmd("gated_agent.py", str(rec), str(gate)))
    d = daemons()
    mid = Mailer(store).send(sender="bob", to="slow", subject="s", body="x").ids[0]
    poke(d.sock, ["slow"])
    wait_for(lambda: records(rec), 15, "the turn to start")
    assert d.proc is not None
    d.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: d.events("daemon.stopping"), 20, "the daemon to start draining")
    assert d.proc.poll() is None  # still waiting for the turn in flight
    gate.touch()
    assert d.proc.wait(20) == 0
    assert store.get_message(mid).read  # type: ignore[union-attr]
    assert not d.sock.exists()


def test_agent_added_while_running_is_picked_up_after_a_poke(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons({"AGENTMAILD_DAEMON_POLL_INTERVAL_S": "600"})  # only the poke can find it
    rec = tmp_path / "late.jsonl"
    add_spawn(store, "late", agent_cmd("record_agent.py", str(rec)))
    mid = Mailer(store).send(sender="bob", to="late", subject="welcome", body="x").ids[0]
    assert poke(d.sock, ["late"])
    wait_for(lambda: store.get_message(mid).read, 20, "delivery to the new agent")  # type: ignore[union-attr]
    store.remove_agent("late")
    poke(d.sock)  # what `agentmaild agents remove` does
    wait_for(lambda: "late" not in {a["name"] for a in d.ctl("agents")["agents"]}, 20, "removal")


def test_second_sigterm_forces_and_releases(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec, gate = tmp_path / "force.jsonl", tmp_path / "never"
    add_spawn(store, "stuck", agent_cmd("gated_agent.py", str(rec), str(gate)))
    d = daemons()
    mid = Mailer(store).send(sender="bob", to="stuck", subject="s", body="x").ids[0]
    poke(d.sock, ["stuck"])
    [started] = wait_for(lambda: records(rec), 15, "the turn to start")
    assert d.proc is not None
    d.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: d.events("daemon.stopping"), 20, "draining")
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(15) == 1
    assert not store.get_message(mid).read  # type: ignore[union-attr]
    assert store.counts()["stuck"].in_flight == 0  # released, not left claimed
    with pytest.raises(ProcessLookupError):  # the turn did not outlive the daemon
        wait_for(lambda: os.kill(started["pid"], 0), 20, "the child to be reaped")


def test_status_without_daemon_shows_store_counts(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    add_spawn(store, "idle", agent_cmd("record_agent.py", str(tmp_path / "x.jsonl")))
    Mailer(store).send(sender="bob", to="idle", subject="s", body="x")
    d = daemons(start=False)
    human = d.cli("status")
    assert human.returncode == 0, human.stderr
    assert "daemon: not running" in human.stdout and "idle" in human.stdout
    data = json.loads(d.cli("status", "--json").stdout)
    assert data["running"] is False and data["daemon"] is None
    assert {r["agent"]: r["unread"] for r in data["agents"]}["idle"] == 1


def test_pause_resume_drain_and_metrics(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "p.jsonl"
    add_spawn(store, "pausy", agent_cmd("record_agent.py", str(rec)))
    d = daemons()
    wait_for(lambda: d.status_row("pausy")["loop"] is not None, 20, "the agent's loop")
    assert d.ctl("pause", {"agent": "pausy"}) == {"paused": ["pausy"]}
    mid = Mailer(store).send(sender="bob", to="pausy", subject="s", body="x").ids[0]
    poke(d.sock, ["pausy"])
    wait_for(lambda: d.status_row("pausy")["loop"] == "paused", 20, "the loop to park")
    assert not store.get_message(mid).read  # type: ignore[union-attr]
    d.ctl("resume", {"agent": "pausy"})
    wait_for(lambda: store.get_message(mid).read, 20, "delivery after resume")  # type: ignore[union-attr]
    assert d.ctl("drain", {"timeout_s": 1}) == {"drained": True, "in_flight": []}
    metrics = d.cli("ctl", "metrics")
    assert metrics.returncode == 0, metrics.stderr
    assert 'agentmaild_delivered_total{agent="pausy"} 1' in metrics.stdout
    assert "agentmaild_uptime_seconds" in metrics.stdout
    bad = d.cli("ctl", "pause", "agent=nobody", "--json")
    assert json.loads(bad.stdout)["error"]["code"] == "not_found"
    assert d.ctl("shutdown")["stopping"] is True
    assert d.proc is not None and d.proc.wait(15) == 0


def test_resume_without_an_agent_undoes_a_drain(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "d.jsonl"
    add_spawn(store, "drained", agent_cmd("record_agent.py", str(rec)))
    d = daemons()
    wait_for(lambda: d.status_row("drained")["loop"] is not None, 20, "the agent's loop")
    assert d.ctl("drain", {"timeout_s": 1}) == {"drained": True, "in_flight": []}
    mid = Mailer(store).send(sender="bob", to="drained", subject="s", body="x").ids[0]
    poke(d.sock, ["drained"])
    wait_for(lambda: d.status_row("drained")["loop"] == "paused", 20, "the drained loop to park")
    assert not store.get_message(mid).read  # type: ignore[union-attr]
    assert d.ctl("resume") == {"resumed": ["drained"]}
    wait_for(lambda: store.get_message(mid).read, 20, "delivery after resume")  # type: ignore[union-attr]


def _holder(target: StoreTarget, pid: int) -> str:
    # The product names the holder differently: a file's lock file holds the pid; a server's
    # advisory lock is named by its holder's connection (host and pid).
    return f"pid={pid}" if target.kind == "postgres" else f"(pid {pid})"


@pytest.mark.timeout(120)
def test_a_daemon_on_a_store_target_delivers_and_refuses_a_second(
    tmp_path: Path, store_target: StoreTarget
) -> None:
    env = store_target.env
    inbox, seen_db = tmp_path / "inbox.jsonl", tmp_path / "agent-db.txt"
    script = f'cat >> "{inbox}"; printf %s "$AGENTMAIL_DB" > "{seen_db}"'
    ok(env, "agents", "add", "demo", "--capability", "builder", "--channel", "spawn",
       "--command", f"sh -c '{script}'")  # fmt: skip
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: daemon.poll() is not None or daemon_answers(store_target.socket), 30,
                 "the daemon's socket")  # fmt: skip
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]

        second = cli(env, "serve")
        assert second.returncode == 1 and len(second.stderr.splitlines()) == 1
        shown = store_target.location.shown
        assert second.stderr.startswith(f"error: agentmaild is already running for {shown}")
        assert _holder(store_target, daemon.pid) in second.stderr
        assert daemon_answers(store_target.socket)  # the refused second left the first serving

        ids = [ok(env, "send", "--to", "demo", "--subject", f"s{i}", "--body", "b")["ids"][0]
               for i in range(3)]  # fmt: skip
        wait_for(lambda: inbox.exists() and all(i in inbox.read_text() for i in ids), 60,
                 "the agent to receive all three messages")  # fmt: skip
        store = store_target.open()
        wait_for(lambda: store.totals()["unread"] == 0, 30, "the deliveries to be acked")
        assert all((m.acked_by or "").startswith("dlv-") for m in store.list_messages())
        store.close()
        assert seen_db.read_text() == store_target.target  # the agent's CLI reaches this store

        status = ok(env, "status")
        assert status["running"] is True and status["store"] == shown
        assert [(a["agent"], a["unread"]) for a in status["agents"]] == [("demo", 0)]
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(30)
        log.close()
    assert code == 0
    assert not (tmp_path / "mail.db").exists()  # nothing was written where it was not named
