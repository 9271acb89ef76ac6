"""The status vocabulary: every registry state maps to a member status, member moves are guarded,
and ``set_status`` takes both vocabularies on both stores."""

from __future__ import annotations

import itertools

import pytest

from agentmaild.errors import StateError
from agentmaild.models import STATE_TRANSITIONS, Agent, AgentState
from agentmaild.models_status import (
    EXEC_OF_LOOP,
    EXEC_OF_TURN,
    MEMBER_OF_STATE,
    MEMBER_TRANSITIONS,
    STATE_OF_MEMBER,
    ExecutionStatus,
    MemberStatus,
)
from agentmaild.rules.members import execution_status, set_status
from agentmaild.store.base import MailStore


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    """Each of the three stores (conftest ``any_store``: SQLite, memory, PostgreSQL)."""
    s = any_store
    s.add_agent(Agent(name="w", capability="builder"))
    return s


def test_the_maps_cover_both_vocabularies() -> None:
    assert set(MEMBER_OF_STATE) == {s.value for s in AgentState} == set(STATE_TRANSITIONS)
    assert set(MEMBER_OF_STATE.values()) <= {m.value for m in MemberStatus}
    assert set(MEMBER_TRANSITIONS) == {m.value for m in MemberStatus}
    assert set(STATE_OF_MEMBER) == {m.value for m in MemberStatus} - {"shutdown_requested"}
    execs = {e.value for e in ExecutionStatus}
    assert set(EXEC_OF_LOOP.values()) <= execs and set(EXEC_OF_TURN.values()) <= execs
    # A member status stored as a state reads back as that member status.
    for member, (live, dead) in STATE_OF_MEMBER.items():
        assert MEMBER_OF_STATE[live] == member or member == "error"
        assert MEMBER_OF_STATE[dead] in (member, "ready", "busy", "error")


def test_execution_status_prefers_the_loop_then_the_hooks() -> None:
    agent = Agent(name="w", capability="builder", turn_state="waiting")
    assert execution_status(agent, "delivering") == "running"
    assert execution_status(agent, None) == "waiting"
    assert execution_status(Agent(name="w", capability="b"), None) == "unknown"
    assert execution_status(agent, "backoff") == "retrying"


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(MEMBER_TRANSITIONS, repeat=2)))
def test_member_moves_follow_the_table(store: MailStore, src: str, dst: str) -> None:
    set_status(store, "w", src, force=True)
    assert store.get_agent("w").member_status == src  # type: ignore[union-attr]
    if src == dst or dst in MEMBER_TRANSITIONS[src]:
        moved = set_status(store, "w", dst)
        assert moved.member_status == dst
        assert store.get_agent("w").member_status == dst  # type: ignore[union-attr]
    else:
        with pytest.raises(StateError, match=f"cannot go from {src} to {dst}"):
            set_status(store, "w", dst)
        assert store.get_agent("w").member_status == src  # type: ignore[union-attr]


def test_shutdown_requested_is_a_flag_cleared_by_shutdown(store: MailStore) -> None:
    set_status(store, "w", "working")
    requested = set_status(store, "w", "shutdown_requested")
    assert (requested.state, requested.member_status) == ("working", "shutdown_requested")
    done = set_status(store, "w", "shutdown")
    assert (done.state, done.member_status, done.shutdown_requested_at) == (
        "completed", "shutdown", None,
    )  # fmt: skip
    assert set_status(store, "w", "ready").state == "booting"  # back through booting
    with pytest.raises(StateError, match="unknown state 'sleepy'"):
        set_status(store, "w", "sleepy")
