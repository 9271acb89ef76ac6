"""Mail of a claimed batch that another tool read meanwhile (the race with ``ov mail check``).

Overstory's ``mail check`` marks mail read without knowing our claims, so it can take a message
the daemon has already leased. Just before injecting, the loop looks again: what was read (or
deleted) elsewhere is left out of the text, which says so in a note, and a batch with nothing left
is acked without a turn. The ack records such messages as ``acked_by = 'elsewhere'``. A read in
the moment between this look and the injection can still reach the agent twice; the REDELIVERY
rule applies to it as to any duplicate: the note and the message id let the agent see it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentmaild.models import Batch, Message

if TYPE_CHECKING:
    from agentmaild.store.aio import AsyncMailStore


async def split_read_elsewhere(
    store: AsyncMailStore, batch: Batch
) -> tuple[tuple[Message, ...], list[str]]:
    """The batch's messages still unread, and the ids of those read or deleted elsewhere."""
    ids = [m.id for m in batch.messages]
    unread = await store.unread_among(ids)
    kept = tuple(m for m in batch.messages if m.id in unread)
    return kept, [i for i in ids if i not in unread]


def note(gone: list[str]) -> str:
    return (
        f"[agentmail] note: {len(gone)} message(s) of this batch were read elsewhere (e.g. by "
        f"`ov mail check`) after the daemon queued them, so they are not repeated here: "
        + ", ".join(gone)
    )
