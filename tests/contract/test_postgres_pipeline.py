"""Writes in pipeline mode (sends, claims, acks: BEGIN and COMMIT ride with the statements): a
write refused half-way — by a check in Python or by the server — leaves no transaction open, and
the next write on the same connection commits on its own."""

from __future__ import annotations

import time
from dataclasses import replace

import psycopg
import pytest

from agentmaild.errors import RecipientRefused, StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.records import InsertRequest

IDLE = psycopg.pq.TransactionStatus.IDLE


def test_a_refused_write_leaves_no_transaction_behind(pg_dsn: str) -> None:
    store = PostgresMailStore(pg_dsn)
    try:
        store.add_agent(Agent(name="demo", capability="builder"))
        mailer = Mailer(store)
        first = mailer.send(sender="lead", to="demo", subject="one", body="b").messages[0]
        with pytest.raises(RecipientRefused):  # refused in Python, after the reads went out
            mailer.send(sender="lead", to="nobody", subject="two", body="b")
        assert store.connection.info.transaction_status == IDLE
        again = replace(first, subject="same id")  # refused by the server: a duplicate key
        with pytest.raises(StoreError, match="duplicate key"):
            store.insert(InsertRequest(messages=(again,), now=time.time()))
        assert store.connection.info.transaction_status == IDLE
        mailer.send(sender="lead", to="demo", subject="three", body="b")
        with psycopg.connect(pg_dsn) as other:  # committed, as seen from another connection
            subjects = [r[0] for r in other.execute("SELECT subject FROM messages ORDER BY 1")]
        assert subjects == ["one", "three"]
        batch = store.claim("demo", max_messages=10, max_chars=100_000, lease_s=60,
                            now=time.time())
        assert batch is not None and store.ack_delivery(batch.delivery_id, now=time.time()) == 2
        assert store.totals()["unread"] == 0
    finally:
        store.close()
