"""What ``store copy`` copies: each table's columns in both schemas' order, and rows made plain
(JSON decoded, REAL as float) whatever store they came from — shared by both sides of a copy."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

Rows = list[tuple[Any, ...]]

# Table -> columns, in the order both schemas declare them (am_registry and the schema versions
# are the destination's own: its registry version moves when the agents arrive).
TABLES: dict[str, tuple[str, ...]] = {
    "messages": ("id", "from_agent", "to_agent", "subject", "body", "type", "priority",
                 "thread_id", "payload", "read", "created_at", "broadcast_id", "delivery_id",
                 "acked_at", "acked_by"),
    "am_agents": ("name", "capability", "parent", "state", "channel", "command", "cwd",
                  "tmux_target", "tmux_socket", "preset", "session_id", "poll_interval_s",
                  "settings", "turn_state", "turn_state_at", "created_at", "updated_at",
                  "shutdown_requested_at", "host"),
    "am_deliveries": ("id", "agent", "state", "attempts", "failures", "lease_until",
                      "last_error", "created_at", "updated_at", "queue"),
    "am_idempotency": ("sender", "key", "content_hash", "message_ids", "created_at"),
    "am_rate_log": ("from_agent", "to_agent", "at"),
    "am_nudges": ("agent", "message_id", "reason", "created_at"),
    "am_prompt_seen": ("delivery_id", "agent", "session_id", "at"),
    "am_attempts": ("id", "delivery_id", "agent", "message_ids", "attempt", "outcome", "error",
                    "duration_s", "at"),
    "am_agent_procs": ("pid", "start_time", "pgid", "agent", "delivery_id", "daemon_pid",
                       "started_at"),
    # Schema 4 (PostgreSQL schema 2): the HTTP API's tokens and the team rules' state.
    "am_tokens": ("id", "agent", "scopes", "hash", "created_at", "expires_at", "revoked_at"),
    "am_recent_sends": ("digest", "message_ids", "at"),
    "am_thread_log": ("thread_id", "pair", "at"),
    "am_thread_holds": ("thread_id", "pair", "messages", "escalation_id", "held_at"),
    "am_counters": ("name", "value"),
    "am_escalated": ("message_id", "at"),
    "am_queue_members": ("queue", "agent"),
    # Schema 5 (PostgreSQL schema 3): the trust domains.
    "am_peers": ("name", "public_key", "key_id", "url", "created_at"),
    "am_nonces": ("nonce", "peer", "expires_at"),
    "am_peer_messages": ("message_id", "peer", "key_id", "origin_id"),
    "am_relayed": ("message_id", "peer", "relayed_at"),
    # Schema 8 (PostgreSQL schema 10): the store's settings (the team rules its daemon wrote).
    "am_settings": ("name", "value", "updated_at"),
    # Schema 10 (PostgreSQL schema 12): what the team costs.
    "am_usage": ("id", "delivery_id", "attempt", "agent", "thread_id", "tokens_in", "tokens_out",
                 "cost_usd", "at"),
    "am_budgets": ("agent", "day", "raised_usd", "reset_at", "updated_at"),
}  # fmt: skip
# Stored as JSON text by SQLite, as jsonb by PostgreSQL.
JSON_COLUMNS = frozenset(
    {("am_agents", "command"), ("am_agents", "settings"), ("am_idempotency", "message_ids"),
     ("am_attempts", "message_ids"), ("am_recent_sends", "message_ids"),
     ("am_settings", "value")}
)  # fmt: skip
FLOAT_COLUMNS = frozenset(
    {("am_agents", "poll_interval_s"), ("am_deliveries", "lease_until"), ("am_rate_log", "at"),
     ("am_attempts", "duration_s"), ("am_attempts", "at"), ("am_agent_procs", "started_at"),
     ("am_tokens", "created_at"), ("am_tokens", "expires_at"), ("am_tokens", "revoked_at"),
     ("am_recent_sends", "at"), ("am_thread_log", "at"), ("am_escalated", "at"),
     ("am_peers", "created_at"), ("am_nonces", "expires_at"), ("am_relayed", "relayed_at"),
     ("am_settings", "updated_at"), ("am_usage", "cost_usd"), ("am_usage", "at"),
     ("am_budgets", "raised_usd"), ("am_budgets", "reset_at"), ("am_budgets", "updated_at")}
)  # fmt: skip

def canonical(table: str, rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows as plain values whatever store they came from: JSON decoded, REAL as float."""
    cols = TABLES[table]
    out: list[tuple[Any, ...]] = []
    for row in rows:
        values = []
        for col, value in zip(cols, row, strict=True):
            if value is not None and (table, col) in JSON_COLUMNS and isinstance(value, str):
                value = json.loads(value)
            elif value is not None and (table, col) in FLOAT_COLUMNS:
                value = float(value)
            values.append(value)
        out.append(tuple(values))
    return out
