"""A stand-in daemon for the claim race: ``python -m tests.support.pg_claimer DSN AGENT N``.

Waits for the line ``go`` on stdin (so racers start together), then claims batches of up to
``N`` messages for AGENT and acks them until a claim comes back empty while the agent has no
unread mail; prints one JSON line per batch: {"delivery": id, "attempt": n, "ids": [...]}.
"""

from __future__ import annotations

import json
import sys
import time

from agentmaild.models import Batch
from agentmaild.store.claim import claim_in, claim_params
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_tx import Conn, PgTx


def claim_inside(conn: Conn, agent: str, **limits: float) -> Batch | None:
    """The store's general claim (``claim.claim_in``) inside the transaction the caller holds
    open on ``conn`` (its locks and row locks last until that transaction ends)."""
    p = claim_params(agent, max_messages=int(limits["max_messages"]),
                     max_chars=int(limits["max_chars"]), lease_s=limits["lease_s"],
                     now=limits["now"])  # fmt: skip
    return claim_in(PgTx(conn), p)[0]


def main(dsn: str, agent: str, n: int) -> int:
    store = PostgresMailStore(dsn)
    sys.stdin.readline()
    while True:
        now = time.time()
        batch = store.claim(agent, max_messages=n, max_chars=1_000_000, lease_s=60.0, now=now)
        if batch is None:
            if not store.inbox(agent, unread_only=True):
                break
            continue  # the other racer holds the lease: try again once it acked
        line = {"delivery": batch.delivery_id, "attempt": batch.attempt,
                "ids": list(batch.message_ids)}
        print(json.dumps(line), flush=True)
        store.ack_delivery(batch.delivery_id, now=now)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
