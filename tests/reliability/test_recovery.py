"""Claims that outlive their holder: the running daemon's periodic reap, and the next serve's
recovery of a SIGKILLed daemon's busy, parentless agent.

Both end in a redelivery under the original delivery id (``REDELIVERY (attempt 2)`` in the turn)
and a store that passes ``PRAGMA integrity_check`` with no orphan rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agentmaild.mail.mailer import OPERATOR, Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import (
    DaemonProc,
    add_spawn,
    agent_cmd,
    assert_sound,
    read_jsonl,
    wait_for,
)
from tests.reliability.history import check_history


def _store(db: Path) -> SqliteMailStore:
    db.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    return store


def test_running_daemon_reaps_an_expired_claim_and_redelivers_it_under_its_id(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    """A claim taken by another process, whose lease runs out while the daemon keeps running:
    no restart, so only the daemon's periodic reap can give the batch back."""
    ledger = tmp_path / "worker.jsonl"
    store = _store(db)
    add_spawn(store, "worker", agent_cmd("ledger_agent.py", str(ledger)))
    d = daemons({"AGENTMAILD_DAEMON_LEASE_S": "3"})
    try:
        assert d.ctl("pause", {"agent": "worker"})["paused"] == ["worker"]
        mid = Mailer(store).send(sender="bob", to="worker", subject="s", body="x").ids[0]
        batch = store.claim("worker", max_messages=10, max_chars=100_000, lease_s=1.0,
                            now=time.time())
        assert batch is not None and batch.message_ids == (mid,)
        d.ctl("resume", {"agent": "worker"})
        wait_for(lambda: [e for e in d.events("supervisor.reaped_expired")
                          if batch.delivery_id in e["deliveries"]], 30, "the periodic reap")
        wait_for(lambda: store.get_message(mid).read, 30, "the redelivery")  # type: ignore[union-attr]
        assert d.stop() == 0
    finally:
        store.close()
    [turn] = read_jsonl(ledger)
    assert (turn["uuid"], turn["message_ids"], turn["attempt"]) == (batch.delivery_id, [mid], 2)
    assert d.events("daemon.recovered")[-1]["requeued"] == 0  # not a restart's doing
    check_history(db, read_jsonl(ledger), [mid],
                  acked_events=d.events("delivery.acked")).assert_ok("after the reap")
    assert_sound(db)


def _hook_busy(d: DaemonProc, agent: str, delivery_id: str) -> None:
    """The turn's UserPromptSubmit hook, as a spawned Claude runs it: the agent is busy."""
    env = {**d.env, "AGENTMAIL_DELIVERY": delivery_id}
    done = subprocess.run(
        [sys.executable, "-m", "agentmaild", "hook", "user-prompt-submit", "--agent", agent,
         "--db", str(d.db)],
        input=json.dumps({"prompt": "a turn", "session_id": "s-1"}).encode(),
        env=env, capture_output=True, timeout=30, check=False,
    )
    assert done.returncode == 0, done.stderr


def test_restart_resets_a_busy_parentless_spawn_agent_and_mails_the_operator(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    """SIGKILL mid-turn of a spawn agent with no parent: the next serve resets its turn state,
    mails ``operator`` the interrupted report, and redelivers under the same delivery id.

    Only daemon-owned (spawn, stdin) agents are reset; the spawn channel never consults
    ``turn_state``, so a missed reset shows as a stale ``busy`` (and a report without it)."""
    rec, gate = tmp_path / "lone.jsonl", tmp_path / "gate"
    store = _store(db)
    add_spawn(store, "lone", agent_cmd("gated_agent.py", str(rec), str(gate)))  # no parent
    # An interactive session's hook said busy: no daemon owned that turn, so it stays busy.
    store.add_agent(Agent(name="desk", capability="lead", parent="bob"))
    store.update_agent("desk", {"turn_state": "busy"})
    try:
        first = daemons()
        mid = Mailer(store).send(sender="bob", to="lone", subject="s", body="x").ids[0]
        [started] = wait_for(lambda: read_jsonl(rec), 30, "the turn to start")
        dlv = started["uuid"]
        _hook_busy(first, "lone", dlv)
        assert store.get_agent("lone").turn_state == "busy"  # type: ignore[union-attr]
        first.kill()
        os.kill(started["pid"], signal.SIGKILL)  # the turn died with the daemon's machine, say
        gate.touch()
        second = daemons()
        wait_for(lambda: store.get_message(mid).read, 30, "the redelivery")  # type: ignore[union-attr]
        assert store.get_agent("lone").turn_state is None  # type: ignore[union-attr]
        assert store.get_agent("desk").turn_state == "busy"  # type: ignore[union-attr]
        recovered = second.events("daemon.recovered")[-1]  # the log is shared: the last
        assert (recovered["requeued"], recovered["reset_busy"]) == (1, 1)
        [report] = [m for m in store.inbox(OPERATOR) if m.from_agent == "agentmaild"]
        assert f"- lone: delivery {dlv} re-queued" in report.body
        assert "- lone: turn state was busy; reset" in report.body
        assert "desk" not in report.body
        assert report.subject == "agentmaild restarted: 1 agent(s) were interrupted"
        assert [m for m in store.inbox("bob") if m.from_agent == "agentmaild"] == []
        assert second.stop() == 0
    finally:
        store.close()
    runs = [r for r in read_jsonl(rec) if r["phase"] == "started"]
    assert [r["uuid"] for r in runs] == [dlv, dlv]
    assert "REDELIVERY (attempt 2)" in runs[-1]["text"]
    assert_sound(db)
