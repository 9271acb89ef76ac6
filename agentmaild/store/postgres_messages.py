"""The message operations of the PostgreSQL store: insert with its limits, reads, pull, acks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from agentmaild.ids import iso_now
from agentmaild.models import Message
from agentmaild.store import checks
from agentmaild.store.postgres_rules import collapsed, remember, trips_thread_guard
from agentmaild.store.postgres_send_one import insert_lock_keys, send_one, send_one_params
from agentmaild.store.postgres_tx import (
    PQ,
    Conn,
    PostgresTransactions,
    Row,
    lock,
    notify_payload,
    one,
)
from agentmaild.store.records import InsertRequest, InsertResult
from agentmaild.store.rows import message_from_row, message_params


def _find_idempotent(conn: Conn, sender: str, key: str, digest: str) -> InsertResult | None:
    row = one(conn, PQ["idem_get"], {"sender": sender, "key": key})
    if row is None:
        return None
    conflict = checks.idempotency_conflict(sender, key, row["content_hash"], digest)
    if conflict is not None:
        raise conflict
    found = [_get(conn, i) for i in row["message_ids"]]
    return InsertResult(messages=tuple(m for m in found if m is not None), duplicate=True)


def _get(conn: Conn, message_id: str) -> Message | None:
    row = one(conn, PQ["get_message"], {"id": message_id})
    return message_from_row(row) if row is not None else None


def _insert(conn: Conn, req: InsertRequest) -> InsertResult:
    # What SQLite's single writer serialises, advisory locks serialise here: racing sends with
    # one idempotency key write once; caps and rate windows count each other's rows.
    lock(conn, *insert_lock_keys(req))
    # The checks' reads go out now, with the locks (in pipeline mode nothing waits until the
    # first result is read): one round trip for all of them, not one each.
    states = {n: conn.execute(PQ["agent_state"], {"name": n}) for n in req.check_recipients}
    full = _unread_cap_reads(conn, req)
    earlier = _earlier(conn, req)
    if earlier is not None:
        return earlier
    for name in req.check_recipients:
        row = states[name].fetchone()
        req.check_recipient(name, row["state"] if row else None)
    _check_unread_cap(full, req.unread_max)
    _check_rate(conn, req)
    if trips_thread_guard(conn, req):
        _notify(conn, [req.thread_guard.escalation] if req.thread_guard else [])
        return InsertResult(messages=(), held=True)
    with conn.cursor() as cur:
        cur.executemany(PQ["insert_message"], [message_params(m) for m in req.messages])
    remember(conn, req)
    _notify(conn, req.messages)
    stamp = iso_now(req.now)
    for agent, message_id, reason in req.nudges:
        conn.execute(
            PQ["nudge_put"],
            {"agent": agent, "message_id": message_id, "reason": reason, "stamp": stamp},
        )
    if req.idempotency is not None:
        sender, key, digest = req.idempotency
        ids = Jsonb([m.id for m in req.messages])
        params = {"sender": sender, "key": key, "digest": digest, "ids": ids, "stamp": stamp}
        conn.execute(PQ["idem_put"], params)
    return InsertResult(messages=req.messages)


def _earlier(conn: Conn, req: InsertRequest) -> InsertResult | None:
    """What an idempotent retry or a collapsed repeat returns instead of writing."""
    if req.idempotency is not None:
        earlier = _find_idempotent(conn, *req.idempotency)
        if earlier is not None and checks.replays(earlier.messages):
            return earlier
        if earlier is not None:  # every message it wrote was deleted since: the key is free
            sender, key, _ = req.idempotency
            conn.execute(PQ["idem_drop"], {"sender": sender, "key": key})
    return collapsed(conn, req, _get)


def _notify(conn: Conn, messages: Sequence[Message]) -> None:
    """Wake the daemons LISTENing on the store for these messages' recipients (at commit)."""
    recipients = notify_payload({m.to_agent for m in messages})
    if recipients:
        conn.execute(PQ["notify_mail"], {"recipients": recipients})


def _unread_cap_reads(conn: Conn, req: InsertRequest) -> dict[str, psycopg.Cursor[Row]]:
    if req.unread_max <= 0:
        return {}
    return {
        to: conn.execute(PQ["unread_count_reaches"], {"to": to, "cap": req.unread_max})
        for to in {m.to_agent for m in req.messages}
    }


def _check_unread_cap(reads: dict[str, psycopg.Cursor[Row]], unread_max: int) -> None:
    for to, cur in reads.items():
        if cur.fetchone() is not None:
            raise checks.inbox_full(to, unread_max)


def _check_rate(conn: Conn, req: InsertRequest) -> None:
    if req.rate_limit_max <= 0:
        return
    since = checks.window_start(req.now, req.rate_limit_window_s)
    before = checks.rate_trim_before(req.now, req.rate_limit_window_s)
    conn.execute(PQ["rate_trim"], {"before": before})
    for m in req.messages:
        pair = {"from": m.from_agent, "to": m.to_agent}
        row = one(conn, PQ["rate_count"], {**pair, "since": since})
        sent = int(row["count"]) if row else 0
        refusal = checks.rate_limited(
            m.from_agent, m.to_agent, sent, req.rate_limit_max, req.rate_limit_window_s
        )
        if refusal is not None:
            raise refusal
        conn.execute(PQ["rate_insert"], {**pair, "at": req.now})


def mark_read(conn: Conn, ids: list[str], by: str) -> list[str]:
    """Mark ``ids`` read (when, by whom), drop their nudges; returns the ids that changed."""
    if not ids:
        return []
    rows = conn.execute(PQ["mark_read"], {"ids": ids, "stamp": iso_now(), "by": by}).fetchall()
    return [r["id"] for r in rows]


def mark_reached(conn: Conn, agent: str) -> None:
    conn.execute(PQ["agent_reached"], {"agent": agent, "stamp": iso_now()})


def _take_unread(conn: Conn, agent: str, max_chars: int, ack: bool) -> list[Message]:
    lock(conn, f"agent:{agent}")  # serialised with the daemon's claims for this agent
    taken: list[Message] = []
    used = 0
    for row in conn.execute(PQ["pull_candidates"], {"agent": agent}):
        m = message_from_row(row)
        if max_chars and taken and used + m.size > max_chars:
            break
        taken.append(m)
        used += m.size
    if ack and taken:
        done = set(mark_read(conn, [m.id for m in taken], "pull"))
        mark_reached(conn, agent)
        taken = [replace(m, read=True) for m in taken if m.id in done]
    return taken


def _list_query(
    filters: dict[str, Any], unread: bool | None, limit: int | None
) -> tuple[str, dict[str, Any]]:
    """``SELECT`` over messages with a ``WHERE`` of just the filters given, newest first."""
    where = [f"{column} = %({column})s" for column, value in filters.items() if value is not None]
    params = {column: value for column, value in filters.items() if value is not None}
    if unread is not None:
        where.append("read = %(read)s")
        params["read"] = 0 if unread else 1
    sql = "SELECT * FROM messages"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at DESC, id DESC LIMIT %(limit)s"
    params["limit"] = limit
    return sql, params


def _purge(conn: Conn, older_than: str | None, agent: str | None, everything: bool) -> int:
    where = ["TRUE"] if everything else []
    if older_than is not None:
        where.append("created_at < %(older)s")
    if agent is not None:
        where.append("(from_agent = %(agent)s OR to_agent = %(agent)s)")
    cond = " AND ".join(where)
    params = {"older": older_than, "agent": agent}
    conn.execute(
        f"DELETE FROM am_nudges WHERE message_id IN (SELECT id FROM messages WHERE {cond})",
        params,
    )
    n = conn.execute(f"DELETE FROM messages WHERE {cond}", params).rowcount
    # Deliveries left with no message at all are history nobody can act on; the sweep also
    # takes what other tools' deletions left behind.
    _sweep(conn)
    return int(n)


def _sweep(conn: Conn) -> int:
    return sum(
        int(conn.execute(PQ[name]).rowcount)
        for name in (
            "orphans_nudges_delete",
            "deliveries_orphaned_delete",
            "orphans_idempotency_delete",
        )
    )


class PostgresMessages(PostgresTransactions):
    """The ``MailStore`` message operations on PostgreSQL."""

    def insert(self, request: InsertRequest) -> InsertResult:
        params = send_one_params(request)
        if params is not None and self._write(lambda conn: send_one(conn, params), single=True):
            return InsertResult(messages=request.messages)
        return self._write(lambda conn: _insert(conn, request), pipeline=True)

    def find_idempotent(self, sender: str, key: str, digest: str) -> InsertResult | None:
        return self._read_with(lambda conn: _find_idempotent(conn, sender, key, digest))

    def get_message(self, message_id: str) -> Message | None:
        return self._read_with(lambda conn: _get(conn, message_id))

    def unread_among(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        rows = self._read(PQ["unread_among"], {"ids": list(ids)})
        return {str(r["id"]) for r in rows}

    def inbox(self, agent: str, *, unread_only: bool = False) -> list[Message]:
        sql = PQ["inbox_unread"] if unread_only else PQ["inbox_all"]
        return [message_from_row(r) for r in self._read(sql, {"agent": agent})]

    def take_unread(self, agent: str, *, max_chars: int = 0, ack: bool = True) -> list[Message]:
        return self._write(lambda conn: _take_unread(conn, agent, max_chars, ack))

    def ack(self, message_ids: Sequence[str], *, by: str = "pull") -> list[str]:
        return self._write(lambda conn: mark_read(conn, list(message_ids), by))

    def list_messages(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        type: str | None = None,
        unread: bool | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        filters = {"from_agent": from_agent, "to_agent": to_agent, "type": type}
        sql, params = _list_query(filters, unread, limit)
        return [message_from_row(r) for r in self._read(sql, params)]

    def thread(self, thread_id: str) -> list[Message]:
        return [message_from_row(r) for r in self._read(PQ["thread"], {"t": thread_id})]

    def purge(
        self, *, older_than: str | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0
        return self._write(lambda conn: _purge(conn, older_than, agent, everything))

    def sweep_orphans(self) -> int:
        return self._write(_sweep)

    def reset_rate_limit(self, from_agent: str, to_agent: str) -> int:
        params = {"from": from_agent, "to": to_agent}
        return self._write(lambda conn: int(conn.execute(PQ["rate_reset"], params).rowcount))

    def take_nudges(self, agent: str) -> list[dict[str, Any]]:
        def run(conn: Conn) -> list[dict[str, Any]]:
            rows = conn.execute(PQ["nudges_for"], {"agent": agent}).fetchall()
            conn.execute(PQ["nudges_clear"], {"agent": agent})
            return [dict(r) for r in rows]

        return self._write(run)
