"""The delivery operations of the SQLite store: claims, leases, acks, releases, dead letters."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from agentmaild.errors import NotFound
from agentmaild.ids import iso_now, new_id
from agentmaild.models import AgentCounts, Attempt, Batch, DeadLetter, Message
from agentmaild.store import pull
from agentmaild.store.base import Released, with_outcome
from agentmaild.store.history import insert_attempt
from agentmaild.store.queries import Q
from agentmaild.store.queues import queue_batch
from agentmaild.store.rows import dead_letter_from_row, message_from_row
from agentmaild.store.sqlite_tx import SqliteTransactions, SqliteTx


def _batch(
    delivery_id: str, agent: str, messages: list[Message], attempt: int, lease_until: float
) -> Batch:
    # Each message already names its delivery when it was read by it (a redelivery) or for it
    # (``_fresh_batch``): ``replace`` copies a frozen dataclass field by field (~16 µs a message).
    return Batch(
        delivery_id=delivery_id,
        agent=agent,
        messages=tuple(
            m if m.delivery_id == delivery_id else replace(m, delivery_id=delivery_id)
            for m in messages
        ),
        attempt=attempt,
        lease_until=lease_until,
    )


def _unread_of(conn: sqlite3.Connection, delivery_id: str) -> list[Message]:
    return [message_from_row(r) for r in conn.execute(Q["delivery_unread"], {"id": delivery_id})]


def _close_empty(conn: sqlite3.Connection, delivery_id: str, stamp: str) -> None:
    conn.execute(Q["delivery_set_state"], {"state": "acked", "stamp": stamp, "id": delivery_id})


def _reclaim_pending(
    conn: sqlite3.Connection, agent: str, lease_until: float, stamp: str
) -> Batch | None:
    """The agent's oldest pending redelivery, claimed again under its own id; else None."""
    mine = {"agent": agent}
    while (pending := conn.execute(Q["claim_pending_delivery"], mine).fetchone()) is not None:
        messages = _unread_of(conn, pending["id"])
        if not messages:
            # Everything in it was read another way (pull, hook): nothing left to redeliver.
            _close_empty(conn, pending["id"], stamp)
            continue
        claimed = {"lease_until": lease_until, "stamp": stamp, "id": pending["id"]}
        attempts = conn.execute(Q["delivery_mark_claimed"], claimed).fetchone()[0]
        return _batch(pending["id"], agent, messages, attempts, lease_until)
    return None


def _fresh_batch(
    conn: sqlite3.Connection, agent: str, max_messages: int, max_chars: int, delivery_id: str
) -> tuple[list[Message], bool]:
    """New mail in delivery order, cut before ``max_chars`` would be passed (at least one), and
    whether more of it is left (a full batch, or one cut short); each message as it will be
    once claimed by ``delivery_id``."""
    chosen: list[Message] = []
    used = 0
    rows = conn.execute(Q["claim_candidates"], {"agent": agent, "limit": max_messages}).fetchall()
    for row in rows:
        m = message_from_row(row, delivery_id=delivery_id)
        if chosen and used + m.size > max_chars:
            break
        chosen.append(m)
        used += m.size
    return chosen, len(rows) >= max_messages or len(chosen) < len(rows)


def _claim(
    conn: sqlite3.Connection,
    agent: str,
    max_messages: int,
    max_chars: int,
    lease_s: float,
    now: float,
) -> tuple[Batch | None, bool]:
    """The batch, and whether more may be claimable right after it (True unless known not)."""
    active, pending, in_queue = conn.execute(
        Q["claim_probe"], {"agent": agent, "now": now}
    ).fetchone()
    if active:
        return None, True
    lease_until = now + lease_s
    stamp = iso_now(now)
    if pending:
        redelivery = _reclaim_pending(conn, agent, lease_until, stamp)
        if redelivery is not None:
            return redelivery, True
    delivery_id = new_id("dlv")
    chosen, left = _fresh_batch(conn, agent, max_messages, max_chars, delivery_id)
    if not chosen:
        return queue_batch(SqliteTx(conn), agent, lease_until, stamp) if in_queue else None, True
    # Nothing left of its own and no queue to take work from: the loop need not claim again.
    more = left or bool(in_queue)
    born = {"id": delivery_id, "agent": agent, "lease_until": lease_until, "stamp": stamp}
    conn.execute(Q["delivery_insert"], born)
    # The id list varies in length, so this one statement is built here, not named in queries.sql.
    marks = ",".join("?" * len(chosen))
    conn.execute(
        f"UPDATE messages SET delivery_id = ? WHERE id IN ({marks})",
        (delivery_id, *(m.id for m in chosen)),
    )
    return _batch(delivery_id, agent, chosen, 1, lease_until), more


def _ack(
    conn: sqlite3.Connection, delivery_id: str, now: float, record: Attempt | None
) -> list[sqlite3.Row]:
    stamp = iso_now(now)
    marked = conn.execute(Q["delivery_ack_messages"], {"stamp": stamp, "by": delivery_id})
    rows = [r for r in marked if r["acked_by"] == delivery_id]  # not those read elsewhere
    for r in rows:
        conn.execute(Q["nudge_drop"], {"agent": r["to_agent"], "message_id": r["id"]})
    holder = conn.execute(Q["delivery_close"], {"stamp": stamp, "id": delivery_id}).fetchone()
    if record is not None:
        insert_attempt(SqliteTx(conn), record)
    if rows:
        # The holder, not the address: queue mail is addressed to the queue.
        pull.mark_reached(conn, holder[0] if holder is not None else rows[0]["to_agent"])
    return rows


def _release(
    conn: sqlite3.Connection, delivery_id: str, params: dict[str, object], record: Attempt | None
) -> Released:
    row = conn.execute(Q["delivery_release"], {"id": delivery_id, **params}).fetchone()
    if row is None:
        raise NotFound(f"no claimed delivery {delivery_id}")
    messages: tuple[Message, ...] = ()
    if row["state"] == "dead":
        messages = tuple(_unread_of(conn, delivery_id))
    record = with_outcome(record, row["state"])
    if record is not None:
        insert_attempt(SqliteTx(conn), record)
    return Released(state=row["state"], failures=row["failures"], messages=messages)


_DRAINED_MAX = 1024


class SqliteDeliveries(SqliteTransactions):
    """The ``MailStore`` delivery and lease operations on SQLite.

    ``drained``: ids of batches whose claim saw nothing else claimable for the agent (no more
    direct mail, no queue); the daemon's loop then waits for a wake-up instead of claiming again.
    """

    drained: set[str]

    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        batch, more = self._write(
            lambda conn: _claim(conn, agent, max_messages, max_chars, lease_s, now)
        )
        if batch is not None and not more:
            self.after_commit(lambda: self._drained(batch.delivery_id))
        return batch

    def _drained(self, delivery_id: str) -> None:
        if len(self.drained) >= _DRAINED_MAX:  # claims nobody asked about (pull consumers)
            self.drained.clear()
        self.drained.add(delivery_id)  # AsyncMailStore.more_after() takes it out

    def ack_delivery(self, delivery_id: str, *, now: float, record: Attempt | None = None) -> int:
        rows = self._write(lambda conn: _ack(conn, delivery_id, now, record))
        link = self.overstory
        if link is not None:
            acked = [(r["to_agent"], r["id"]) for r in rows]
            self.after_commit(lambda: link.clear_acked(acked))
        return len(rows)

    def release(
        self,
        delivery_id: str,
        *,
        error: str,
        max_attempts: int,
        now: float,
        count: int = 1,
        record: Attempt | None = None,
    ) -> Released:
        params: dict[str, object] = {
            "count": count,
            "max_attempts": max_attempts,
            "error": error[:2000],
            "now": iso_now(now),
        }
        return self._write(lambda conn: _release(conn, delivery_id, params, record))

    def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool:
        params = {"until": now + lease_s, "id": delivery_id}
        return self._write(lambda c: c.execute(Q["delivery_extend_lease"], params).rowcount == 1)

    def reap_expired(
        self,
        *,
        now: float,
        everything: bool = False,
        host: str | None = None,
        agent: str | None = None,
    ) -> list[tuple[str, str]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            params = {
                "stamp": iso_now(now),
                "now": now,
                "everything": int(everything),
                "host": host,
                "agent": agent,
            }
            rows = conn.execute(Q["deliveries_expired"], params).fetchall()
            return sorted((r["id"], r["agent"]) for r in rows)

        return self._write(run)

    def dead_letters(self, agent: str | None = None) -> list[DeadLetter]:
        rows = self._read(Q["dead_list"], {"agent": agent or None})
        return [dead_letter_from_row(r, self._message_ids(r["id"])) for r in rows]

    def _message_ids(self, delivery_id: str) -> tuple[str, ...]:
        return tuple(x["id"] for x in self._read(Q["delivery_message_ids"], {"id": delivery_id}))

    def retry_dead(self, *, agent: str | None = None, delivery_id: str | None = None) -> list[str]:
        def run(conn: sqlite3.Connection) -> list[str]:
            params = {"now": iso_now(), "agent": agent, "id": delivery_id}
            return [r["id"] for r in conn.execute(Q["retry_dead"], params).fetchall()]

        return self._write(run)

    def pending_agents(self) -> set[str]:
        return {r[0] for r in self._read(Q["pending_agents"])}

    def counts(self) -> dict[str, AgentCounts]:
        figures: dict[str, dict[str, int]] = {}
        for to, n in self._read(Q["count_unread"]):
            figures.setdefault(to, {})["unread"] = n
        for agent, state, n in self._read(Q["count_deliveries"]):
            key = "in_flight" if state == "claimed" else "dead_letters"
            figures.setdefault(agent, {})[key] = n
        return {a: AgentCounts(agent=a, **f) for a, f in figures.items()}

    def totals(self) -> dict[str, int]:
        total, unread = self._read(Q["count_messages"])[0]
        return {"messages": int(total), "unread": int(unread)}
