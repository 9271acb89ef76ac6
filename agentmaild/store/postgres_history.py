"""The delivery history of the PostgreSQL store (the process journal is ``procs``)."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from agentmaild.ids import iso_now
from agentmaild.models import Attempt
from agentmaild.store.postgres_tx import PQ, Conn, PostgresTransactions, Row

_ERROR_MAX_CHARS = 2000


def _params(record: Attempt) -> dict[str, object]:
    return {
        "delivery_id": record.delivery_id,
        "agent": record.agent,
        "message_ids": Jsonb(list(record.message_ids)),
        "attempt": record.attempt,
        "outcome": record.outcome,
        "error": record.error[:_ERROR_MAX_CHARS] if record.error is not None else None,
        "duration_s": record.duration_s,
        "at": record.at,
    }


def _attempt(row: Row) -> Attempt:
    return Attempt(
        id=row["id"],
        delivery_id=row["delivery_id"],
        agent=row["agent"],
        message_ids=tuple(row["message_ids"]),
        attempt=row["attempt"],
        outcome=row["outcome"],
        error=row["error"],
        duration_s=row["duration_s"],
        at=row["at"],
    )


def insert_attempt(conn: Conn, record: Attempt) -> None:
    """Write ``record`` inside the caller's transaction without ever failing it (a savepoint)."""
    try:
        with conn.transaction():
            conn.execute(PQ["attempt_insert"], _params(record))
    except psycopg.Error as exc:
        unrecorded(record, str(exc))


def unrecorded(record: Attempt, error: str) -> None:
    """Log a history row that could not be written (the operation it belongs to went on)."""
    import structlog  # rare path: the CLI need not pay for structlog

    structlog.get_logger(__name__).warning(
        "store.attempt_unrecorded", delivery_id=record.delivery_id, error=error
    )


def ack_params(delivery_id: str, now: float, record: Attempt | None) -> dict[str, object]:
    """The named parameters of ``ack_one`` (``am_ack``, schemas 7 and 8)."""
    history: dict[str, object] = (
        {**_params(record), "record_id": record.delivery_id} if record is not None
        else dict.fromkeys(("record_id", "agent", "message_ids", "attempt", "outcome", "error",
                            "duration_s", "at"))
    )
    history.pop("delivery_id", None)
    return {"id": delivery_id, "stamp": iso_now(now), "reached_stamp": iso_now(),
            "record": record is not None, **history}


class PostgresHistory(PostgresTransactions):
    """The ``MailStore`` delivery-history operations on PostgreSQL."""

    def record_attempt(self, attempt: Attempt) -> None:
        self._write(lambda conn: conn.execute(PQ["attempt_insert"], _params(attempt)))

    def list_attempts(
        self,
        *,
        agent: str | None = None,
        message_id: str | None = None,
        since: float | None = None,
        limit: int | None = 100,
    ) -> list[Attempt]:
        params = {"agent": agent, "message": message_id, "since": since, "limit": limit}
        return [_attempt(r) for r in self._read(PQ["attempts_list"], params)]

    def purge_attempts(
        self, *, older_than: float | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0
        params = {"older": older_than, "agent": agent}
        return self._write(lambda conn: int(conn.execute(PQ["attempts_purge"], params).rowcount))
