"""``agentmaild store copy``: SQLite → PostgreSQL → SQLite, every row intact, verified; the real CLI
as a child process, real stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Attempt, Message
from agentmaild.store.base import MailStore
from agentmaild.store.guard import ThreadGuard
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.records import AgentProc, InsertRequest
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.trust.tokens import ApiToken

T0 = 1_700_000_000.0


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL")}
    return subprocess.run(
        [sys.executable, "-m", "agentmaild", *args], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )


def msg(to: str, i: int, **kw: Any) -> Message:
    return Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject=f"s{i}",
                   body=f"body {i} ✓", type="status", priority="normal",
                   created_at=iso_now(T0 + i), **kw)


def fill(store: MailStore) -> None:
    """A store that has lived: agents, threads, claims in every state, history, nudges, procs."""
    store.add_agent(Agent(name="bob", capability="builder", channel="spawn",
                          command=("tee", "-a", "x"), settings={"k": [1, 2.5]}, poll_interval_s=2))
    store.add_agent(Agent(name="carol", capability="reviewer"))
    root = msg("bob", 0, payload='{"b": 1,  "a": 2}')
    rest = [msg("bob", i, thread_id=root.id) for i in range(1, 6)]
    store.insert(InsertRequest(messages=(root, *rest), now=T0,
                               nudges=(("bob", rest[0].id, "urgent"),),
                               idempotency=("lead", "key-1", "digest")))
    store.insert(InsertRequest(messages=tuple(msg("carol", i) for i in range(3)), now=T0,
                               rate_limit_max=100))
    store.set_team_rules({"pingpong_max": 7, "duplicate_window_s": 0.5}, now=T0)
    acked = store.claim("bob", max_messages=2, max_chars=10_000, lease_s=30, now=T0)
    assert acked is not None
    store.ack_delivery(acked.delivery_id, now=T0 + 1, record=Attempt(
        delivery_id=acked.delivery_id, agent="bob", message_ids=acked.message_ids, attempt=1,
        outcome="acked", duration_s=0.5, at=T0 + 1))
    dead = store.claim("bob", max_messages=2, max_chars=10_000, lease_s=30, now=T0 + 2)
    assert dead is not None
    store.release(dead.delivery_id, error="gone", max_attempts=1, now=T0 + 3)
    live = store.claim("carol", max_messages=1, max_chars=10_000, lease_s=30, now=T0 + 4)
    assert live is not None
    store.take_unread("carol", max_chars=0)
    store.record_proc(AgentProc(pid=4242, start_time="123", pgid=4242, agent="bob",
                                delivery_id=None, daemon_pid=1, started_at=T0))
    fill_schema_4(store)


def fill_schema_4(store: MailStore) -> None:
    """Tokens, the team rules' state (collapse, a held thread, escalations) and a work queue."""
    store.add_token(ApiToken(id="tok-1", agent="bob", scopes=("read", "ack"), hash="h" * 64,
                             created_at=T0, expires_at=T0 + 3600.5))
    store.add_token(ApiToken(id="tok-2", agent="operator", scopes=("read",), hash="g" * 64,
                             created_at=T0 + 1))
    store.revoke_token("tok-2", now=T0 + 2.25)
    again = msg("carol", 20)
    for m in (again, replace(again, id=new_id("msg"))):  # the second collapses into the first
        store.insert(InsertRequest(messages=(m,), now=T0 + 5, collapse=("digest-1", 60.0)))
    esc = replace(msg("lead", 21), type="escalation", priority="high")
    guard = ThreadGuard(thread_id="thr-1", pair="bob|carol", max_messages=1, window_s=600.0,
                        escalation=esc)
    for i in (22, 23):  # the second trips the cap: the thread is held
        store.insert(InsertRequest(messages=(msg("carol", i, thread_id="thr-1"),), now=T0 + i,
                                   thread_guard=guard))
    assert store.take_overdue({"normal": 1.0}, now=T0 + 10_000)
    store.update_agent("carol", {"shutdown_requested_at": iso_now(T0 + 30)})
    store.join_queue("work", "bob")
    store.join_queue("work", "carol")
    store.insert(InsertRequest(messages=(msg("queue:work", 24), msg("queue:work", 25)), now=T0))


def view(store: MailStore) -> dict[str, Any]:
    """What the stores answer through the interface: must be equal after a copy."""
    return {
        "messages": store.list_messages(),
        "agents": [replace(a) for a in store.list_agents()],
        "dead": store.dead_letters(),
        "attempts": store.list_attempts(limit=None),
        "counts": store.counts(),
        "totals": store.totals(),
        "procs": store.list_procs(),
        "thread": store.thread(store.list_messages(to_agent="bob")[-1].id),
        "pending": store.pending_agents(),
        "tokens": store.list_tokens(),
        "counters": store.rule_counters(),
        "queues": store.queues(),
        "team_rules": store.team_rules(),
    }


def test_copy_sqlite_to_postgres_and_back_keeps_every_row(
    tmp_path: Path, pg_dsn: str, pg_databases: Any
) -> None:
    src = tmp_path / "a" / "mail.db"
    original = SqliteMailStore(src)
    fill(original)
    before = view(original)
    original.close()
    empty = pg_databases.create(migrated=False)

    there = run("store", "copy", str(src), empty, "--json")
    assert there.returncode == 0, there.stderr
    report = json.loads(there.stdout)
    assert report["ok"] is True
    assert report["tables"]["messages"]["rows"] == 14
    for table in ("am_tokens", "am_recent_sends", "am_thread_log", "am_thread_holds",
                  "am_counters", "am_escalated", "am_queue_members", "am_settings"):
        assert report["tables"][table]["rows"] > 0, table
    assert report["tables"]["am_attempts"]["copied_rows"] == 1
    assert all(t["verified"] for t in report["tables"].values())

    pg = PostgresMailStore(empty)
    assert view(pg) == before
    pg.close()

    back_path = tmp_path / "b" / "mail.db"
    back = run("store", "copy", empty, str(back_path), "--json")
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["tables"] == report["tables"]  # the same checksums
    again = SqliteMailStore(back_path)
    assert view(again) == before
    again.close()
    pg_databases.drop(empty)


def test_a_copied_store_carries_on_where_the_source_stopped(tmp_path: Path, pg_dsn: str) -> None:
    src = tmp_path / "mail.db"
    s = SqliteMailStore(src)
    s.insert(InsertRequest(messages=tuple(msg("bob", i) for i in range(2)), now=T0))
    first = s.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0)
    assert first is not None
    s.reap_expired(now=T0, everything=True)  # a daemon stopped mid-delivery: pending again
    s.record_attempt(Attempt(delivery_id=first.delivery_id, agent="bob",
                             message_ids=first.message_ids, attempt=1, outcome="failed", at=T0))
    s.close()
    assert run("store", "copy", str(src), pg_dsn).returncode == 0
    pg = PostgresMailStore(pg_dsn)
    again = pg.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0 + 1)
    assert again is not None
    assert (again.delivery_id, again.attempt, again.message_ids) == (
        first.delivery_id, 2, first.message_ids)
    pg.record_attempt(Attempt(delivery_id=first.delivery_id, agent="bob",
                              message_ids=first.message_ids, attempt=2, outcome="acked", at=T0))
    assert [a.id for a in pg.list_attempts()] == [2, 1]  # ids go on after the copied ones
    pg.close()


def test_copy_into_a_store_with_mail_refuses_and_changes_nothing(
    tmp_path: Path, pg_dsn: str
) -> None:
    src = tmp_path / "mail.db"
    s = SqliteMailStore(src)
    s.insert(InsertRequest(messages=(msg("bob", 1),), now=T0))
    s.close()
    pg = PostgresMailStore(pg_dsn)
    mine = msg("carol", 2)
    pg.insert(InsertRequest(messages=(mine,), now=T0))
    done = run("store", "copy", str(src), pg_dsn, "--json")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "store" and "not empty" in error["message"]
    assert [m.id for m in pg.list_messages()] == [mine.id]
    pg.close()


def test_copy_of_a_missing_source_is_one_clear_line(tmp_path: Path, pg_dsn: str) -> None:
    done = run("store", "copy", str(tmp_path / "nope.db"), pg_dsn)
    assert done.returncode == 1
    assert done.stderr.startswith("error: no store at") and len(done.stderr.splitlines()) == 1
