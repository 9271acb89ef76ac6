"""The team rules the store keeps (``team_rules`` / ``set_team_rules``) and the holds a send reads
(``held_pairs``), on memory, SQLite and PostgreSQL (conftest ``any_store``); and a ``Mailer``
judged by them whatever limits its caller gives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmaild.config import TEAM_RULES, LimitsConfig, team_limits, team_values
from agentmaild.errors import ConfigError, LoopHeld, RateLimited, ValidationError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.base import MailStore
from agentmaild.store.checks import held_error, held_pair, thread_pair
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.rule_state import TEAM_RULES_FRESH_S
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.waiting import wait_for

T0 = 1_700_000_000.0


def test_the_team_rules_are_kept_replaced_and_reported_changed(any_store: MailStore) -> None:
    assert any_store.team_rules() == {}  # none written: the built-in defaults apply
    rules = team_values(LimitsConfig(pingpong_max=5, rate_limit_window_s=2.5))
    assert any_store.set_team_rules(rules, now=T0) is True
    assert any_store.team_rules() == rules
    assert any_store.set_team_rules(rules, now=T0 + 1) is False  # the same again: no change
    assert any_store.set_team_rules({"pingpong_max": 6}, now=T0 + 2) is True
    assert any_store.team_rules() == {"pingpong_max": 6}  # replaced whole, not merged


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_another_store_on_the_target_sees_new_rules_within_the_freshness_window(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A store keeps a read of the rules for ``TEAM_RULES_FRESH_S`` (one round trip less per send
    on PostgreSQL); the daemon's write reaches a long-lived sender's store within it."""
    if kind == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        daemon, sender = PostgresMailStore(dsn), PostgresMailStore(dsn)
    else:
        daemon, sender = SqliteMailStore(tmp_path / "m.db"), SqliteMailStore(tmp_path / "m.db")
    try:
        assert sender.team_rules() == {}  # read once, and kept
        daemon.set_team_rules({"pingpong_max": 3}, now=T0)
        wait_for(lambda: sender.team_rules() == {"pingpong_max": 3},
                   TEAM_RULES_FRESH_S + 5, "the new rules to reach the other store")  # fmt: skip
        sender.set_team_rules({"pingpong_max": 4}, now=T0 + 1)  # its own write: seen at once
        assert sender.team_rules() == {"pingpong_max": 4}
    finally:
        daemon.close()
        sender.close()


def test_held_pairs_are_the_holds_of_one_thread(any_store: MailStore) -> None:
    for name in ("a", "b"):
        any_store.add_agent(Agent(name=name, capability="builder"))
    any_store.set_team_rules({"pingpong_max": 2}, now=T0)
    mailer = Mailer(any_store)
    root = mailer.send(sender="a", to="b", subject="s", body="0").ids[0]
    other = mailer.send(sender="a", to="b", subject="t", body="0").ids[0]
    assert any_store.held_pairs(root) == set()
    for i in range(2):
        mailer.send(sender="b", to="a", subject="s", body=f"{i}", thread_id=root)
    with pytest.raises(LoopHeld):
        mailer.send(sender="b", to="a", subject="s", body="2", thread_id=root)
    assert any_store.held_pairs(root) == {"a|b"}
    assert any_store.held_pairs(other) == set()
    assert any_store.release_thread(root) == 1
    assert any_store.held_pairs(root) == set()


def test_a_mailer_is_judged_by_the_stores_rules_not_its_callers(any_store: MailStore) -> None:
    any_store.add_agent(Agent(name="b", capability="builder"))
    lax = LimitsConfig(rate_limit_max=0, duplicate_window_s=0, pingpong_max=0, body_max_bytes=9999)
    any_store.set_team_rules({"rate_limit_max": 1, "body_max_bytes": 10}, now=T0)
    mailer = Mailer(any_store, lax)
    assert mailer.rules().rate_limit_max == 1 and mailer.rules().duplicate_window_s == 60.0
    with pytest.raises(ValidationError, match="the limit is 10"):
        mailer.send(sender="a", to="b", subject="s", body="x" * 11)
    mailer.send(sender="a", to="b", subject="s", body="one")
    with pytest.raises(RateLimited):
        mailer.send(sender="a", to="b", subject="s", body="two")


def test_team_limits_take_only_team_rules_from_the_store() -> None:
    own = LimitsConfig(refuse_unknown_recipients=False, pingpong_max=0)
    merged = team_limits({"pingpong_max": 3, "refuse_unknown_recipients": True, "junk": 1}, own)
    assert merged.pingpong_max == 3  # the store's
    assert merged.refuse_unknown_recipients is False  # the caller's own: not a team rule
    assert team_limits({}, own).pingpong_max == LimitsConfig().pingpong_max  # never the caller's
    assert team_limits({"pingpong_max": "0", "unread_max": True}) == LimitsConfig()  # not numbers
    assert "refuse_unknown_recipients" not in TEAM_RULES
    with pytest.raises(ConfigError, match=r"the store's team rules: limits\.unread_max"):
        team_limits({"unread_max": 0})


def test_a_send_falls_under_a_held_pair_whoever_else_it_reaches() -> None:
    held = {thread_pair("b", "a")}
    assert held == {"a|b"}
    assert held_pair(held, "a", ["c", "b"]) == "a|b"  # a group send reaching b
    assert held_pair(held, "b", ["a"]) == "a|b"
    assert held_pair(held, "c", ["a", "b"]) is None  # the hold is the pair's only
    assert "between a and b is held" in held_error("msg-x", "a|b").message
