"""The message operations, written once over the connector: the send (``send``), reads, the pull
side's take and ack, purges and the housekeeping sweep.

A send takes the dialect's one-statement form when the connector offers it (``send_one``:
PostgreSQL's ``am_send_one``) and the send is one it covers; that form writes only when every
check passes, so anything else — a refusal, a collapse, a full inbox — runs the general send,
which answers as it always does. Overstory's banners (a SQLite store in Overstory mode) are told
of nudges and acks once the write returned.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agentmaild.ids import iso_now
from agentmaild.models import Message
from agentmaild.store import send
from agentmaild.store.connector import OverConnector, Tx
from agentmaild.store.pull import within
from agentmaild.store.records import InsertRequest, InsertResult
from agentmaild.store.rows import message_from_row

_ORPHANS = ("orphans_nudges_delete", "deliveries_orphaned_delete", "orphans_idempotency_delete")


def mark_read(tx: Tx, ids: Sequence[str], by: str) -> list[tuple[str, str]]:
    """Mark ``ids`` read (when, by whom) and drop their nudges; ``(id, recipient)`` of each
    message that changed."""
    if not ids:
        return []
    rows = tx.fetch_all("mark_read", {"ids": tx.array(ids), "stamp": iso_now(), "by": by})
    done = [(str(r["id"]), str(r["to_agent"])) for r in rows]
    if done:
        tx.execute_many("nudge_drop", [{"agent": to, "message_id": i} for i, to in done])
    return done


def mark_reached(tx: Tx, agent: str) -> None:
    """The agent took mail: a registration still ``booting`` becomes ``working``."""
    tx.execute("agent_reached", {"agent": agent, "stamp": iso_now()})


def _take_unread(tx: Tx, agent: str, max_chars: int, ack: bool) -> list[Message]:
    tx.lock(f"agent:{agent}")  # serialised with the daemon's claims for this agent
    rows = within(tx.fetch_all("pull_candidates", {"agent": agent}), max_chars)
    taken = [message_from_row(r) for r in rows]
    if ack and taken:
        done = {i for i, _ in mark_read(tx, [m.id for m in taken], "pull")}
        mark_reached(tx, agent)
        taken = [replace(m, read=True) for m in taken if m.id in done]
    return taken


def _purge(tx: Tx, params: dict[str, Any]) -> int:
    tx.execute("purge_nudges", params)
    n = tx.execute("purge_messages", params)
    # Deliveries left with no message at all are history nobody can act on; the sweep also
    # takes what other tools' deletions left behind.
    _sweep(tx)
    return n


def _sweep(tx: Tx) -> int:
    return sum(tx.execute(name) for name in _ORPHANS)


def _take_nudges(tx: Tx, agent: str) -> list[dict[str, Any]]:
    rows = [dict(r) for r in tx.fetch_all("nudges_for", {"agent": agent})]
    tx.execute("nudges_clear", {"agent": agent})
    return rows


class StoreMessages(OverConnector):
    """The ``MailStore`` message operations, for every SQL store."""

    overstory: Any = None

    def insert(self, request: InsertRequest) -> InsertResult:
        result = self._sent_in_one(request)
        if result is None:
            result = self.db.write(lambda tx: send.insert(tx, request), pipeline=True)
        if self.overstory is not None and request.nudges and not result.duplicate:
            self.overstory.write_nudges(result.messages, request.nudges)
        return result

    def _sent_in_one(self, request: InsertRequest) -> InsertResult | None:
        """The send in one statement, where the dialect has it and it covers ``request``."""
        if not self.db.offers("send_one"):
            return None
        params = send.send_one_params(request)
        if params is None:
            return None
        row = self.db.single("send_one", params)
        sent = row is not None and row["outcome"] == "sent"
        return InsertResult(messages=request.messages) if sent else None

    def find_idempotent(self, sender: str, key: str, digest: str) -> InsertResult | None:
        return self.db.read(lambda tx: send.find_idempotent(tx, sender, key, digest))

    def get_message(self, message_id: str) -> Message | None:
        row = self.db.fetch_one("get_message", {"id": message_id})
        return message_from_row(row) if row is not None else None

    def unread_among(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        rows = self.db.read(lambda tx: tx.fetch_all("unread_among", {"ids": tx.array(ids)}))
        return {str(r["id"]) for r in rows}

    def inbox(self, agent: str, *, unread_only: bool = False) -> list[Message]:
        name = "inbox_unread" if unread_only else "inbox_all"
        return [message_from_row(r) for r in self.db.fetch_all(name, {"agent": agent})]

    def take_unread(self, agent: str, *, max_chars: int = 0, ack: bool = True) -> list[Message]:
        taken = self.db.write(lambda tx: _take_unread(tx, agent, max_chars, ack))
        if self.overstory is not None and ack:
            self.overstory.clear_acked((m.to_agent, m.id) for m in taken)
        return taken

    def ack(self, message_ids: Sequence[str], *, by: str = "pull") -> list[str]:
        pairs = self.db.write(lambda tx: mark_read(tx, list(message_ids), by), pipeline=True)
        if self.overstory is not None:
            self.overstory.clear_acked((agent, mid) for mid, agent in pairs)
        return [mid for mid, _ in pairs]

    def list_messages(
        self, *, from_agent: str | None = None, to_agent: str | None = None,
        type: str | None = None, unread: bool | None = None, limit: int | None = None,
    ) -> list[Message]:  # fmt: skip
        read = None if unread is None else 0 if unread else 1
        params = {"from_agent": from_agent, "to_agent": to_agent, "type": type, "read": read,
                  "limit": sys.maxsize if limit is None else limit}  # fmt: skip
        return [message_from_row(r) for r in self.db.fetch_all("list_messages", params)]

    def thread(self, thread_id: str) -> list[Message]:
        return [message_from_row(r) for r in self.db.fetch_all("thread", {"t": thread_id})]

    def purge(
        self, *, older_than: str | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0
        return self.db.write(lambda tx: _purge(tx, {"older": older_than, "agent": agent}))

    def sweep_orphans(self) -> int:
        return self.db.write(_sweep)

    def reset_rate_limit(self, from_agent: str, to_agent: str) -> int:
        params = {"from": from_agent, "to": to_agent}
        return self.db.write(lambda tx: tx.execute("rate_reset", params))

    def take_nudges(self, agent: str) -> list[dict[str, Any]]:
        return self.db.write(lambda tx: _take_nudges(tx, agent))
