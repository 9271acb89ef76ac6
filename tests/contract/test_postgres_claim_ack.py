"""``am_claim`` and ``am_ack`` (schemas 7 and 8): the daemon's claim and ack as one statement each.

The contract suite checks their answers (every ``PostgresMailStore.claim`` and ``ack_delivery``
goes through them); these check what only the one-statement forms can get wrong: the fall-back
to the general claim for a queue member, writing nothing when there is nothing to claim, and the
history row whose failure never fails the ack.
"""

from __future__ import annotations

import psycopg
from structlog.testing import capture_logs

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Attempt, Message
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_migrate import apply_functions
from agentmaild.store.records import InsertRequest

T0 = 1_700_000_000.0


def _put(store: PostgresMailStore, to: str, n: int = 1) -> list[str]:
    ids = [new_id("msg") for _ in range(n)]
    messages = tuple(Message(id=i, from_agent="lead", to_agent=to, subject="s", body="b",
                             created_at=iso_now(T0)) for i in ids)  # fmt: skip
    store.insert(InsertRequest(messages=messages, now=T0))
    return ids


def _agent(store: PostgresMailStore, name: str, state: str = "idle") -> None:
    store.add_agent(Agent(name=name, capability="builder", channel="spawn", state=state,
                          command=("true",)))  # fmt: skip


def _deliveries(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT agent, state FROM am_deliveries ORDER BY agent, state")]  # fmt: skip


def test_an_empty_claim_writes_nothing_and_a_queue_member_gets_queue_work(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    try:
        _agent(store, "bob")
        _agent(store, "m1")
        assert store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0) is None
        assert _deliveries(pg_dsn) == []
        store.join_queue("work", "m1")
        [queued] = _put(store, "queue:work")
        batch = store.claim("m1", max_messages=5, max_chars=10_000, lease_s=30, now=T0)
        assert batch is not None and batch.message_ids == (queued,) and batch.attempt == 1
        assert store.queues()[0].held == (("m1", batch.delivery_id, 1),)
        mine = _put(store, "m1", 2)  # its own mail comes before the queue's, in one statement
        assert store.ack_delivery(batch.delivery_id, now=T0 + 1) == 1
        own = store.claim("m1", max_messages=5, max_chars=10_000, lease_s=30, now=T0 + 2)
        assert own is not None and sorted(own.message_ids) == sorted(mine)
    finally:
        store.close()


def test_the_ack_marks_read_closes_records_and_wakes_a_booting_agent(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    try:
        _agent(store, "bob", state="booting")
        ids = _put(store, "bob", 2)
        batch = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0)
        assert batch is not None
        record = Attempt(delivery_id=batch.delivery_id, agent="bob", message_ids=batch.message_ids,
                         attempt=1, outcome="acked", duration_s=0.5, at=T0 + 1)  # fmt: skip
        assert store.ack_delivery(batch.delivery_id, now=T0 + 1, record=record) == 2
        assert store.ack_delivery(batch.delivery_id, now=T0 + 2, record=None) == 0
        assert all(store.get_message(i).acked_by == batch.delivery_id for i in ids)  # type: ignore[union-attr]
        assert _deliveries(pg_dsn) == [("bob", "acked")]
        [row] = store.list_attempts(agent="bob")
        assert (row.outcome, row.message_ids, row.duration_s) == ("acked", batch.message_ids, 0.5)
        agent = store.get_agent("bob")
        assert agent is not None and agent.state == "working"
    finally:
        store.close()


def test_a_history_row_that_cannot_be_written_never_fails_the_ack(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    try:
        _agent(store, "bob")
        [mid] = _put(store, "bob")
        batch = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0)
        assert batch is not None
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE am_attempts")
        record = Attempt(delivery_id=batch.delivery_id, agent="bob", message_ids=(mid,),
                         attempt=1, outcome="acked", at=T0 + 1)  # fmt: skip
        with capture_logs() as logs:
            assert store.ack_delivery(batch.delivery_id, now=T0 + 1, record=record) == 1
        message = store.get_message(mid)
        assert message is not None and message.read and message.acked_by == batch.delivery_id
        [lost] = [e for e in logs if e["event"] == "store.attempt_unrecorded"]
        assert "am_attempts" in lost["error"] and lost["delivery_id"] == batch.delivery_id
    finally:
        store.close()


def test_store_check_names_a_missing_claim_or_ack_function(pg_dsn: str) -> None:
    from agentmaild.store.check_postgres import check_pg_store

    assert check_pg_store(pg_dsn).problems == []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP FUNCTION am_ack")
        try:
            assert check_pg_store(pg_dsn).problems == [
                "function am_ack is missing: the daemon cannot ack"
            ]
        finally:  # the database goes back to the session's pool of empty ones: whole again
            apply_functions(conn)  # remake am_claim, am_ack…
    assert check_pg_store(pg_dsn).problems == []


def test_store_check_names_a_missing_ending_trigger(pg_dsn: str) -> None:
    from agentmaild.store.check_postgres import check_pg_store

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TRIGGER am_agent_ending_on_delete ON am_agents")
        try:
            assert check_pg_store(pg_dsn).problems == [
                "trigger(s) missing (a send can race an agent's ending): am_agent_ending_on_delete"
            ]
        finally:
            apply_functions(conn)
    assert check_pg_store(pg_dsn).problems == []


def test_the_ack_settles_mail_read_elsewhere_by_name_and_unread_in_one_update(pg_dsn: str) -> None:
    """Schema 8's am_ack marks a message read with no reader as read 'elsewhere', keeps a named
    reader, and reads the rest under this delivery (dropping their nudges), as version 7 did."""
    store = PostgresMailStore(pg_dsn)
    try:
        _agent(store, "bob")
        ids = _put(store, "bob", 3)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.cursor().executemany(
                "INSERT INTO am_nudges (agent, message_id, reason, created_at) VALUES"
                " ('bob', %s, 'high status', 'x')", [(i,) for i in ids])  # fmt: skip
        batch = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0)
        assert batch is not None and sorted(batch.message_ids) == sorted(ids)
        silent, named, _unread = ids
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE messages SET read = 1 WHERE id = %s", (silent,))
        store.ack([named], by="someone")
        assert store.ack_delivery(batch.delivery_id, now=T0 + 1) == 1
        got = {i: store.get_message(i) for i in ids}
        assert [(m.read, m.acked_by) for m in got.values() if m is not None] == [
            (True, "elsewhere"), (True, "someone"), (True, batch.delivery_id)]
        assert got[silent] is not None and got[silent].acked_at == iso_now(T0 + 1)
        with psycopg.connect(pg_dsn) as conn:
            left = conn.execute("SELECT message_id FROM am_nudges ORDER BY 1").fetchall()
        assert left == [(silent,)]  # only the acked message's nudge (and the pull's) are gone
    finally:
        store.close()


def test_a_claim_that_took_everything_says_so_and_the_loop_need_not_claim_again(
    pg_dsn: str,
) -> None:
    """Schema 8's claim_more: false only for a batch that took all the agent's mail of a member
    of no queue; a full batch, one cut by size, a redelivery or a queue member say true."""
    store = PostgresMailStore(pg_dsn)
    try:
        _agent(store, "bob")
        _put(store, "bob")
        lone = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0)
        assert lone is not None and lone.delivery_id in store.drained
        store.ack_delivery(lone.delivery_id, now=T0 + 1)
        _put(store, "bob", 2)
        full = store.claim("bob", max_messages=2, max_chars=10_000, lease_s=30, now=T0 + 2)
        assert full is not None and full.delivery_id not in store.drained
        store.release(full.delivery_id, error="x", max_attempts=5, now=T0 + 3)
        again = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0 + 4)
        assert again is not None and again.delivery_id == full.delivery_id
        assert again.delivery_id not in store.drained  # a redelivery: version 7's statement
        store.ack_delivery(again.delivery_id, now=T0 + 5)
        store.join_queue("work", "bob")
        _put(store, "bob")
        member = store.claim("bob", max_messages=5, max_chars=10_000, lease_s=30, now=T0 + 6)
        assert member is not None and member.delivery_id not in store.drained
    finally:
        store.close()
