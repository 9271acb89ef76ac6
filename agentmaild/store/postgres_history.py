"""The history row of PostgreSQL's one-statement ack (``am_ack``): its parameters. The history
itself is written once, in ``history``."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from agentmaild.ids import iso_now
from agentmaild.models import Attempt
from agentmaild.store.history import attempt_params


def ack_params(delivery_id: str, now: float, record: Attempt | None) -> dict[str, object]:
    """The named parameters of ``ack_one`` (``am_ack``, schemas 7 and 8)."""
    history: dict[str, object] = (
        {**attempt_params(record, Jsonb), "record_id": record.delivery_id} if record is not None
        else dict.fromkeys(("record_id", "agent", "message_ids", "attempt", "outcome", "error",
                            "duration_s", "at"))
    )
    history.pop("delivery_id", None)
    return {"id": delivery_id, "stamp": iso_now(now), "reached_stamp": iso_now(),
            "record": record is not None, **history}
