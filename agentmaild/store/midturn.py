"""The delivery's open and close, and the mid-turn claim built on them (stdlib only).

A delivery opens with a row in ``am_deliveries`` and its messages marked as its own
(``open_delivery``: the general claim, ``claim.claim_in``, opens every batch so), and closes with
its messages read by it and its history row (``close_delivery``: ``claim.ack_in`` closes so).

Mid-turn delivery (``[delivery] mid_turn_priority``) claims through the same pair, inside one
write of the caller's: ``mid_turn_rows`` finds the mail the policy lets into a running turn
(unread, in no delivery yet, urgent enough, never ``interrupt`` mail: that opens the next turn);
the caller renders what fits under a delivery id of its own, ``mid_turn_claim`` opens that
delivery, the caller hands the text to the turn (the hook's output, Codex's ``turn/steer``), and
``mid_turn_ack`` closes it with the outcome ``mid-turn`` in the history (``mid_turn_undo`` gives
a refused batch back; a daemon that dies before either leaves a claimed delivery, which crash
recovery redelivers under its id like any other). A message so claimed is
in a delivery, so the daemon's claim (``delivery_id IS NULL``) and the pull side
(``pull_candidates``) never take it again: the hook and the daemon never deliver it twice.

``tx`` is anything with the connector's ``Tx`` calls used here (``execute``, ``fetch_all``,
``fetch_one``, ``json``, ``lock``): the store's own transactions, or the cold paths' port.
Loaded by the hook on PostToolUse, so stdlib only (no models, no dataclasses).
"""

from __future__ import annotations

import time

from agentmaild.ids import iso_now
from agentmaild.mail.vocab import INTERRUPT_TYPE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

MID_TURN = "mid-turn"  # the history's outcome of a batch handed to a running turn
# mid_turn_priority -> the least urgent PRIORITY_RANK it lets in (-1: none)
POLICIES = {"none": -1, "urgent": 0, "high": 1, "all": 3}
DEFAULT_POLICY = "high"
HIGH_RANK = 1  # urgent and high: never held back by the hook's debounce
MID_TURN_LEASE_S = 300.0  # a claimed mid-turn batch's lease (renewed while Gemini's turn goes on)


def policy_rank(policy: object) -> int:
    """The rank ``policy`` lets in; an unknown or missing policy is the default."""
    default = POLICIES[DEFAULT_POLICY]
    return POLICIES.get(policy, default) if isinstance(policy, str) else default


def open_delivery(
    tx: Any, delivery_id: str, agent: str, ids: Sequence[str], lease_until: float, stamp: str
) -> None:
    """A claimed delivery ``delivery_id`` holding the messages ``ids``."""
    born = {"id": delivery_id, "agent": agent, "lease_until": lease_until, "stamp": stamp}
    tx.execute("delivery_insert", born)
    tx.execute("claim_mark", {"delivery": delivery_id, "ids": tx.json(list(ids))})


def close_delivery(tx: Any, delivery_id: str, stamp: str) -> tuple[list[Any], Any]:
    """Mark the batch read by it (or read elsewhere), drop the nudges, close the delivery:
    (the messages it marked read, the closed delivery's row or None)."""
    marked = tx.fetch_all("delivery_ack_messages", {"stamp": stamp, "by": delivery_id})
    rows = [r for r in marked if r["acked_by"] == delivery_id]  # not those read elsewhere
    for r in rows:
        tx.execute("nudge_drop", {"agent": r["to_agent"], "message_id": r["id"]})
    holder = tx.fetch_one("delivery_close", {"stamp": stamp, "id": delivery_id})
    return rows, holder


def mid_turn_rows(tx: Any, agent: str, max_rank: int) -> list[Any]:
    """Under the agent's lock: the mail ``max_rank`` lets into its running turn, priority order."""
    if max_rank < 0:
        return []
    tx.lock(f"agent:{agent}")
    params = {"agent": agent, "max_rank": max_rank, "interrupt": INTERRUPT_TYPE}
    return list(tx.fetch_all("mid_turn_candidates", params))


def mid_turn_waiting(tx: Any, agent: str, max_rank: int) -> bool:
    """A read, no lock: is there mail ``max_rank`` would let into the running turn now?"""
    params = {"agent": agent, "max_rank": max_rank, "interrupt": INTERRUPT_TYPE}
    return max_rank >= 0 and bool(tx.fetch_all("mid_turn_candidates", params))


def mid_turn_claim(tx: Any, agent: str, delivery_id: str, ids: Sequence[str]) -> float:
    """Open the mid-turn delivery of ``ids``; when it began (for the history's duration)."""
    now = time.time()
    open_delivery(tx, delivery_id, agent, ids, now + MID_TURN_LEASE_S, iso_now(now))
    return now


def mid_turn_ack(tx: Any, agent: str, delivery_id: str, began: float) -> list[Any]:
    """The turn took the batch: close it, history outcome ``mid-turn``; the messages it read."""
    now = time.time()
    stamp = iso_now(now)
    rows, holder = close_delivery(tx, delivery_id, stamp)
    if holder is None and not rows:  # never opened, or given back: nothing was taken
        return rows
    record = {"delivery_id": delivery_id, "agent": agent,
              "message_ids": tx.json([r["id"] for r in rows]), "attempt": 1, "outcome": MID_TURN,
              "error": None, "duration_s": round(now - began, 6), "at": now}  # fmt: skip
    tx.execute("attempt_insert", record)
    if rows:
        tx.execute("agent_reached", {"stamp": stamp, "agent": agent})
    return rows


def mid_turn_undo(tx: Any, delivery_id: str) -> None:
    """The turn refused the batch: its mail waits for the turn's end, in no delivery."""
    tx.execute("mid_turn_undo_messages", {"id": delivery_id})
    tx.execute("mid_turn_undo_delivery", {"id": delivery_id})


def mid_turn_renew(tx: Any, delivery_id: str) -> None:
    """A batch held across tool calls (Gemini CLI's, acked at the turn's end): its lease goes on,
    while it is still the first claim of it (never a redelivery the daemon has taken over)."""
    tx.execute("mid_turn_renew", {"id": delivery_id, "until": time.time() + MID_TURN_LEASE_S})


def mid_turn_release(tx: Any, delivery_id: str) -> None:
    """A held batch whose turn failed: pending again, for the next prompt or a redelivery under
    its id (only while it is still the first claim of it)."""
    tx.execute("mid_turn_release", {"id": delivery_id, "stamp": iso_now()})
