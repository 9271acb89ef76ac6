"""The offline history checker catches every violation it claims to, and nothing else.

Each case starts from one good run (two acked deliveries, every turn in the ledger), breaks one
thing and asserts the checker's EXACT problem list: deleting any single check from history.py
fails exactly its case, and a check that starts firing on something else fails that case too.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import assert_sound
from tests.reliability.history import broadcast_problems, check_history, connect_ro


@dataclass
class Run:
    """A good run: ``m[0:3]`` delivered and acked as ``d1``, ``m[3]`` as ``d2``, attempt 1."""

    db: Path
    m: list[str]
    d1: str
    d2: str

    def turn(self, uuid: str, message_ids: list[str], attempt: int = 1) -> dict[str, Any]:
        return {"uuid": uuid, "message_ids": message_ids, "attempt": attempt, "pid": 4242}

    @property
    def ledger(self) -> list[dict[str, Any]]:
        return [self.turn(self.d1, self.m[:3]), self.turn(self.d2, self.m[3:])]

    def sql(self, *statements: str) -> None:
        conn = sqlite3.connect(str(self.db))  # foreign keys off: orphans must be writable
        try:
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        finally:
            conn.close()

    def problems(
        self,
        ledger: list[dict[str, Any]] | None = None,
        sent: list[str] | None = None,
        *,
        events: list[dict[str, Any]] | None = None,
        settled: bool = True,
    ) -> list[str]:
        return check_history(
            self.db, self.ledger if ledger is None else ledger,
            self.m if sent is None else sent, acked_events=events or (), settled=settled,
        ).problems


def _deliver(store: SqliteMailStore, n: int) -> tuple[list[str], str]:
    mailer = Mailer(store)
    # Distinct bodies: a repeat inside the loop guard's window would collapse into the first.
    sent = [
        mailer.send(sender="bob", to="a", subject=f"s{i}", body=f"b{time.monotonic_ns()}")
        for i in range(n)
    ]
    ids = [s.ids[0] for s in sent]
    batch = store.claim("a", max_messages=10, max_chars=100_000, lease_s=60, now=time.time())
    assert batch is not None and sorted(batch.message_ids) == sorted(ids)
    assert store.ack_delivery(batch.delivery_id, now=time.time()) == n
    return ids, batch.delivery_id


@pytest.fixture
def run(tmp_path: Path) -> Run:
    db = tmp_path / "h.db"
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="a", capability="builder"))
        first, d1 = _deliver(store, 3)
        second, d2 = _deliver(store, 1)
    finally:
        store.close()
    return Run(db=db, m=first + second, d1=d1, d2=d2)


def test_a_good_run_has_no_problems(run: Run) -> None:
    assert run.problems() == []
    # The claude channels' uuid form, `<delivery id>.<attempt>` on a redelivery, is understood.
    run.sql(f"UPDATE am_deliveries SET attempts = 2 WHERE id = '{run.d1}'")
    again = [*run.ledger, run.turn(f"{run.d1}.2", run.m[:3], attempt=2)]
    assert run.problems(again) == []


def test_integrity(run: Run) -> None:
    run.sql(
        "CREATE TABLE scratch (x TEXT, y TEXT)",
        "CREATE INDEX scratch_x ON scratch (x)",
        "INSERT INTO scratch VALUES ('a', 'b')",
        "PRAGMA writable_schema = ON",  # the index now claims to cover y: its entry is wrong
        "UPDATE sqlite_master SET sql = 'CREATE INDEX scratch_x ON scratch (y)' "
        "WHERE name = 'scratch_x'",
    )
    assert run.problems() == ["integrity_check: row 1 missing from index scratch_x"]


STRAY = ("INSERT INTO messages (id, from_agent, to_agent, subject, body, delivery_id) "
         "VALUES ('msg-stray', 'bob', '{to}', 's', 'b', '{delivery}')")
DELIVERY = ("INSERT INTO am_deliveries (id, agent, state, attempts, created_at, updated_at) "
            "VALUES ('{id}', '{agent}', 'acked', 1, '', '')")


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        ([STRAY.format(to="a", delivery="dlv-gone")],
         "message pointing at a missing delivery: ['msg-stray']"),
        ([DELIVERY.format(id="dlv-empty", agent="a")],
         "delivery without messages: ['dlv-empty']"),
        ([DELIVERY.format(id="dlv-forb", agent="b"), STRAY.format(to="a", delivery="dlv-forb"),
          "INSERT INTO am_agents (name, capability, created_at, updated_at) "
          "VALUES ('b', 'builder', '', '')"],
         "delivery for another agent than its messages: ['msg-stray']"),
        ([DELIVERY.format(id="dlv-ghost", agent="ghost"),
          STRAY.format(to="ghost", delivery="dlv-ghost")],
         "delivery for an unknown agent: ['dlv-ghost']"),
        (["INSERT INTO am_nudges (agent, message_id, reason, created_at) "
          "VALUES ('a', 'msg-gone', 'urgent', '')"],
         "nudge for a missing message: ['msg-gone']"),
        (["INSERT INTO am_idempotency (sender, key, content_hash, message_ids, created_at) "
          "VALUES ('bob', 'k1', 'h', '[\"msg-gone\"]', '')"],
         "idempotency record for a missing message: ['k1']"),
    ],
    ids=["missing-delivery", "empty-delivery", "other-agent", "unknown-agent", "nudge",
         "idempotency"],
)
def test_orphans(run: Run, statements: list[str], expected: str) -> None:
    run.sql(*statements)
    assert run.problems() == [f"1 orphan row(s): {expected}"]
    # the check every reliability scenario ends with sees the same orphan
    with pytest.raises(AssertionError, match="orphan"):
        assert_sound(run.db)


def test_lost(run: Run) -> None:
    assert run.problems(sent=[*run.m, "msg-missing"]) == ["msg-missing: LOST (no row in the store)"]


def test_never_delivered(run: Run) -> None:
    store = SqliteMailStore(run.db)
    try:
        late = Mailer(store).send(sender="bob", to="a", subject="late", body="b").ids[0]
    finally:
        store.close()
    # Not settled: only the missing delivery counts, not the missing ack.
    assert run.problems(sent=[*run.m, late], settled=False) == [f"{late}: never delivered"]


def test_repeat_under_another_delivery_id(run: Run) -> None:
    run.sql(f"UPDATE am_deliveries SET attempts = 2 WHERE id = '{run.d2}'")
    ledger = [*run.ledger, run.turn(run.d2, run.m[:1], attempt=2)]
    assert run.problems(ledger) == [
        f"{run.m[0]}: repeat deliveries changed the delivery id: {[run.d1, run.d2]}"
    ]


def test_delivered_under_another_id_than_the_store_says(run: Run) -> None:
    m3 = run.m[3]
    run.sql(
        f"UPDATE messages SET read = 0, acked_at = NULL, acked_by = NULL WHERE id = '{m3}'",
        f"UPDATE am_deliveries SET state = 'claimed' WHERE id = '{run.d2}'",
    )
    ledger = [run.turn(run.d1, run.m)]
    assert run.problems(ledger, settled=False) == [
        f"{m3}: delivered as {run.d1}, store says {run.d2}"
    ]


def test_not_acked(run: Run) -> None:
    m2 = run.m[2]
    run.sql(f"UPDATE messages SET read = 0, acked_at = NULL, acked_by = NULL WHERE id = '{m2}'")
    assert run.problems() == [f"{m2}: not acked (read=0, delivery {run.d1})"]


def test_ack_record(run: Run) -> None:
    m2 = run.m[2]
    run.sql(f"UPDATE messages SET acked_at = NULL WHERE id = '{m2}'")
    assert run.problems() == [
        f"{m2}: ack record wrong (acked_at=None, acked_by={run.d1!r}, delivery_id={run.d1!r})"
    ]


def test_read_but_never_delivered_under_that_id(run: Run) -> None:
    m2 = run.m[2]
    ledger = [run.turn(run.d1, run.m[:2]), run.turn(run.d2, run.m[3:])]
    sent = [m for m in run.m if m != m2]  # not one of the test's: only the ack check sees it
    assert run.problems(ledger, sent) == [
        f"{m2}: read (acked_by {run.d1}) but never delivered under that id"
    ]


def test_unknown_delivery(run: Run) -> None:
    ledger = [*run.ledger, run.turn("dlv-unknown0", ["msg-elsewhere"])]
    assert run.problems(ledger) == ["turn dlv-unknown0 (attempt 1): unknown delivery id"]


def test_attempt_beyond_the_claims(run: Run) -> None:
    ledger = [run.turn(run.d1, run.m[:3], attempt=2), run.turn(run.d2, run.m[3:])]
    assert run.problems(ledger) == [f"turn {run.d1} (attempt 2): the store counts only 1 claims"]


def test_turn_without_messages(run: Run) -> None:
    run.sql(f"UPDATE am_deliveries SET attempts = 2 WHERE id = '{run.d1}'")
    ledger = [run.turn(run.d1, []), run.turn(run.d1, run.m[:3], attempt=2),
              run.turn(run.d2, run.m[3:])]
    assert run.problems(ledger) == [f"turn {run.d1} (attempt 1): carried no message"]


def test_double_ack(run: Run) -> None:
    events = [
        {"delivery_id": run.d1, "acked": 2}, {"delivery_id": run.d1, "acked": 1},
        {"delivery_id": run.d2, "acked": 0}, {"delivery_id": run.d2, "acked": 1},
    ]
    assert run.problems(events=events) == [f"delivery {run.d1}: 2 acks marked rows read"]


def test_more_rows_acked_than_messages(run: Run) -> None:
    events = [{"delivery_id": run.d1, "acked": 3}, {"delivery_id": run.d2, "acked": 2}]
    assert run.problems(events=events) == ["daemons logged 5 rows acked for 4 messages"]


def test_unsettled_delivery(run: Run) -> None:
    run.sql(f"UPDATE am_deliveries SET state = 'pending', last_error = 'boom' "
            f"WHERE id = '{run.d2}'")
    assert run.problems() == [f"delivery {run.d2} is still pending (error: boom)"]
    assert run.problems(settled=False) == []


def test_repeat_not_marked_as_a_redelivery(run: Run) -> None:
    ledger = [*run.ledger, run.turn(run.d1, run.m[:3])]  # no REDELIVERY marker: attempt 1
    assert run.problems(ledger) == [
        f"turn {run.d1} (attempt 1): a repeat of attempt 1 not marked as later"
    ]


def test_acked_attempt_never_shown(run: Run) -> None:
    run.sql(f"UPDATE am_deliveries SET attempts = 3 WHERE id = '{run.d1}'")
    assert run.problems() == [
        f"delivery {run.d1}: acked at attempt 3, but the agent was last shown attempt 1"
    ]


def test_uuid_suffix_disagrees_with_the_text(run: Run) -> None:
    run.sql(f"UPDATE am_deliveries SET attempts = 3 WHERE id = '{run.d1}'")
    ledger = [*run.ledger, run.turn(f"{run.d1}.2", run.m[:3], attempt=3)]
    assert run.problems(ledger) == [f"turn {run.d1}.2 (attempt 3): the uuid says attempt 2"]


def _broadcast_problems(run: Run, committed: list[str]) -> list[str]:
    conn = connect_ro(run.db)
    try:
        return broadcast_problems(conn, 3, committed)
    finally:
        conn.close()


def test_half_written_broadcast(run: Run) -> None:
    run.sql(f"UPDATE messages SET broadcast_id = 'bc-whole' WHERE id IN "
            f"('{run.m[0]}', '{run.m[1]}', '{run.m[2]}')")
    assert _broadcast_problems(run, ["bc-whole"]) == []
    run.sql(f"UPDATE messages SET broadcast_id = 'bc-half' WHERE id = '{run.m[3]}'")
    assert _broadcast_problems(run, ["bc-whole"]) == [
        "broadcast bc-half is half-written: 1 of 3 rows"
    ]


def test_committed_broadcast_gone(run: Run) -> None:
    assert _broadcast_problems(run, ["bc-gone"]) == ["broadcast bc-gone was committed but is gone"]
