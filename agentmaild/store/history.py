"""The delivery history, written once over the connector: ``am_attempts`` rows written (alone,
or inside an ack's or a release's transaction without ever failing it), listed and purged."""

from __future__ import annotations

from collections.abc import Callable

from agentmaild.models import Attempt
from agentmaild.store.connector import OverConnector, Row, Tx

_ERROR_MAX_CHARS = 2000


def attempt_params(record: Attempt, json: Callable[[object], object]) -> dict[str, object]:
    """The named parameters of ``attempt_insert``, the id list through the dialect's ``json``."""
    return {
        "delivery_id": record.delivery_id,
        "agent": record.agent,
        "message_ids": json(list(record.message_ids)),
        "attempt": record.attempt,
        "outcome": record.outcome,
        "error": record.error[:_ERROR_MAX_CHARS] if record.error is not None else None,
        "duration_s": record.duration_s,
        "at": record.at,
    }


def _from_row(tx: Tx, row: Row) -> Attempt:
    return Attempt(
        id=row["id"],
        delivery_id=row["delivery_id"],
        agent=row["agent"],
        message_ids=tuple(tx.from_json(row["message_ids"])),
        attempt=row["attempt"],
        outcome=row["outcome"],
        error=row["error"],
        duration_s=row["duration_s"],
        at=row["at"],
    )


def insert_attempt(tx: Tx, record: Attempt) -> None:
    """Write ``record`` inside the caller's transaction without ever failing it: the history
    rides along with an ack or a release, and a row that cannot be written is rolled back to its
    savepoint and logged while the ack or release still commits."""
    error = tx.savepoint(
        lambda part: part.execute("attempt_insert", attempt_params(record, part.json))
    )
    if error is not None:
        unrecorded(record, error)


def unrecorded(record: Attempt, error: str) -> None:
    """Log a history row that could not be written (the operation it belongs to went on)."""
    import structlog  # rare path: the CLI imports this module and need not pay for structlog

    structlog.get_logger(__name__).warning(
        "store.attempt_unrecorded", delivery_id=record.delivery_id, error=error
    )


class StoreHistory(OverConnector):
    """The ``MailStore`` delivery-history operations, for every SQL store."""

    def record_attempt(self, attempt: Attempt) -> None:
        self.db.write(lambda tx: tx.execute("attempt_insert", attempt_params(attempt, tx.json)))

    def list_attempts(
        self,
        *,
        agent: str | None = None,
        message_id: str | None = None,
        since: float | None = None,
        limit: int | None = 100,
    ) -> list[Attempt]:
        params = {"agent": agent, "message": message_id, "since": since, "limit": limit}
        return self.db.read(
            lambda tx: [_from_row(tx, r) for r in tx.fetch_all("attempts_list", params)]
        )

    def purge_attempts(
        self, *, older_than: float | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0
        params = {"older": older_than, "agent": agent}

        def run(tx: Tx) -> int:
            tx.execute("usage_purge", params)  # what the attempts cost goes with them
            return tx.execute("attempts_purge", params)

        return self.db.write(run)
