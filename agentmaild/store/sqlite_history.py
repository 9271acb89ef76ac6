"""The delivery history of the SQLite store: ``am_attempts`` rows written, listed and purged."""

from __future__ import annotations

import json
import sqlite3

from agentmaild.models import Attempt
from agentmaild.store.queries import Q
from agentmaild.store.sqlite_tx import SqliteTransactions

_ERROR_MAX_CHARS = 2000


def _params(record: Attempt) -> dict[str, object]:
    return {
        "delivery_id": record.delivery_id,
        "agent": record.agent,
        "message_ids": json.dumps(list(record.message_ids)),
        "attempt": record.attempt,
        "outcome": record.outcome,
        "error": record.error[:_ERROR_MAX_CHARS] if record.error is not None else None,
        "duration_s": record.duration_s,
        "at": record.at,
    }


def _from_row(row: sqlite3.Row) -> Attempt:
    return Attempt(
        id=row["id"],
        delivery_id=row["delivery_id"],
        agent=row["agent"],
        message_ids=tuple(json.loads(row["message_ids"])),
        attempt=row["attempt"],
        outcome=row["outcome"],
        error=row["error"],
        duration_s=row["duration_s"],
        at=row["at"],
    )


def insert_attempt(conn: sqlite3.Connection, record: Attempt) -> None:
    """Write ``record`` inside the caller's transaction without ever failing it.

    The history rides along with an ack or a release: a row that cannot be written is rolled back
    to its savepoint and logged, and the ack or release still commits.
    """
    conn.execute("SAVEPOINT am_attempt")
    try:
        conn.execute(Q["attempt_insert"], _params(record))
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK TO am_attempt")
        conn.execute("RELEASE am_attempt")
        import structlog  # rare path: the CLI imports this module and need not pay for structlog

        structlog.get_logger(__name__).warning(
            "store.attempt_unrecorded", delivery_id=record.delivery_id, error=str(exc)
        )
        return
    conn.execute("RELEASE am_attempt")


class SqliteHistory(SqliteTransactions):
    """The ``MailStore`` delivery-history operations on SQLite."""

    def record_attempt(self, attempt: Attempt) -> None:
        self._write(lambda conn: conn.execute(Q["attempt_insert"], _params(attempt)))

    def list_attempts(
        self,
        *,
        agent: str | None = None,
        message_id: str | None = None,
        since: float | None = None,
        limit: int | None = 100,
    ) -> list[Attempt]:
        params = {
            "agent": agent,
            "message": message_id,
            "since": since,
            "limit": -1 if limit is None else limit,
        }
        return [_from_row(r) for r in self._read(Q["attempts_list"], params)]

    def purge_attempts(
        self, *, older_than: float | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0
        params = {"older": older_than, "agent": agent}
        return self._write(lambda conn: int(conn.execute(Q["attempts_purge"], params).rowcount))
