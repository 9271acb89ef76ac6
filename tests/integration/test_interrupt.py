"""Interrupts end to end: `agentmaild serve` as a real subprocess, a spawn agent as a real process
group, the real CLI asking. Waits are on records, the store and the socket, under deadlines."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.procs.groups import group_alive
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.browser import dashboard_url
from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.http_api import base_url, http_env
from tests.support.net import daemon_answers
from tests.support.store_targets import StoreTarget, ok
from tests.support.waiting import alive, wait_for
from tests.support.waiting import read_jsonl as records


def team(store: SqliteMailStore, rec: Path) -> None:
    """boss (the worker's parent), sib (its sibling), lead (a lead), worker (spawn, a session)."""
    store.add_agent(Agent(name="boss", capability="coordinator", channel="pull"))
    store.add_agent(Agent(name="sib", capability="builder", channel="pull", parent="boss"))
    store.add_agent(Agent(name="lead", capability="lead", channel="pull"))
    command = agent_cmd("long_turn_agent.py", str(rec), "{session_id}")
    store.add_agent(Agent(name="worker", capability="builder", channel="spawn", parent="boss",
                          command=command, session_id="sess-7"))  # fmt: skip


def interrupt(d: DaemonProc, *args: str) -> tuple[int, dict[str, Any]]:
    done = d.cli("interrupt", *args, "--json", timeout=60)
    return done.returncode, json.loads(done.stdout)


def long_turn(
    store: SqliteMailStore, rec: Path, body: str = "LONG task"
) -> tuple[str, dict[str, Any]]:
    mid = Mailer(store).send(sender="boss", to="worker", subject="work", body=body).ids[0]
    first = wait_for(lambda: records(rec), 20, "the long turn to start")[0]
    assert mid in first["text"]
    return mid, first


def test_spawn_interrupt_stops_the_turn_and_the_next_turn_opens_with_it(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "turns.jsonl"
    team(store, rec)
    d = daemons({"AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "2"})
    mid, first = long_turn(store, rec)
    dlv = wait_for(lambda: d.status_row("worker")["in_flight_delivery"], 10, "the delivery id")
    asked = time.monotonic()
    code, answer = interrupt(d, "worker", "--from", "boss", "--reason", "wrong branch")
    stopped_s = time.monotonic() - asked
    assert code == 0 and answer["interrupted"] is True, answer
    assert answer["delivery_id"] == dlv and answer["attached"] is True
    assert stopped_s < 10  # the turn would have run 300 s
    second = wait_for(lambda: records(rec)[1:], 20, "the next turn")[0]
    text = second["text"]
    # The interrupt's mail first, then the interrupted batch, redelivered under its id.
    assert answer["id"] in text and mid in text
    assert text.index(answer["id"]) < text.index(mid)
    assert f"REDELIVERY (attempt 2) of delivery {dlv}" in text
    assert "wrong branch" in text
    assert second["session"] == first["session"] == "sess-7"  # same session, resumed
    # Nothing of the interrupted turn is left: leader, grandchild, group.
    assert not alive(first["pid"]) and not alive(first["helper"])
    assert not group_alive(first["pgid"])
    wait_for(lambda: store.get_message(mid).read and store.get_message(answer["id"]).read,  # type: ignore[union-attr]
             15, "both acked once the next turn ended")  # fmt: skip
    history = store.list_attempts(agent="worker", limit=10)
    outcomes = [(a.delivery_id, a.attempt, a.outcome) for a in reversed(history)]
    assert outcomes == [(dlv, 1, "interrupted"), (dlv, 2, "acked")]
    assert history[-1].error == f"interrupted by boss: wrong branch (mail {answer['id']})"
    shown = json.loads(d.cli("deliveries", "--agent", "worker", "--json").stdout)
    assert shown["attempts"][-1]["outcome"] == "interrupted"
    assert len(records(rec)) == 2  # the batch reached the agent twice: never lost, never more


def test_status_says_interrupting_while_a_stubborn_turn_is_stopped(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "turns.jsonl"
    team(store, rec)
    d = daemons({"AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "3"})
    _, first = long_turn(store, rec, "LONG and STUBBORN")  # ignores SIGINT: TERM after 3 s
    answers: list[tuple[int, dict[str, Any]]] = []
    asking = threading.Thread(
        target=lambda: answers.append(interrupt(d, "worker", "--from", "lead"))
    )
    asking.start()
    row = wait_for(lambda: (r := d.status_row("worker"))["loop"] == "interrupting" and r, 10,
                   "status to say interrupting")  # fmt: skip
    assert row["busy"] is True
    asking.join(30)
    assert answers and answers[0][0] == 0 and answers[0][1]["interrupted"] is True
    assert not alive(first["pid"]) and not group_alive(first["pgid"])
    wait_for(lambda: len(records(rec)) == 2, 20, "the next turn")
    wait_for(lambda: d.status_row("worker")["loop"] != "interrupting", 10, "status to move on")


def test_a_sibling_is_refused_and_the_turn_runs_on(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "turns.jsonl"
    team(store, rec)
    d = daemons()
    _, first = long_turn(store, rec)
    code, answer = interrupt(d, "worker", "--from", "sib", "--reason", "mine now")
    assert code == 1 and answer["error"]["code"] == "interrupt_refused"
    assert "sib may not interrupt worker" in answer["error"]["message"]
    assert store.list_messages(from_agent="sib", type="interrupt") == []
    human = d.cli("interrupt", "worker", "--from", "sib")
    assert human.returncode == 1 and human.stderr.count("\n") == 1  # one line, no traceback
    assert alive(first["pid"]) and d.status_row("worker")["loop"] == "delivering"
    code, answer = interrupt(d, "worker", "--from", "boss")  # the parent may: clean up
    assert code == 0 and answer["interrupted"] is True
    code, again = interrupt(d, "worker", "--from", "boss")  # the same again: collapsed
    assert code == 0 and again["duplicate"] is True and again["interrupted"] is False
    assert again["id"] == answer["id"]


def test_an_interrupt_loop_between_two_leads_is_stopped(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    store.add_agent(Agent(name="lead-a", capability="lead", channel="pull"))
    store.add_agent(Agent(name="lead-b", capability="lead", channel="pull"))
    d = daemons({"AGENTMAILD_LIMITS_INTERRUPT_MAX": "3"})  # its team rules are the store's
    pairs = [("lead-a", "lead-b"), ("lead-b", "lead-a")] * 3
    codes = []
    for i, (who, whom) in enumerate(pairs):
        done = d.cli("send", "--interrupt", "--from", who, "--to", whom, "-s", f"stop {i}",
                     "--json")  # fmt: skip
        codes.append((done.returncode, json.loads(done.stdout).get("error", {}).get("code")))
    assert codes[:3] == [(0, None)] * 3
    assert codes[3:] == [(1, "loop_held")] * 3
    assert len(store.list_messages(type="interrupt")) == 3
    told = store.list_messages(to_agent="operator", type="escalation")
    assert len(told) == 1 and "lead-a and lead-b" in told[0].subject
    # The operator is never held.
    done = d.cli("interrupt", "lead-b", "--from", "operator", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["interrupted"] is False


def test_bad_input_is_one_line(store: SqliteMailStore, daemons: Callable[..., DaemonProc]) -> None:
    d = daemons()
    for args in (("nobody",), ("Bad Name!",)):
        done = d.cli("interrupt", *args, "--json")
        assert done.returncode != 0 and json.loads(done.stdout)["error"]["code"]
    for extra in (("--anycast",), ("--type", "question")):
        done = d.cli("send", "--interrupt", "--to", "@all", "-s", "x", *extra)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.startswith("error: send --interrupt takes one agent")
    assert store.list_messages(type="interrupt") == []


def test_a_daemon_killed_mid_interrupt_redelivers_once_after_restart(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "turns.jsonl"
    team(store, rec)
    slow = {"AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "20"}  # the stop is still under way
    d = daemons(slow)
    mid, first = long_turn(store, rec, "LONG and STUBBORN")
    dlv = wait_for(lambda: d.status_row("worker")["in_flight_delivery"], 10, "the delivery id")
    asking = threading.Thread(target=lambda: interrupt(d, "worker", "--from", "boss", "-r", "halt"))
    asking.start()
    wait_for(lambda: d.status_row("worker")["loop"] == "interrupting", 10, "interrupting")
    d.kill()  # SIGKILL: no settle, no release, no history row
    asking.join(70)
    [note] = store.list_messages(from_agent="boss", type="interrupt")
    assert store.get_message(note.id).delivery_id == dlv  # type: ignore[union-attr]
    again = daemons(slow)  # recovery stops the old turn's group, re-queues its claim
    second = wait_for(lambda: records(rec)[1:], 30, "the redelivery after the restart")[0]
    assert not alive(first["pid"]) and not group_alive(first["pgid"])
    text = second["text"]
    assert text.index(note.id) < text.index(mid) and f"of delivery {dlv}" in text
    wait_for(lambda: store.get_message(mid).read and store.get_message(note.id).read,  # type: ignore[union-attr]
             15, "the redelivery acked")  # fmt: skip
    wait_for(lambda: again.status_row("worker")["loop"] == "idle", 10, "the loop idle")
    assert len(records(rec)) == 2  # redelivered once, nothing lost
    assert [a.outcome for a in store.list_attempts(agent="worker")] == ["acked"]


def test_the_dashboard_timeline_shows_who_interrupted_and_why(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "turns.jsonl"
    team(store, rec)
    d = daemons(http_env())
    long_turn(store, rec)
    code, answer = interrupt(d, "worker", "--from", "lead", "--reason", "rebase first")
    assert code == 0 and answer["interrupted"] is True
    with httpx.Client(base_url=base_url(d), timeout=20) as client:
        assert client.get(dashboard_url(d), follow_redirects=False).status_code == 303  # a session
        page = client.get("/timeline", params={"agent": "worker"})
    assert page.status_code == 200
    assert '<span class="outcome interrupted">interrupted</span>' in page.text
    assert f"interrupted by lead: rebase first (mail {answer['id']})" in page.text


def test_an_interrupt_on_each_store_kind(tmp_path: Path, store_target: StoreTarget) -> None:
    """The same front door over a PostgreSQL store: the daemon found by the DSN's socket."""
    env, rec = store_target.env, tmp_path / "turns.jsonl"
    ok(env, "agents", "add", "boss", "--capability", "coordinator")
    ok(env, "agents", "add", "worker", "--capability", "builder", "--channel", "spawn",
       "--parent", "boss", "--command", " ".join(agent_cmd("long_turn_agent.py", str(rec))))
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: daemon_answers(store_target.socket), 30, "the daemon's socket")
        first = ok(env, "send", "--from", "boss", "--to", "worker", "-s", "w", "-b", "LONG")
        wait_for(lambda: records(rec), 30, "the long turn")
        answer = ok(env, "interrupt", "worker", "--from", "boss", "-r", "halt")
        assert answer["interrupted"] is True and answer["attached"] is True, answer
        nxt = wait_for(lambda: records(rec)[1:], 30, "the next turn")[0]["text"]
        assert nxt.index(answer["id"]) < nxt.index(first["ids"][0]) and "REDELIVERY" in nxt
        store = store_target.open()
        try:
            wait_for(lambda: store.totals()["unread"] == 0, 30, "both acked")
            outcomes = [a.outcome for a in reversed(store.list_attempts(agent="worker"))]
            assert outcomes == ["interrupted", "acked"]
        finally:
            store.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
        log.close()
