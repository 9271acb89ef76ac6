"""The offline history checker: proves delivery guarantees from agents' ledgers plus the store.

A ledger is what the agents saw: one record per turn, ``{"uuid": delivery id, "message_ids": [...],
"attempt": n, "pid": ...}`` (tests/agents/ledger_agent.py writes them). The store is read after
the run with a plain sqlite3 connection. Every check returns problems as text, so one failing run
lists all that is wrong, not just the first.

Checked (SPEC §5, §9 "No loss"):

- every sent message exists and was delivered at least once (it is in some ledger record);
- once settled, it is acked exactly once: ``read = 1`` with one ``acked_at``/``acked_by`` record,
  made by the delivery it was claimed under; and nothing is read that no agent was given under
  that id;
- every repeat delivery of a message carried the first delivery id it was delivered under;
- every repeat of a delivery said so: its ``REDELIVERY (attempt N)`` numbers rise from turn to
  turn, a ``<delivery id>.<N>`` uuid (the claude channels' form) agrees with the text, and the
  attempt the store acked is the last one the agent was shown;
- no daemon logged two acks that marked rows read for one delivery, nor more rows than messages;
- no orphan rows: deliveries without messages, messages pointing at missing deliveries, nudges or
  idempotency records pointing at missing messages, deliveries for unknown agents;
- broadcasts are all-or-nothing: every broadcast id has exactly one row per recipient;
- ``PRAGMA integrity_check`` says ``ok``.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class History:
    """What a run did, and every problem found in it (empty: the guarantees held)."""

    messages: int = 0
    turns: int = 0
    redelivery_turns: int = 0
    redelivered_messages: int = 0
    max_deliveries_per_message: int = 0
    max_claims_per_delivery: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.messages} messages, {self.turns} turns ({self.redelivery_turns} marked as "
            f"redeliveries), {self.redelivered_messages} messages redelivered, at most "
            f"{self.max_deliveries_per_message} deliveries of one message, "
            f"at most {self.max_claims_per_delivery} claims of one delivery"
        )

    def assert_ok(self, context: str = "") -> None:
        if self.problems:
            shown = "\n  ".join(self.problems[:25])
            more = f"\n  (+{len(self.problems) - 25} more)" if len(self.problems) > 25 else ""
            raise AssertionError(
                f"history check failed {context}: {self.summary()}\n  {shown}{more}"
            )


def read_ledgers(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every record of every ledger, in each file's order; a torn last line is a problem too."""
    records: list[dict[str, Any]] = []
    for path in paths:
        if not path.exists():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise AssertionError(f"{path}:{n}: torn ledger line {line[:80]!r}") from exc
            record["ledger"] = path.name
            records.append(record)
    return records


def connect_ro(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def integrity_problems(conn: sqlite3.Connection) -> list[str]:
    result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    return [] if result == ["ok"] else [f"integrity_check: {'; '.join(result[:5])}"]


def check_history(
    db: Path,
    ledger: Sequence[dict[str, Any]],
    sent: Iterable[str],
    *,
    acked_events: Sequence[dict[str, Any]] = (),
    settled: bool = True,
) -> History:
    """Check a finished run. ``sent``: the ids of the messages the test sent to ledger agents;
    ``acked_events``: the daemons' ``delivery.acked`` log lines; ``settled``: every message and
    delivery is expected to be acked by now."""
    h = History(turns=len(ledger), redelivery_turns=sum(r["attempt"] > 1 for r in ledger))
    sent = list(sent)
    h.messages = len(sent)
    conn = connect_ro(db)
    try:
        h.problems += integrity_problems(conn)
        rows = {r["id"]: r for r in conn.execute("SELECT * FROM messages")}
        deliveries = {r["id"]: r for r in conn.execute("SELECT * FROM am_deliveries")}
        h.problems += orphan_problems(conn)
    finally:
        conn.close()
    seen = _delivery_ids_by_message(ledger, h)
    for mid in sent:
        row = rows.get(mid)
        if row is None:
            h.problems.append(f"{mid}: LOST (no row in the store)")
            continue
        h.problems += _message_problems(mid, row, seen.get(mid, []), settled)
    h.problems += _ack_problems(rows, seen)
    h.problems += _ledger_problems(ledger, deliveries)
    h.problems += redelivery_problems(ledger, deliveries)
    h.problems += _event_problems(acked_events, len(rows))
    if settled:
        h.problems += [
            f"delivery {d} is still {r['state']} (error: {r['last_error']})"
            for d, r in deliveries.items() if r["state"] != "acked"
        ]
    h.max_claims_per_delivery = max((r["attempts"] for r in deliveries.values()), default=0)
    return h


def _delivery_ids_by_message(
    ledger: Sequence[dict[str, Any]], h: History
) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for record in ledger:
        for mid in record["message_ids"]:
            seen[mid].append(split_uuid(record["uuid"])[0])
    h.redelivered_messages = sum(1 for uuids in seen.values() if len(uuids) > 1)
    h.max_deliveries_per_message = max((len(u) for u in seen.values()), default=0)
    return seen


def split_uuid(uuid: str) -> tuple[str, int | None]:
    """A stream-json uuid as (delivery id, attempt suffix): ``dlv-x.3`` -> ("dlv-x", 3)."""
    head, dot, tail = uuid.rpartition(".")
    return (head, int(tail)) if dot and tail.isdigit() else (uuid, None)


def _message_problems(
    mid: str, row: sqlite3.Row, uuids: list[str], settled: bool
) -> list[str]:
    problems = []
    if not uuids:
        problems.append(f"{mid}: never delivered")
    elif any(u != uuids[0] for u in uuids):
        problems.append(f"{mid}: repeat deliveries changed the delivery id: {uuids}")
    elif row["delivery_id"] != uuids[0]:
        problems.append(f"{mid}: delivered as {uuids[0]}, store says {row['delivery_id']}")
    if row["read"] != 1:
        if settled:
            problems.append(
                f"{mid}: not acked (read={row['read']}, delivery {row['delivery_id']})"
            )
    elif not row["acked_at"] or row["acked_by"] != row["delivery_id"]:
        problems.append(
            f"{mid}: ack record wrong (acked_at={row['acked_at']!r}, acked_by={row['acked_by']!r},"
            f" delivery_id={row['delivery_id']!r})"
        )
    return problems


def _ack_problems(rows: dict[str, sqlite3.Row], seen: dict[str, list[str]]) -> list[str]:
    """Nothing is read that no agent was given under the delivery id that acked it."""
    return [
        f"{mid}: read (acked_by {row['acked_by']}) but never delivered under that id"
        for mid, row in rows.items()
        if row["read"] == 1 and row["acked_by"] not in seen.get(mid, ())
    ]


def _ledger_problems(
    ledger: Sequence[dict[str, Any]], deliveries: dict[str, sqlite3.Row]
) -> list[str]:
    problems = []
    for record in ledger:
        d = deliveries.get(split_uuid(record["uuid"])[0])
        if d is None:
            problems.append(f"{_turn(record)}: unknown delivery id")
        elif record["attempt"] > d["attempts"]:
            problems.append(f"{_turn(record)}: the store counts only {d['attempts']} claims")
        if not record["message_ids"]:
            problems.append(f"{_turn(record)}: carried no message")
    return problems


def redelivery_problems(
    ledger: Sequence[dict[str, Any]], deliveries: dict[str, sqlite3.Row]
) -> list[str]:
    """Each repeat of a delivery id was marked as one, with its attempt number (ledger order is
    turn order: one agent's turns run one at a time and append to its one ledger)."""
    problems = []
    last: dict[str, int] = {}
    for record in ledger:
        delivery, suffix = split_uuid(record["uuid"])
        attempt = record["attempt"]
        if suffix is not None and (suffix < 2 or suffix != attempt):
            problems.append(f"{_turn(record)}: the uuid says attempt {suffix}")
        before = last.get(delivery)
        if before is not None and attempt <= before:
            problems.append(f"{_turn(record)}: a repeat of attempt {before} not marked as later")
        last[delivery] = attempt
    for delivery, shown in last.items():
        d = deliveries.get(delivery)
        if d is not None and d["state"] == "acked" and shown < d["attempts"]:
            problems.append(
                f"delivery {delivery}: acked at attempt {d['attempts']}, but the agent was last "
                f"shown attempt {shown}"
            )
    return problems


def _turn(record: dict[str, Any]) -> str:
    where = f" in {record['ledger']}" if "ledger" in record else ""
    return f"turn {record['uuid']} (attempt {record['attempt']}{where})"


def _event_problems(events: Sequence[dict[str, Any]], rows: int) -> list[str]:
    marked = Counter(e["delivery_id"] for e in events if e.get("acked", 0) > 0)
    problems = [f"delivery {d}: {n} acks marked rows read" for d, n in marked.items() if n > 1]
    total = sum(e.get("acked", 0) for e in events)
    if total > rows:
        problems.append(f"daemons logged {total} rows acked for {rows} messages")
    return problems


_ORPHANS = {
    "message pointing at a missing delivery": (
        "SELECT id FROM messages m WHERE delivery_id IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM am_deliveries d WHERE d.id = m.delivery_id)"
    ),
    "delivery without messages": (
        "SELECT id FROM am_deliveries d WHERE NOT EXISTS "
        "(SELECT 1 FROM messages m WHERE m.delivery_id = d.id)"
    ),
    "delivery for another agent than its messages": (
        "SELECT m.id FROM messages m JOIN am_deliveries d ON d.id = m.delivery_id "
        "WHERE d.agent != m.to_agent"
    ),
    "delivery for an unknown agent": (
        "SELECT id FROM am_deliveries d WHERE NOT EXISTS "
        "(SELECT 1 FROM am_agents a WHERE a.name = d.agent)"
    ),
    "nudge for a missing message": (
        "SELECT message_id FROM am_nudges n WHERE NOT EXISTS "
        "(SELECT 1 FROM messages m WHERE m.id = n.message_id)"
    ),
    "idempotency record for a missing message": (
        "SELECT i.key FROM am_idempotency i, json_each(i.message_ids) j WHERE NOT EXISTS "
        "(SELECT 1 FROM messages m WHERE m.id = j.value)"
    ),
}


def orphan_problems(conn: sqlite3.Connection) -> list[str]:
    problems = []
    for what, sql in _ORPHANS.items():
        ids = [r[0] for r in conn.execute(sql)]
        if ids:
            problems.append(f"{len(ids)} orphan row(s): {what}: {ids[:5]}")
    return problems


def broadcast_problems(
    conn: sqlite3.Connection, recipients: int, committed: Iterable[str] = ()
) -> list[str]:
    """Every broadcast is whole (``recipients`` rows); every id a sender saw committed exists."""
    counts = dict(
        conn.execute(
            "SELECT broadcast_id, count(*) FROM messages WHERE broadcast_id IS NOT NULL "
            "GROUP BY broadcast_id"
        ).fetchall()
    )
    problems = [
        f"broadcast {b} is half-written: {n} of {recipients} rows"
        for b, n in counts.items() if n != recipients
    ]
    problems += [f"broadcast {b} was committed but is gone" for b in committed if b not in counts]
    return problems
