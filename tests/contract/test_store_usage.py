"""What the team costs, on every store (SQLite, PostgreSQL, the in-memory fake): usage rows per
attempt, the totals per agent and per thread, and the daily budget judged over a store — its own
or the team's, raised and reset for one UTC day, over once spent, clear the next day."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.rules.budget import DAY_S, budget_status, raise_budget, reset_budget
from agentmaild.store.base import MailStore
from agentmaild.store.kinds import open_reader
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.store.usage import UsageRecord
from tests.support.pg import PgDatabases

NOON = 1_796_392_800.0 + 12 * 3600  # 2026-12-04 12:00 UTC
DAY_START = NOON - 12 * 3600


def used(store: MailStore, agent: str, cost: float | None, *, at: float, thread: str = "t1",
         n: int = 1) -> UsageRecord:  # fmt: skip
    record = UsageRecord(
        delivery_id=f"dlv-{agent}-{at}",
        attempt=n,
        agent=agent,
        thread_id=thread,
        tokens_in=100,
        tokens_out=20,
        cost_usd=cost,
        at=at,
    )
    store.record_usage(record)  # type: ignore[attr-defined]
    return record


def test_usage_rows_and_their_totals_per_agent_and_thread(any_store: MailStore) -> None:
    s: object = any_store
    first = used(any_store, "alice", 0.25, at=NOON - 600)
    used(any_store, "alice", 0.5, at=NOON - 60, thread="t2", n=2)
    used(any_store, "bob", None, at=NOON - 30)  # tokens only (Codex, Gemini CLI)
    used(any_store, "bob", 1.0, at=NOON - 7200)  # before the window
    rows = s.usage_since(NOON - 3600)  # type: ignore[attr-defined]
    assert [(r.agent, r.cost_usd) for r in rows] == [("bob", None), ("alice", 0.5),
                                                     ("alice", 0.25)]  # fmt: skip
    assert rows[-1] == first
    assert [r.agent for r in s.usage_since(0, agent="bob")] == ["bob", "bob"]  # type: ignore[attr-defined]
    per_agent = s.usage_by_agent(NOON - 3600)  # type: ignore[attr-defined]
    assert per_agent == [
        {"name": "alice", "turns": 2, "tokens_in": 200, "tokens_out": 40, "cost_usd": 0.75},
        {"name": "bob", "turns": 1, "tokens_in": 100, "tokens_out": 20, "cost_usd": None},
    ]
    per_thread = s.usage_by_thread(NOON - 3600)  # type: ignore[attr-defined]
    assert [(t["name"], t["cost_usd"], t["turns"]) for t in per_thread] == [
        ("t2", 0.5, 1), ("t1", 0.25, 2)]  # fmt: skip
    assert s.cost_since("alice", NOON - 120) == pytest.approx(0.5)  # type: ignore[attr-defined]
    assert s.cost_since("carol", 0) == 0.0  # type: ignore[attr-defined]


def test_a_budget_is_judged_raised_reset_and_renewed_each_day(any_store: MailStore) -> None:
    any_store.add_agent(Agent(name="alice", capability="builder", settings={"budget_usd": 1.0}))
    any_store.add_agent(Agent(name="bob", capability="builder"))
    used(any_store, "alice", 0.4, at=DAY_START - 60)  # yesterday: does not count
    used(any_store, "alice", 0.6, at=NOON - 300)
    state = budget_status(any_store, "alice", NOON)
    assert state is not None and (state.budget_usd, state.spent_usd, state.over) == (
        1.0,
        0.6,
        False,
    )
    used(any_store, "alice", 0.5, at=NOON - 200)
    state = budget_status(any_store, "alice", NOON)
    assert state is not None and state.over and state.spent_usd == pytest.approx(1.1)
    assert "agents budget alice --raise" in state.reason()
    raised = raise_budget(any_store, "alice", 0.5, NOON)
    assert raised is not None and raised.limit_usd == 1.5 and not raised.over
    raised = raise_budget(any_store, "alice", 0.25, NOON + 1)  # raises add up within the day
    assert raised is not None and raised.limit_usd == 1.75
    used(any_store, "alice", 0.7, at=NOON + 10)
    assert budget_status(any_store, "alice", NOON + 20).over  # type: ignore[union-attr]
    cleared = reset_budget(any_store, "alice", NOON + 30)
    assert cleared is not None and cleared.spent_usd == 0.0 and cleared.limit_usd == 1.0
    used(any_store, "alice", 0.3, at=NOON + 40)
    assert budget_status(any_store, "alice", NOON + 50).spent_usd == pytest.approx(0.3)  # type: ignore[union-attr]
    tomorrow = budget_status(any_store, "alice", NOON + DAY_S)
    assert tomorrow is not None and (tomorrow.raised_usd, tomorrow.spent_usd) == (0.0, 0.0)
    # No budget of its own, none for the team: never over; the team's default applies to it.
    used(any_store, "bob", 5.0, at=NOON - 10)
    assert budget_status(any_store, "bob", NOON).budget_usd is None  # type: ignore[union-attr]
    any_store.set_team_rules({"agent_budget_usd": 2.0}, now=NOON)
    team = budget_status(any_store, "bob", NOON)
    assert team is not None and team.budget_usd == 2.0 and team.over
    assert budget_status(any_store, "nobody", NOON) is None


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MailStore]:
    if request.param == "sqlite":
        store: MailStore = SqliteMailStore(tmp_path / "mail.db")
        yield store
        store.close()
        return
    databases: PgDatabases = request.getfixturevalue("pg_databases")
    dsn = databases.create()
    store = PostgresMailStore(dsn)
    yield store
    store.close()
    databases.drop(dsn)


def test_the_dashboard_reader_shows_costs_and_who_is_over_budget(sql_store: MailStore) -> None:
    now = time.time()
    sql_store.add_agent(Agent(name="alice", capability="builder", settings={"budget_usd": 0.5}))
    sql_store.add_agent(Agent(name="bob", capability="builder"))
    sql_store.add_agent(Agent(name="carol", capability="builder"))
    sql_store.set_team_rules({"agent_budget_usd": 10.0}, now=now)  # carol's, bob's default
    used(sql_store, "alice", 0.3, at=now - 30, thread="t1")
    used(sql_store, "alice", 0.3, at=now - 7200, thread="t2", n=2)  # this UTC day, or not
    used(sql_store, "bob", None, at=now - 20, thread="t1")
    reader = open_reader(sql_store)
    try:
        figures = reader.costs(now)
        assert [(a["name"], a["cost_usd"], a["tokens_in"]) for a in figures["hour"]["agents"]] == [
            ("alice", 0.3, 100), ("bob", None, 100)]  # fmt: skip
        assert [(t["thread"], t["turns"]) for t in figures["hour"]["threads"]] == [("t1", 2)]
        assert {a["name"]: a["cost_usd"] for a in figures["day"]["agents"]} == {
            "alice": 0.6, "bob": None}  # fmt: skip
        team = {a["name"]: a["cost"] for a in reader.team()}
        assert team["alice"]["cost_usd"] == 0.6 and team["carol"] is None
        expected = budget_status(sql_store, "alice", now)
        assert expected is not None
        over = reader.over_budget(now)
        assert [b["agent"] for b in over] == (["alice"] if expected.over else [])
        assert over == ([expected.to_dict()] if expected.over else [])
        raise_budget(sql_store, "alice", 1.0, now)
        assert reader.over_budget(now) == []
        used(sql_store, "carol", 10.5, at=now - 10)
        [carol] = reader.over_budget(now)
        assert (carol["agent"], carol["budget_usd"], carol["over"]) == ("carol", 10.0, True)
    finally:
        reader.close()
