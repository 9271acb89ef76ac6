"""The message operations of the SQLite store: insert with its limits, reads, pull, acks, purge."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agentmaild.ids import iso_now
from agentmaild.models import Message
from agentmaild.store import checks, pull
from agentmaild.store.queries import Q
from agentmaild.store.records import InsertRequest, InsertResult
from agentmaild.store.rows import message_from_row, message_params
from agentmaild.store.sqlite_rules import collapse_into, collapsed, remember, trips_thread_guard
from agentmaild.store.sqlite_tx import SqliteTransactions


def _find_idempotent(
    conn: sqlite3.Connection, sender: str, key: str, digest: str
) -> InsertResult | None:
    row = conn.execute(Q["idem_get"], {"sender": sender, "key": key}).fetchone()
    if row is None:
        return None
    conflict = checks.idempotency_conflict(sender, key, row["content_hash"], digest)
    if conflict is not None:
        raise conflict
    found = [_get(conn, i) for i in json.loads(row["message_ids"])]
    return InsertResult(messages=tuple(m for m in found if m is not None), duplicate=True)


def _get(conn: sqlite3.Connection, message_id: str) -> Message | None:
    row = conn.execute(Q["get_message"], {"id": message_id}).fetchone()
    return message_from_row(row) if row is not None else None


def _earlier(conn: sqlite3.Connection, req: InsertRequest) -> InsertResult | None:
    """What an idempotent retry or a collapsed repeat returns instead of writing."""
    if req.idempotency is not None:
        # Checked again inside the write transaction: two racing sends write once.
        earlier = _find_idempotent(conn, *req.idempotency)
        if earlier is not None and checks.replays(earlier.messages):
            return earlier
        if earlier is not None:  # every message it wrote was deleted since: the key is free
            conn.execute(Q["idem_drop"], {"sender": req.idempotency[0], "key": req.idempotency[1]})
    return collapsed(conn, req, _get)


def _insert(conn: sqlite3.Connection, req: InsertRequest) -> InsertResult:
    if len(req.messages) == 1 and len(req.check_recipients) <= 1 and req.idempotency is None:
        return _insert_one(conn, req)  # the common send: its reads in one statement
    return _insert_many(conn, req)


def _insert_many(conn: sqlite3.Connection, req: InsertRequest) -> InsertResult:
    earlier = _earlier(conn, req)
    if earlier is not None:
        return earlier
    for name in req.check_recipients:
        row = conn.execute(Q["agent_state"], {"name": name}).fetchone()
        req.check_recipient(name, row[0] if row else None)
    _check_unread_cap(conn, req)
    return _write_rows(conn, req)


def _insert_one(conn: sqlite3.Connection, req: InsertRequest) -> InsertResult:
    """``_insert`` of one message, at most one recipient checked, no idempotency key: the same
    checks in the same order, their three reads in one statement (``send_probe``)."""
    to = req.messages[0].to_agent
    digest, window_s = req.collapse if req.collapse is not None else (None, 0.0)
    checked = req.check_recipients[0] if req.check_recipients else None
    earlier_ids, state, full = conn.execute(
        Q["send_probe"],
        {
            "digest": digest,
            "since": checks.window_start(req.now, window_s),
            "to": checked,
            "cap_to": to if req.unread_max > 0 else None,
            "cap": req.unread_max,
        },
    ).fetchone()
    if earlier_ids is not None:
        earlier = collapse_into(conn, earlier_ids, _get)
        if earlier is not None:
            return earlier
    if checked is not None:
        req.check_recipient(checked, state)
    if full is not None:
        raise checks.inbox_full(to, req.unread_max)
    return _write_rows(conn, req)


def _write_rows(conn: sqlite3.Connection, req: InsertRequest) -> InsertResult:
    """The rest of an insert once its recipients passed: rate, thread guard, rows, loop guard."""
    _check_rate(conn, req)
    if trips_thread_guard(conn, req):
        return InsertResult(messages=(), held=True)
    for m in req.messages:
        conn.execute(Q["insert_message"], message_params(m))
    remember(conn, req)
    if not (req.nudges or req.idempotency):
        return InsertResult(messages=req.messages)
    stamp = iso_now(req.now)
    for agent, message_id, reason in req.nudges:
        nudge = {"agent": agent, "message_id": message_id, "reason": reason, "stamp": stamp}
        conn.execute(Q["nudge_put"], nudge)
    if req.idempotency is not None:
        sender, key, digest = req.idempotency
        ids = json.dumps([m.id for m in req.messages])
        params = {"sender": sender, "key": key, "digest": digest, "ids": ids, "stamp": stamp}
        conn.execute(Q["idem_put"], params)
    return InsertResult(messages=req.messages)


def _check_unread_cap(conn: sqlite3.Connection, req: InsertRequest) -> None:
    if req.unread_max <= 0:
        return
    for to in {m.to_agent for m in req.messages}:
        hit = conn.execute(Q["unread_count_reaches"], {"to": to, "cap": req.unread_max}).fetchone()
        if hit is not None:
            raise checks.inbox_full(to, req.unread_max)


def _check_rate(conn: sqlite3.Connection, req: InsertRequest) -> None:
    if req.rate_limit_max <= 0:
        return
    since = checks.window_start(req.now, req.rate_limit_window_s)
    trim = checks.rate_trim_before(req.now, req.rate_limit_window_s)
    conn.execute(Q["rate_trim"], {"before": trim})
    for m in req.messages:
        pair = {"from": m.from_agent, "to": m.to_agent}
        sent = conn.execute(Q["rate_count"], {**pair, "since": since}).fetchone()
        refusal = checks.rate_limited(
            m.from_agent, m.to_agent, sent[0], req.rate_limit_max, req.rate_limit_window_s
        )
        if refusal is not None:
            raise refusal
        conn.execute(Q["rate_insert"], {**pair, "at": req.now})


def _list_query(
    filters: dict[str, Any], unread: bool | None, limit: int | None
) -> tuple[str, list[Any]]:
    """``SELECT`` over messages with a ``WHERE`` of just the filters given, newest first."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in filters.items():
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if unread is not None:
        where.append("read = ?")
        params.append(0 if unread else 1)
    sql = "SELECT * FROM messages"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at DESC, id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return sql, params


def _purge_condition(older_than: str | None, agent: str | None) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if older_than is not None:
        where.append("created_at < ?")
        params.append(older_than)
    if agent is not None:
        where.append("(from_agent = ? OR to_agent = ?)")
        params += [agent, agent]
    return where, params


def _purge(conn: sqlite3.Connection, cond: str, params: list[Any]) -> int:
    conn.execute(
        f"DELETE FROM am_nudges WHERE message_id IN (SELECT id FROM messages WHERE {cond})",
        params,
    )
    n = conn.execute(f"DELETE FROM messages WHERE {cond}", params).rowcount
    # Deliveries left with no message at all are history nobody can act on; the sweep also
    # takes what other tools' deletions left behind.
    _sweep(conn)
    return int(n)


def _sweep(conn: sqlite3.Connection) -> int:
    return sum(
        int(conn.execute(Q[name]).rowcount)
        for name in (
            "orphans_nudges_delete",
            "deliveries_orphaned_delete",
            "orphans_idempotency_delete",
        )
    )


class SqliteMessages(SqliteTransactions):
    """The ``MailStore`` message operations on SQLite."""

    def insert(self, request: InsertRequest) -> InsertResult:
        result = self._write(lambda conn: _insert(conn, request))
        if self.overstory is not None and request.nudges and not result.duplicate:
            self.overstory.write_nudges(result.messages, request.nudges)
        return result

    def find_idempotent(self, sender: str, key: str, digest: str) -> InsertResult | None:
        return self._read_with(lambda conn: _find_idempotent(conn, sender, key, digest))

    def get_message(self, message_id: str) -> Message | None:
        rows = self._read(Q["get_message"], {"id": message_id})
        return message_from_row(rows[0]) if rows else None

    def inbox(self, agent: str, *, unread_only: bool = False) -> list[Message]:
        sql = Q["inbox_unread"] if unread_only else Q["inbox_all"]
        return [message_from_row(r) for r in self._read(sql, (agent,))]

    def take_unread(self, agent: str, *, max_chars: int = 0, ack: bool = True) -> list[Message]:
        def run(conn: sqlite3.Connection) -> list[Message]:
            rows = pull.take_unread_rows(conn, agent, max_chars)
            taken = [message_from_row(r) for r in rows]
            if ack and rows:
                pull.mark_read(conn, [r["id"] for r in rows], "pull")
                pull.mark_reached(conn, agent)
                taken = [replace(m, read=True) for m in taken]
            return taken

        taken = self._write(run)
        if self.overstory is not None and ack:
            self.overstory.clear_acked((m.to_agent, m.id) for m in taken)
        return taken

    def ack(self, message_ids: Sequence[str], *, by: str = "pull") -> list[str]:
        pairs = self._write(lambda conn: pull.mark_read_pairs(conn, list(message_ids), by))
        if self.overstory is not None:
            self.overstory.clear_acked((agent, mid) for mid, agent in pairs)
        return [mid for mid, _ in pairs]

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
        return [message_from_row(r) for r in self._read(Q["thread"], {"t": thread_id})]

    def purge(
        self, *, older_than: str | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        where, params = _purge_condition(older_than, agent)
        if not where and not everything:
            return 0
        cond = " AND ".join(where) if where else "1"
        return self._write(lambda conn: _purge(conn, cond, params))

    def sweep_orphans(self) -> int:
        return self._write(_sweep)

    def reset_rate_limit(self, from_agent: str, to_agent: str) -> int:
        return self._write(
            lambda c: int(c.execute(Q["rate_reset"], {"from": from_agent, "to": to_agent}).rowcount)
        )

    def take_nudges(self, agent: str) -> list[dict[str, Any]]:
        return self._write(lambda conn: [dict(r) for r in pull.take_nudge_rows(conn, agent)])
