"""The deliveries, written once over the connector: the claim and the ack (their transactions in
``claim``; a dialect's one-statement form through ``Connector.one_statement``), a release (back
to pending, or dead), lease extensions, reaping expired leases, dead letters and their retry, and
the figures (agents with mail to claim, per-agent counts, totals)."""

from __future__ import annotations

from typing import Any

from agentmaild.errors import NotFound
from agentmaild.ids import iso_now
from agentmaild.models import AgentCounts, Attempt, Batch, DeadLetter, Message
from agentmaild.store.claim import (
    Claimed,
    ack_in,
    ack_params,
    acked_at_once,
    claim_at_once,
    claim_in,
    claim_params,
    needs_general,
)
from agentmaild.store.connector import OverConnector, Tx
from agentmaild.store.history import insert_attempt
from agentmaild.store.records import Released, with_outcome
from agentmaild.store.rows import dead_letter_from_row, message_from_row

_ERROR_MAX_CHARS = 2000
_DRAINED_MAX = 1024


def _release(
    tx: Tx, delivery_id: str, params: dict[str, object], record: Attempt | None
) -> Released:
    row = tx.fetch_one("delivery_release", {"id": delivery_id, **params})
    if row is None:
        raise NotFound(f"no claimed delivery {delivery_id}")
    messages: tuple[Message, ...] = ()
    if row["state"] == "dead":
        unread = tx.fetch_all("delivery_unread", {"id": delivery_id})
        messages = tuple(message_from_row(r) for r in unread)
    record = with_outcome(record, row["state"])
    if record is not None:
        insert_attempt(tx, record)
    return Released(state=row["state"], failures=row["failures"], messages=messages)


def _dead_letters(tx: Tx, agent: str | None) -> list[DeadLetter]:
    letters = []
    for row in tx.fetch_all("dead_list", {"agent": agent}):
        ids = tx.fetch_all("delivery_message_ids", {"id": row["id"]})
        letters.append(dead_letter_from_row(row, tuple(r["id"] for r in ids)))
    return letters


def _counts(tx: Tx) -> dict[str, AgentCounts]:
    figures: dict[str, dict[str, int]] = {}
    for r in tx.fetch_all("count_unread"):
        figures.setdefault(r["to_agent"], {})["unread"] = int(r["n"])
    for r in tx.fetch_all("count_deliveries"):
        key = "in_flight" if r["state"] == "claimed" else "dead_letters"
        figures.setdefault(r["agent"], {})[key] = int(r["n"])
    return {a: AgentCounts(agent=a, **f) for a, f in figures.items()}


class StoreDeliveries(OverConnector):
    """The ``MailStore`` delivery operations, for every SQL store.

    ``drained``: ids of batches whose claim saw nothing else claimable for the agent (no more
    direct mail, no queue); the daemon's loop then waits for a wake-up instead of claiming again
    (``AsyncMailStore.more_after`` takes them out). ``deferred``: agents whose last claim left
    waiting queue work to members ahead in the queue's turn, and in how many seconds to claim
    again (``AsyncMailStore.retry_after`` takes them out). ``overstory``: the Overstory link
    (SQLite's Overstory mode), told of each ack's messages after commit.
    """

    drained: set[str]
    deferred: dict[str, float]
    overstory: Any = None

    def claim(
        self, agent: str, *, max_messages: int, max_chars: int, lease_s: float, now: float
    ) -> Batch | None:
        """The dialect's one-statement claim when it has one and it sufficed; else the general
        claim (``claim.claim_in``): no such statement, or a queue member with no mail of its own.
        """
        p = claim_params(agent, max_messages=max_messages, max_chars=max_chars, lease_s=lease_s,
                         now=now)  # fmt: skip
        at_once = self.db.one_statement("claim_one")
        rows = at_once(p) if at_once is not None else None
        if rows is None or needs_general(rows):
            return self.claim_general(p)
        return self.note_claimed(agent, claim_at_once(agent, rows, p["lease_until"]))

    def claim_general(self, p: dict[str, Any]) -> Batch | None:
        """The claim of ``claim_params`` ``p`` as one transaction of named queries (PostgreSQL:
        in pipeline mode, BEGIN, the agent's lock and the probe in one round trip)."""
        claimed = self.db.write(lambda tx: claim_in(tx, p), pipeline=True)
        return self.note_claimed(p["agent"], claimed)

    def note_claimed(self, agent: str, claimed: Claimed) -> Batch | None:
        """The batch, its id kept in ``drained`` once committed when its claim left nothing;
        with no batch, the agent kept in ``deferred`` when it is to claim again soon."""
        batch = claimed.batch
        if batch is not None and not claimed.more:
            delivery_id = batch.delivery_id
            self.db.after_commit(lambda: self._drained(delivery_id))
        elif batch is None and claimed.retry_s is not None:
            retry_s = claimed.retry_s
            self.db.after_commit(lambda: self._deferred(agent, retry_s))
        return batch

    def _deferred(self, agent: str, retry_s: float) -> None:
        if len(self.deferred) >= _DRAINED_MAX:  # agents nobody asked about
            self.deferred.clear()
        self.deferred[agent] = retry_s

    def _drained(self, delivery_id: str) -> None:
        if len(self.drained) >= _DRAINED_MAX:  # claims nobody asked about (pull consumers)
            self.drained.clear()
        self.drained.add(delivery_id)

    def ack_delivery(self, delivery_id: str, *, now: float, record: Attempt | None = None) -> int:
        """The dialect's one-statement ack when it has one; else the general ack. An Overstory
        link must know which messages were acked, which only the general ack answers."""
        link = self.overstory
        at_once = self.db.one_statement("ack_one") if link is None else None
        if at_once is not None:
            return acked_at_once(at_once(ack_params(delivery_id, now, record))[0], record)
        rows = self.db.write(lambda tx: ack_in(tx, delivery_id, now, record))
        if link is not None:
            acked = [(r["to_agent"], r["id"]) for r in rows]
            self.db.after_commit(lambda: link.clear_acked(acked))
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
            "error": error[:_ERROR_MAX_CHARS],
            "now": iso_now(now),
        }
        return self.db.write(lambda tx: _release(tx, delivery_id, params, record))

    def attach_to_delivery(self, message_id: str, delivery_id: str, agent: str) -> bool:
        params = {"delivery": delivery_id, "id": message_id, "agent": agent}
        return self.db.write(lambda tx: tx.execute("delivery_attach", params)) == 1

    def extend_lease(self, delivery_id: str, *, lease_s: float, now: float) -> bool:
        params = {"until": now + lease_s, "id": delivery_id}
        return self.db.write(lambda tx: tx.execute("delivery_extend_lease", params)) == 1

    def reap_expired(
        self,
        *,
        now: float,
        everything: bool = False,
        host: str | None = None,
        agent: str | None = None,
    ) -> list[tuple[str, str]]:
        params = {"stamp": iso_now(now), "now": now, "everything": everything, "host": host,
                  "agent": agent}  # fmt: skip
        rows = self.db.write(lambda tx: tx.fetch_all("deliveries_expired", params))
        return sorted((r["id"], r["agent"]) for r in rows)

    def dead_letters(self, agent: str | None = None) -> list[DeadLetter]:
        return self.db.read(lambda tx: _dead_letters(tx, agent or None))

    def retry_dead(self, *, agent: str | None = None, delivery_id: str | None = None) -> list[str]:
        params = {"now": iso_now(), "agent": agent, "id": delivery_id}
        return [r["id"] for r in self.db.write(lambda tx: tx.fetch_all("retry_dead", params))]

    def pending_agents(self) -> set[str]:
        return {str(r["to_agent"]) for r in self.db.fetch_all("pending_agents")}

    def counts(self) -> dict[str, AgentCounts]:
        return self.db.read(_counts)

    def totals(self) -> dict[str, int]:
        row = self.db.fetch_one("count_messages")
        assert row is not None  # an aggregate: always one row
        return {"messages": int(row["total"]), "unread": int(row["unread"])}
