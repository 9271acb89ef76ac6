"""Crash recovery at start (daemon/recovery.py), in-process over both stores.

Written against the survivors of ``make mutate``: every claim is re-queued whatever its lease,
only owned channels' busy turn states are reset, each interrupted agent's parent (else the
operator) gets one report naming what happened, a dead process's journal row is dropped, and a
stray of this store that ignores SIGTERM is killed once the grace is over.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from agentmaild.daemon.recovery import recover
from agentmaild.ids import iso_now, new_id
from agentmaild.mail.mailer import DAEMON_SENDER, OPERATOR
from agentmaild.models import Agent, Message
from agentmaild.procs.escapes import SCOPE_ENV
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.base import MailStore
from agentmaild.store.records import AgentProc, InsertRequest

T0 = 1_700_000_000.0


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    """Each of the three stores (conftest ``any_store``: SQLite, memory, PostgreSQL)."""
    s = any_store
    s.add_agent(Agent(name="lead", capability="lead"))
    return s


def register(store: MailStore, name: str, channel: str, *, parent: str | None = None,
             busy: bool = False) -> None:
    store.add_agent(Agent(name=name, capability="builder", channel=channel, parent=parent))
    if busy:
        store.update_agent(name, {"turn_state": "busy"})


def mail_to(store: MailStore, to: str) -> None:
    msg = Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject="s", body="b",
                  type="status", priority="normal", created_at=iso_now(T0))
    store.insert(InsertRequest(messages=(msg,), now=T0))


def claim(store: MailStore, agent: str, *, lease_s: float = 1e9) -> str:
    batch = store.claim(agent, max_messages=10, max_chars=10_000, lease_s=lease_s, now=T0)
    assert batch is not None
    return batch.delivery_id


def reports(store: MailStore, to: str) -> list[Message]:
    return [m for m in store.inbox(to) if m.from_agent == DAEMON_SENDER]


async def test_every_claim_is_requeued_and_its_agent_parent_told(store: MailStore) -> None:
    register(store, "alice", "spawn", parent="lead")
    register(store, "dave", "stdin")  # no parent: the operator hears of it
    mail_to(store, "alice")
    mail_to(store, "dave")
    live = claim(store, "alice")  # a lease far in the future still belonged to the dead daemon
    other = claim(store, "dave")
    before = iso_now()
    with capture_logs() as logs:
        result = await recover(AsyncMailStore(store))
    after = iso_now()
    assert sorted(result["requeued"]) == sorted([(live, "alice"), (other, "dave")])
    assert result["reset"] == []
    assert {"alice", "dave"} <= store.pending_agents()
    assert store.counts()["alice"].in_flight == 0 and store.counts()["dave"].in_flight == 0
    [to_lead] = reports(store, "lead")
    assert to_lead.subject == "agentmaild restarted: 1 agent(s) were interrupted"
    assert f"- alice: delivery {live} re-queued" in to_lead.body.splitlines()
    assert "dave" not in to_lead.body
    assert to_lead.type == "status" and to_lead.priority == "high"
    assert to_lead.to_agent == "lead"
    assert [(n["message_id"], n["reason"]) for n in store.take_nudges("lead")] == [
        (to_lead.id, "high status")
    ]
    assert to_lead.id.startswith("msg")
    assert before <= to_lead.created_at <= after  # stamped now, on the clock recovery read
    [to_operator] = reports(store, OPERATOR)
    assert f"- dave: delivery {other} re-queued" in to_operator.body.splitlines()
    assert to_operator.body.startswith("The previous agentmaild stopped without shutting down")
    assert to_operator.body.splitlines()[-1] == (
        "Re-queued batches are redelivered with their original delivery ids."
    )
    [line] = [e for e in logs if e["event"] == "daemon.recovered"]
    assert line["requeued"] == 2 and line["reset_busy"] == 0
    assert line["interrupted"] == ["alice", "dave"]


async def test_only_owned_channels_busy_turns_are_reset(store: MailStore) -> None:
    register(store, "alice", "spawn", parent="lead", busy=True)
    register(store, "sam", "stdin", parent="lead", busy=True)
    register(store, "tim", "tmux", parent="lead", busy=True)  # its pane outlives the daemon
    register(store, "idle", "spawn", parent="lead")
    with capture_logs() as logs:
        result = await recover(AsyncMailStore(store))
    assert sorted(result["reset"]) == ["alice", "sam"]
    assert result["requeued"] == []
    for name, state in (("alice", None), ("sam", None), ("tim", "busy"), ("idle", None)):
        agent = store.get_agent(name)
        assert agent is not None and agent.turn_state == state, name
    [report] = reports(store, "lead")
    assert report.subject == "agentmaild restarted: 2 agent(s) were interrupted"
    lines = report.body.splitlines()
    assert "- alice: turn state was busy; reset" in lines
    assert "- sam: turn state was busy; reset" in lines
    assert "tim" not in report.body and "idle" not in report.body
    [line] = [e for e in logs if e["event"] == "daemon.recovered"]
    assert line["reset_busy"] == 2 and line["requeued"] == 0


async def test_one_agent_with_two_things_counts_once(store: MailStore) -> None:
    register(store, "alice", "spawn", parent="lead", busy=True)
    mail_to(store, "alice")
    delivery = claim(store, "alice")
    await recover(AsyncMailStore(store))
    [report] = reports(store, "lead")
    assert report.subject == "agentmaild restarted: 1 agent(s) were interrupted"
    lines = report.body.splitlines()
    assert lines.index(f"- alice: delivery {delivery} re-queued") < lines.index(
        "- alice: turn state was busy; reset"
    )


async def test_nothing_interrupted_sends_nothing(store: MailStore) -> None:
    register(store, "alice", "spawn", parent="lead")
    result = await recover(AsyncMailStore(store))
    assert result == {"requeued": [], "reset": []}
    assert reports(store, "lead") == [] and reports(store, OPERATOR) == []


async def test_a_dead_processes_journal_row_is_forgotten(store: MailStore) -> None:
    register(store, "alice", "spawn")
    done = await anyio.run_process([sys.executable, "-c", "import os; print(os.getpid())"])
    pid = int(done.stdout)  # exited: neither it nor its group runs any more
    store.record_proc(AgentProc(pid=pid, start_time="1", pgid=pid, agent="alice",
                                delivery_id=None, daemon_pid=1, started_at=T0))
    await recover(AsyncMailStore(store))
    assert store.list_procs() == []


async def test_a_stray_of_this_store_that_ignores_sigterm_is_killed_after_the_grace(
    store: MailStore, tmp_path: Path
) -> None:
    # Not journalled: found by the scope marker and this store's path in its environment.
    db = tmp_path / "mail.db"
    env = {**os.environ, SCOPE_ENV: "agentmaild-test", "AGENTMAIL_DB": str(db),
           "AGENTMAIL_AGENT": "alice"}
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")
    async with await anyio.open_process([sys.executable, "-c", code], env=env) as child:
        assert child.stdout is not None
        assert (await child.stdout.receive()).startswith(b"ready")
        with capture_logs() as logs, anyio.fail_after(10):
            await recover(AsyncMailStore(store), str(db), kill_grace_s=0.2)
            assert await child.wait() == -signal.SIGKILL
    [line] = [e for e in logs if e["event"] == "daemon.orphan_stopped"]
    assert (line["agent"], line["pid"], line["killed"], line["gone"]) == (
        "alice", child.pid, True, True)
