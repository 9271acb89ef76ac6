"""Group commit (store/sqlite_group.py): the delivery calls queued together share one SQLite
transaction; a call's own error undoes only its own writes; an SQLite error runs each call again
on its own; nothing is handed back, and no after-commit step runs, before the COMMIT; a crash
before the COMMIT leaves the claims to be redelivered under the same delivery ids."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.errors import NotFound, StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.hops import Hops, groupable
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.store.sqlite_group import Group

AGENTS = ("alice", "bob", "carol")
CLAIM: dict[str, Any] = {"max_messages": 10, "max_chars": 10_000, "lease_s": 30.0, "now": 1000.0}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "mail.db"
    s = SqliteMailStore(path)
    for name in (*AGENTS, "lead"):
        s.add_agent(Agent(name=name, capability="builder", channel="spawn"))
    mailer = Mailer(s)
    for name in AGENTS:
        mailer.send(sender="lead", to=name, subject=f"for {name}", body="b")
    s.close()
    return path


@pytest.fixture
def store(db: Path) -> Iterator[SqliteMailStore]:
    s = SqliteMailStore(db)
    yield s
    s.close()


def commits(store: SqliteMailStore) -> list[str]:
    seen: list[str] = []
    store.connection.set_trace_callback(
        lambda sql: seen.append(sql) if sql in ("COMMIT", "BEGIN IMMEDIATE") else None
    )
    return seen


def states(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT agent, state FROM am_deliveries").fetchall())
    finally:
        conn.close()


async def queued_together(aio: AsyncMailStore, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` through ``aio`` while a first hop holds the thread, so they share the next
    hop; each result, or the exception it raised."""
    gate = threading.Event()
    out: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        try:
            out[i] = await calls[i]()
        except Exception as exc:
            out[i] = exc

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(aio.run_sync, lambda: gate.wait(30))
            await anyio.wait_all_tasks_blocked()
            for i in range(len(calls)):
                tg.start_soon(one, i)
            await anyio.wait_all_tasks_blocked()
            gate.set()
    return out


def claim_of(aio: AsyncMailStore, agent: str) -> Callable[[], Any]:
    return lambda: aio.claim(agent, **CLAIM)


async def test_claims_for_several_agents_share_one_transaction(store: SqliteMailStore) -> None:
    aio = AsyncMailStore(store)
    seen = commits(store)
    batches = await queued_together(aio, [claim_of(aio, a) for a in AGENTS])
    assert [b.agent for b in batches] == list(AGENTS)
    assert seen == ["BEGIN IMMEDIATE", "COMMIT"]
    seen.clear()
    acked = await queued_together(
        aio, [lambda b=b: aio.ack_delivery(b.delivery_id, now=1001.0) for b in batches]
    )
    assert acked == [1, 1, 1] and seen == ["BEGIN IMMEDIATE", "COMMIT"]
    assert all(not store.inbox(a, unread_only=True) for a in AGENTS)


async def test_a_calls_own_error_undoes_only_its_own_writes(
    store: SqliteMailStore, db: Path
) -> None:
    aio = AsyncMailStore(store)

    @groupable
    def writes_then_fails() -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE am_agents SET parent = 'half-done' WHERE name = 'lead'")
            raise ValueError("its own error")

        store._write(run)

    out = await queued_together(aio, [
        claim_of(aio, "alice"),
        lambda: aio.run_sync(writes_then_fails),
        lambda: aio.release("dlv-none", error="x", max_attempts=3, now=1000.0),
        claim_of(aio, "bob"),
    ])
    assert out[0].agent == "alice" and out[3].agent == "bob"
    assert isinstance(out[1], ValueError) and isinstance(out[2], NotFound)
    assert states(db) == {"alice": "claimed", "bob": "claimed"}
    lead = store.get_agent("lead")
    assert lead is not None and lead.parent is None  # the failed call's write was rolled back


async def test_an_sqlite_error_runs_every_call_again_on_its_own(
    store: SqliteMailStore, db: Path
) -> None:
    aio = AsyncMailStore(store)
    tries: list[int] = []

    @groupable
    def flaky() -> str:
        def run(conn: sqlite3.Connection) -> str:
            tries.append(1)
            if len(tries) == 1:
                raise sqlite3.OperationalError("disk I/O error")
            return "fine alone"

        return store._write(run)

    seen = commits(store)
    out = await queued_together(
        aio, [claim_of(aio, "alice"), lambda: aio.run_sync(flaky), claim_of(aio, "bob")]
    )
    assert out[1] == "fine alone" and len(tries) == 2
    assert out[0].agent == "alice" and out[2].agent == "bob"
    # The group (rolled back), then one transaction per call.
    assert seen.count("BEGIN IMMEDIATE") == 4 and seen.count("COMMIT") == 3
    assert states(db) == {"alice": "claimed", "bob": "claimed"}
    again = store.claim("alice", **{**CLAIM, "now": 1001.0})
    assert again is None  # claimed once, not twice


async def test_a_failed_commit_hands_back_the_errors_each_call_gets_alone(
    store: SqliteMailStore, db: Path
) -> None:
    aio = AsyncMailStore(store)
    batch = store.claim("alice", **CLAIM)
    assert batch is not None
    real = store._conn

    class CommitFails:
        """The store's connection, but the group's COMMIT (only the first) fails."""

        failed = False

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT" and store._grouped is None and not self.failed:
                self.failed = True
                raise sqlite3.OperationalError("database or disk is full")
            return real.execute(sql, *args)

    store._conn = CommitFails()  # type: ignore[assignment]
    try:
        out = await queued_together(aio, [
            lambda: aio.ack_delivery(batch.delivery_id, now=1001.0),
            claim_of(aio, "bob"),
        ])
    finally:
        store._conn = real
    assert out[0] == 1 and out[1].agent == "bob"  # each committed on its own afterwards
    assert states(db) == {"alice": "acked", "bob": "claimed"}


async def test_after_commit_steps_wait_for_the_groups_commit(store: SqliteMailStore) -> None:
    aio = AsyncMailStore(store)
    seen_before_commit: list[set[str]] = []

    @groupable
    def look_at_drained() -> None:
        seen_before_commit.append(set(store.drained))

    out = await queued_together(aio, [claim_of(aio, "alice"), lambda: aio.run_sync(
        look_at_drained)])
    assert seen_before_commit == [set()]  # the claim ran, its commit had not
    assert out[0].delivery_id in store.drained  # it left nothing behind: known after COMMIT
    assert not aio.more_after(out[0])


def test_runs_of_grouped_calls_go_to_the_group_runner_in_order() -> None:
    groups: list[int] = []
    order: list[str] = []

    def runner(calls: Any) -> None:
        groups.append(len(calls))
        for call in calls:
            call.run()

    async def main() -> None:
        hops = Hops(runner)
        gate = threading.Event()

        def step(name: str) -> Callable[[], str]:
            def fn() -> str:
                order.append(name)
                return name

            return fn

        async with anyio.create_task_group() as tg:
            tg.start_soon(hops.run, lambda: gate.wait(30))
            await anyio.wait_all_tasks_blocked()
            for name, grouped in (("a", True), ("b", True), ("c", False), ("d", True),
                                  ("e", True), ("f", True), ("g", False)):
                tg.start_soon(lambda n=name, g=grouped: hops.run(step(n), grouped=g))
                await anyio.wait_all_tasks_blocked()
            gate.set()

    anyio.run(main)
    assert order == list("abcdefg") and groups == [2, 3]


def test_a_crash_before_the_group_commit_redelivers_under_the_same_ids(db: Path) -> None:
    """A real process claims for two agents, then dies inside the group that acks both."""
    script = textwrap.dedent(f"""
        import json, os, sys
        from agentmaild.store.sqlite import SqliteMailStore
        store = SqliteMailStore({str(db)!r})
        claim = dict(max_messages=10, max_chars=10_000, lease_s=30.0, now=1000.0)
        ids = [store.claim(a, **claim).delivery_id for a in ("alice", "bob")]
        print(json.dumps(ids), flush=True)

        class Call:
            def __init__(self, fn): self.fn = fn
            def run(self): self.fn()
            def reset(self): pass

        acks = [Call(lambda i=i: store.ack_delivery(i, now=1001.0)) for i in ids]
        store.run_grouped([*acks, Call(lambda: os._exit(9))])  # dies before the COMMIT
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 9, done.stderr
    ids = __import__("json").loads(done.stdout)
    store = SqliteMailStore(db)
    try:
        assert states(db) == {"alice": "claimed", "bob": "claimed"}  # the acks never landed
        assert all(store.inbox(a, unread_only=True) for a in ("alice", "bob"))
        reaped = store.reap_expired(now=2000.0)
        assert sorted(d for d, _ in reaped) == sorted(ids)
        again = [store.claim(a, **{**CLAIM, "now": 2001.0}) for a in ("alice", "bob")]
        assert [b.delivery_id for b in again if b is not None] == ids
        assert [b.attempt for b in again if b is not None] == [2, 2]
    finally:
        store.close()


def test_a_broken_group_takes_no_more_writes() -> None:
    group = Group(sqlite3.connect(":memory:"))
    group.broken = True
    with pytest.raises(StoreError, match="rolled back"):
        group.write(lambda conn: None)
