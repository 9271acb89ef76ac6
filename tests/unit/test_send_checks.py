"""``store.checks``: the send's decisions as pure functions (the stores' contract is in
tests/contract/test_store_checks.py, the SQL twins in tests/contract/test_rule_twins.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentmaild.store import checks


def test_every_window_is_open_at_its_start_and_closed_at_now() -> None:
    assert checks.window_start(100.0, 30.0) == 70.0
    assert not checks.in_window(70.0, 100.0, 30.0)
    assert checks.in_window(70.5, 100.0, 30.0) and checks.in_window(100.0, 100.0, 30.0)
    assert not checks.in_window(None, 100.0, 30.0)
    assert checks.collapses(99.0, 100.0, 30.0) and not checks.collapses(None, 100.0, 30.0)


def test_an_end_in_either_registry_wins() -> None:
    assert checks.merged_state("working", "completed") == "completed"
    assert checks.merged_state("zombie", "working") == "zombie"
    assert checks.merged_state(None, "working") == "working"
    assert checks.merged_state("idle", "working") == "idle"
    assert checks.merged_state(None, None) is None


def test_recipient_refusal_by_state_and_setting() -> None:
    assert checks.recipient_refusal("bob", "working", True) is None
    assert checks.recipient_refusal("bob", None, False) is None
    unknown = checks.recipient_refusal("bob", None, True)
    assert unknown is not None and unknown.code == "recipient_refused"
    ended = checks.recipient_refusal("bob", "zombie", False)
    assert ended is not None and ended.message == (
        "recipient bob is zombie: it will never read this mail"
    )


@pytest.mark.parametrize(
    ("unread", "cap", "reached"),
    [(0, 0, False), (9, 0, False), (1, 2, False), (2, 2, True), (3, 2, True)],
)
def test_the_unread_cap(unread: int, cap: int, reached: bool) -> None:
    assert checks.unread_cap_reached(unread, cap) is reached


def test_rate_limit_thread_cap_and_idempotency() -> None:
    assert checks.rate_limited("a", "b", 5, 0, 60.0) is None  # off
    assert checks.rate_limited("a", "b", 2, 3, 60.0) is None
    limited = checks.rate_limited("a", "b", 3, 3, 60.0)
    assert limited is not None and limited.message == (
        "rate limit: a→b sent 3 messages in the last 60s (max 3)"
    )
    assert checks.rate_trim_before(100.0, 30.0) == 40.0
    assert not checks.trips_thread_cap(1, 2) and checks.trips_thread_cap(2, 2)
    assert checks.idempotency_conflict("a", "k", "h1", "h1") is None
    conflict = checks.idempotency_conflict("a", "k", "h1", "h2")
    assert conflict is not None and conflict.code == "conflict"
    assert checks.replays(["msg-1"]) and not checks.replays(())


def test_is_known_asks_lazily_and_the_setting_last() -> None:
    asked: list[str] = []

    def look(name: str, answer: bool) -> object:
        return lambda: asked.append(name) or answer

    def setting() -> bool:
        asked.append("config")
        return True

    assert checks.is_known("operator", lookups=[look("x", False)], refuse_unknown=setting)
    assert checks.is_known("bob", lookups=[look("here", True), look("mailed", True)],
                           refuse_unknown=setting)  # fmt: skip
    assert asked == ["here"]
    asked.clear()
    assert not checks.is_known("bob", lookups=[look("here", False)], refuse_unknown=setting)
    assert asked == ["here", "config"]
    asked.clear()
    assert checks.is_known("bob", lookups=[look("here", False)], refuse_unknown=False)
    assert asked == []  # any name may read: nothing to look up


def test_checks_loads_no_models_for_the_hot_path() -> None:
    """``fast`` asks ``is_known`` on the hook's path, which never loads the dataclass models."""
    code = "import sys, agentmaild.store.checks; print('agentmaild.models' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=30)  # fmt: skip
    assert done.stdout.strip() == "False"
