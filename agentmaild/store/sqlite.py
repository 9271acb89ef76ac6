"""SqliteMailStore: the MailStore on one SQLite file (WAL), short BEGIN IMMEDIATE transactions."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from agentmaild.errors import Conflict, InboxFull, NotFound, RateLimited, StateError, StoreError
from agentmaild.ids import iso_now, new_id
from agentmaild.models import (
    STATE_TRANSITIONS,
    Agent,
    AgentCounts,
    Batch,
    DeadLetter,
    Message,
)
from agentmaild.store import pull
from agentmaild.store.base import (
    AGENT_MUTABLE_FIELDS,
    InsertRequest,
    InsertResult,
    MailStore,
    Released,
)
from agentmaild.store.migrate import migrate
from agentmaild.store.queries import Q

T = TypeVar("T")

# How long a writer keeps retrying SQLITE_BUSY beyond SQLite's own busy_timeout.
_BUSY_DEADLINE_S = 30.0
# Senders leave checkpoints to the daemon (which runs them every checkpoint_interval_s or when the
# WAL passes wal_checkpoint_pages); they only checkpoint themselves past this many pages (~40 MB),
# which happens when no daemon runs.
SENDER_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection with the three PRAGMAs every agentmaild connection sets."""
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=5.0, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {SENDER_AUTOCHECKPOINT_PAGES}")
    # When a checkpoint lets the WAL restart, cut the file back instead of keeping its peak.
    conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
    return conn


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def _message(row: sqlite3.Row) -> Message:
    keys = row.keys()
    return Message(
        id=row["id"],
        from_agent=row["from_agent"],
        to_agent=row["to_agent"],
        subject=row["subject"],
        body=row["body"],
        type=row["type"],
        priority=row["priority"],
        thread_id=row["thread_id"],
        payload=row["payload"],
        read=bool(row["read"]),
        created_at=row["created_at"],
        broadcast_id=row["broadcast_id"] if "broadcast_id" in keys else None,
        delivery_id=row["delivery_id"] if "delivery_id" in keys else None,
    )


def _agent(row: sqlite3.Row) -> Agent:
    return Agent(
        name=row["name"],
        capability=row["capability"],
        parent=row["parent"],
        state=row["state"],
        channel=row["channel"],
        command=tuple(json.loads(row["command"])) if row["command"] else None,
        cwd=row["cwd"],
        tmux_target=row["tmux_target"],
        tmux_socket=row["tmux_socket"],
        preset=row["preset"],
        session_id=row["session_id"],
        poll_interval_s=row["poll_interval_s"],
        settings=json.loads(row["settings"] or "{}"),
        turn_state=row["turn_state"],
        turn_state_at=row["turn_state_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _agent_params(agent: Agent) -> dict[str, Any]:
    d = agent.to_dict()
    d["command"] = json.dumps(list(agent.command)) if agent.command is not None else None
    d["settings"] = json.dumps(agent.settings)
    return d


class SqliteMailStore(MailStore):
    """The product store. One connection, used from one thread at a time."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = connect(self.path)
            self._conn.row_factory = sqlite3.Row
            self._retrying(lambda: migrate(self._conn))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"cannot open store {self.path}: {exc.strerror or exc}") from exc

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    def close(self) -> None:
        self._conn.close()

    # -- transaction plumbing ---------------------------------------------------------------
    def _retrying(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + _BUSY_DEADLINE_S
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        self._retrying(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def attempt() -> T:
            with self._tx() as conn:
                return fn(conn)

        try:
            return self._retrying(attempt)
        except sqlite3.Error as exc:
            raise StoreError(f"store write failed: {exc}") from exc

    def _read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        try:
            return self._retrying(lambda: self._conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise StoreError(f"store read failed: {exc}") from exc

    # -- messages ---------------------------------------------------------------------------
    def insert(self, request: InsertRequest) -> InsertResult:
        return self._write(lambda conn: self._insert(conn, request))

    def find_idempotent(self, sender: str, key: str, digest: str) -> InsertResult | None:
        def run() -> InsertResult | None:
            return self._idempotent(self._conn, sender, key, digest)

        try:
            return self._retrying(run)
        except sqlite3.Error as exc:
            raise StoreError(f"store read failed: {exc}") from exc

    def _idempotent(
        self, conn: sqlite3.Connection, sender: str, key: str, digest: str
    ) -> InsertResult | None:
        row = conn.execute(Q["idem_get"], (sender, key)).fetchone()
        if row is None:
            return None
        if row["content_hash"] != digest:
            raise Conflict(
                f"idempotency key {key!r} was already used by {sender} for other content"
            )
        found = [self._get(conn, i) for i in json.loads(row["message_ids"])]
        return InsertResult(messages=tuple(m for m in found if m is not None), duplicate=True)

    def _insert(self, conn: sqlite3.Connection, req: InsertRequest) -> InsertResult:
        if req.idempotency is not None:
            # Checked again inside the write transaction: two racing sends write once.
            earlier = self._idempotent(conn, *req.idempotency)
            if earlier is not None:
                return earlier
        self._check_limits(conn, req)
        for m in req.messages:
            conn.execute(
                Q["insert_message"],
                {
                    "id": m.id,
                    "from_agent": m.from_agent,
                    "to_agent": m.to_agent,
                    "subject": m.subject,
                    "body": m.body,
                    "type": m.type,
                    "priority": m.priority,
                    "thread_id": m.thread_id,
                    "payload": m.payload,
                    "created_at": m.created_at,
                    "broadcast_id": m.broadcast_id,
                },
            )
        stamp = iso_now(req.now)
        for agent, message_id, reason in req.nudges:
            conn.execute(Q["nudge_put"], (agent, message_id, reason, stamp))
        if req.idempotency is not None:
            sender, key, digest = req.idempotency
            ids = json.dumps([m.id for m in req.messages])
            conn.execute(Q["idem_put"], (sender, key, digest, ids, stamp))
        return InsertResult(messages=req.messages)

    def _check_limits(self, conn: sqlite3.Connection, req: InsertRequest) -> None:
        recipients = {m.to_agent for m in req.messages}
        if req.unread_max > 0:
            for to in recipients:
                hit = conn.execute(
                    Q["unread_count_reaches"], {"to": to, "cap": req.unread_max}
                ).fetchone()
                if hit is not None:
                    raise InboxFull(
                        f"inbox of {to} is full ({req.unread_max} unread); "
                        "retry once it reads its mail"
                    )
        if req.rate_limit_max > 0:
            since = req.now - req.rate_limit_window_s
            conn.execute(Q["rate_trim"], (since - req.rate_limit_window_s,))
            for m in req.messages:
                sent = conn.execute(Q["rate_count"], (m.from_agent, m.to_agent, since)).fetchone()
                if sent[0] >= req.rate_limit_max:
                    raise RateLimited(
                        f"rate limit: {m.from_agent}→{m.to_agent} sent {sent[0]} messages in the "
                        f"last {req.rate_limit_window_s:g}s (max {req.rate_limit_max})"
                    )
                conn.execute(Q["rate_insert"], (m.from_agent, m.to_agent, req.now))

    def _get(self, conn: sqlite3.Connection, message_id: str) -> Message | None:
        row = conn.execute(Q["get_message"], (message_id,)).fetchone()
        return _message(row) if row is not None else None

    def get_message(self, message_id: str) -> Message | None:
        rows = self._read(Q["get_message"], (message_id,))
        return _message(rows[0]) if rows else None

    def inbox(self, agent: str, *, unread_only: bool = False) -> list[Message]:
        sql = Q["inbox_unread"] if unread_only else Q["inbox_all"]
        return [_message(r) for r in self._read(sql, (agent,))]

    def take_unread(self, agent: str, *, max_chars: int = 0, ack: bool = True) -> list[Message]:
        def run(conn: sqlite3.Connection) -> list[Message]:
            rows = pull.take_unread_rows(conn, agent, max_chars)
            if ack and rows:
                pull.mark_read(conn, [r["id"] for r in rows], "pull")
            return [_message(r) for r in rows]

        return self._write(run)

    def ack(self, message_ids: Sequence[str], *, by: str = "pull") -> list[str]:
        return self._write(lambda conn: pull.mark_read(conn, list(message_ids), by))

    def list_messages(
        self,
        *,
        from_agent: str | None = None,
        to_agent: str | None = None,
        type: str | None = None,
        unread: bool | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("from_agent", from_agent), ("to_agent", to_agent), ("type", type)):
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
        return [_message(r) for r in self._read(sql, params)]

    def thread(self, thread_id: str) -> list[Message]:
        return [_message(r) for r in self._read(Q["thread"], {"t": thread_id})]

    def purge(
        self, *, older_than: str | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        where: list[str] = []
        params: list[Any] = []
        if older_than is not None:
            where.append("created_at < ?")
            params.append(older_than)
        if agent is not None:
            where.append("(from_agent = ? OR to_agent = ?)")
            params += [agent, agent]
        if not where and not everything:
            return 0
        cond = " AND ".join(where) if where else "1"

        def run(conn: sqlite3.Connection) -> int:
            conn.execute(
                f"DELETE FROM am_nudges WHERE message_id IN (SELECT id FROM messages WHERE {cond})",
                params,
            )
            n = conn.execute(f"DELETE FROM messages WHERE {cond}", params).rowcount
            # Deliveries left with no message at all are history nobody can act on.
            conn.execute(
                "DELETE FROM am_deliveries WHERE state != 'claimed' AND NOT EXISTS "
                "(SELECT 1 FROM messages m WHERE m.delivery_id = am_deliveries.id)"
            )
            return int(n)

        return self._write(run)

    def reset_rate_limit(self, from_agent: str, to_agent: str) -> int:
        return self._write(
            lambda c: int(c.execute(Q["rate_reset"], (from_agent, to_agent)).rowcount)
        )

    def take_nudges(self, agent: str) -> list[dict[str, Any]]:
        return self._write(lambda conn: [dict(r) for r in pull.take_nudge_rows(conn, agent)])

    # -- agents -----------------------------------------------------------------------------
    def add_agent(self, agent: Agent) -> Agent:
        stamp = iso_now()
        stored = Agent(
            **{
                **agent.to_dict(),
                "command": agent.command,
                "created_at": stamp,
                "updated_at": stamp,
            }
        )

        def run(conn: sqlite3.Connection) -> Agent:
            if conn.execute(Q["agent_get"], (agent.name,)).fetchone() is not None:
                raise Conflict(f"agent {agent.name!r} already exists")
            conn.execute(Q["agent_insert"], _agent_params(stored))
            return stored

        return self._write(run)

    def get_agent(self, name: str) -> Agent | None:
        rows = self._read(Q["agent_get"], (name,))
        return _agent(rows[0]) if rows else None

    def list_agents(self) -> list[Agent]:
        return [_agent(r) for r in self._read(Q["agent_list"])]

    def update_agent(self, name: str, changes: dict[str, Any]) -> Agent:
        bad = set(changes) - AGENT_MUTABLE_FIELDS
        if bad:
            raise StoreError(f"cannot change agent field(s): {', '.join(sorted(bad))}")

        def run(conn: sqlite3.Connection) -> Agent:
            row = conn.execute(Q["agent_get"], (name,)).fetchone()
            if row is None:
                raise NotFound(f"no agent named {name!r}")
            current = _agent(row)
            merged = {**current.to_dict(), **changes, "updated_at": iso_now()}
            if "turn_state" in changes:
                merged["turn_state_at"] = merged["updated_at"]
            merged["command"] = tuple(merged["command"]) if merged["command"] is not None else None
            agent = Agent(**merged)
            params = _agent_params(agent)
            sets = ", ".join(
                f"{k} = :{k}" for k in (*AGENT_MUTABLE_FIELDS, "turn_state_at", "updated_at")
            )
            conn.execute(f"UPDATE am_agents SET {sets} WHERE name = :name", params)
            return agent

        return self._write(run)

    def set_agent_state(self, name: str, state: str, *, force: bool = False) -> Agent:
        def run(conn: sqlite3.Connection) -> Agent:
            row = conn.execute(Q["agent_get"], (name,)).fetchone()
            if row is None:
                raise NotFound(f"no agent named {name!r}")
            current = row["state"]
            if state not in STATE_TRANSITIONS:
                raise StateError(f"unknown state {state!r}")
            if not force and current != state and state not in STATE_TRANSITIONS[current]:
                allowed = ", ".join(sorted(STATE_TRANSITIONS[current]))
                raise StateError(
                    f"agent {name}: cannot go from {current} to {state} (allowed: {allowed})"
                )
            conn.execute(
                "UPDATE am_agents SET state = ?, updated_at = ? WHERE name = ?",
                (state, iso_now(), name),
            )
            return _agent(conn.execute(Q["agent_get"], (name,)).fetchone())

        return self._write(run)

    def remove_agent(self, name: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            if conn.execute(Q["agent_delete"], (name,)).rowcount == 0:
                raise NotFound(f"no agent named {name!r}")

        self._write(run)

    # -- deliveries -------------------------------------------------------------------------
    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        return self._write(
            lambda conn: self._claim(conn, agent, max_messages, max_chars, lease_s, now)
        )

    def _claim(
        self,
        conn: sqlite3.Connection,
        agent: str,
        max_messages: int,
        max_chars: int,
        lease_s: float,
        now: float,
    ) -> Batch | None:
        if conn.execute(Q["claim_active"], (agent, now)).fetchone() is not None:
            return None
        lease_until = now + lease_s
        stamp = iso_now(now)
        while (
            pending := conn.execute(Q["claim_pending_delivery"], (agent,)).fetchone()
        ) is not None:
            messages = [_message(r) for r in conn.execute(Q["delivery_unread"], (pending["id"],))]
            if not messages:
                # Everything in it was read another way (pull, hook): nothing left to redeliver.
                conn.execute(Q["delivery_set_state"], ("acked", stamp, pending["id"]))
                continue
            attempts = conn.execute(
                Q["delivery_mark_claimed"], (lease_until, stamp, pending["id"])
            ).fetchone()[0]
            return Batch(
                delivery_id=pending["id"],
                agent=agent,
                messages=tuple(replace(m, delivery_id=pending["id"]) for m in messages),
                attempt=attempts,
                lease_until=lease_until,
            )
        chosen: list[Message] = []
        used = 0
        for row in conn.execute(Q["claim_candidates"], (agent, max_messages)).fetchall():
            m = _message(row)
            if chosen and used + m.size > max_chars:
                break
            chosen.append(m)
            used += m.size
        if not chosen:
            return None
        delivery_id = new_id("dlv")
        conn.execute(Q["delivery_insert"], (delivery_id, agent, lease_until, stamp, stamp))
        marks = ",".join("?" * len(chosen))
        conn.execute(
            f"UPDATE messages SET delivery_id = ? WHERE id IN ({marks})",
            (delivery_id, *(m.id for m in chosen)),
        )
        return Batch(
            delivery_id=delivery_id,
            agent=agent,
            messages=tuple(replace(m, delivery_id=delivery_id) for m in chosen),
            attempt=1,
            lease_until=lease_until,
        )

    def ack_delivery(self, delivery_id: str, *, now: float) -> int:
        def run(conn: sqlite3.Connection) -> int:
            stamp = iso_now(now)
            rows = conn.execute(
                "UPDATE messages SET read = 1, acked_at = ?, acked_by = ? "
                "WHERE delivery_id = ? AND read = 0 RETURNING id, to_agent",
                (stamp, delivery_id, delivery_id),
            ).fetchall()
            for r in rows:
                conn.execute(
                    "DELETE FROM am_nudges WHERE agent = ? AND message_id = ?",
                    (r["to_agent"], r["id"]),
                )
            conn.execute(Q["delivery_ack"], (stamp, delivery_id))
            return len(rows)

        return self._write(run)

    def release(
        self, delivery_id: str, *, error: str, max_attempts: int, now: float, count: int = 1
    ) -> Released:
        def run(conn: sqlite3.Connection) -> Released:
            row = conn.execute(
                Q["delivery_release"],
                {
                    "id": delivery_id,
                    "count": count,
                    "max_attempts": max_attempts,
                    "error": error[:2000],
                    "now": iso_now(now),
                },
            ).fetchone()
            if row is None:
                raise NotFound(f"no claimed delivery {delivery_id}")
            messages: tuple[Message, ...] = ()
            if row["state"] == "dead":
                messages = tuple(
                    _message(r) for r in conn.execute(Q["delivery_unread"], (delivery_id,))
                )
            return Released(state=row["state"], failures=row["failures"], messages=messages)

        return self._write(run)

    def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool:
        return self._write(
            lambda c: (
                c.execute(
                    "UPDATE am_deliveries SET lease_until = ? WHERE id = ? AND state = 'claimed'",
                    (now + lease_s, delivery_id),
                ).rowcount
                == 1
            )
        )

    def reap_expired(self, *, now: float, everything: bool = False) -> list[tuple[str, str]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            params = {"stamp": iso_now(now), "now": now, "everything": int(everything)}
            rows = conn.execute(Q["deliveries_expired"], params).fetchall()
            return sorted((r["id"], r["agent"]) for r in rows)

        return self._write(run)

    def dead_letters(self, agent: str | None = None) -> list[DeadLetter]:
        rows = self._read(Q["dead_list_agent"], (agent,)) if agent else self._read(Q["dead_list"])
        out = []
        for r in rows:
            ids = tuple(x["id"] for x in self._read(Q["delivery_message_ids"], (r["id"],)))
            out.append(
                DeadLetter(
                    delivery_id=r["id"],
                    agent=r["agent"],
                    message_ids=ids,
                    attempts=r["attempts"],
                    last_error=r["last_error"],
                    dead_at=r["updated_at"],
                )
            )
        return out

    def retry_dead(self, *, agent: str | None = None, delivery_id: str | None = None) -> list[str]:
        return self._write(
            lambda c: [
                r["id"]
                for r in c.execute(
                    Q["retry_dead"], {"now": iso_now(), "agent": agent, "id": delivery_id}
                ).fetchall()
            ]
        )

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
