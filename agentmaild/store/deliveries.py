"""The deliveries' bookkeeping, written once over the connector: a release (back to pending, or
dead), lease extensions, reaping expired leases, dead letters and their retry, and the figures
(agents with mail to claim, per-agent counts, totals). The claim and the ack, each backend's
tuned hot path, stay in ``sqlite_deliveries`` and ``postgres_deliveries``."""

from __future__ import annotations

from agentmaild.errors import NotFound
from agentmaild.ids import iso_now
from agentmaild.models import AgentCounts, Attempt, DeadLetter, Message
from agentmaild.store.connector import OverConnector, Tx
from agentmaild.store.history import insert_attempt
from agentmaild.store.records import Released, with_outcome
from agentmaild.store.rows import dead_letter_from_row, message_from_row

_ERROR_MAX_CHARS = 2000


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
    """The ``MailStore`` delivery operations besides the claim and the ack, for every SQL store."""

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
