"""The team rules' part of the MailStore contract: collapse, the ping-pong cap, holds, counters."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agentmaild.errors import LoopHeld
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Message
from agentmaild.store.base import MailStore
from agentmaild.store.guard import ThreadGuard
from agentmaild.store.records import InsertRequest, InsertResult

T0 = 1_700_000_000.0


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    """Each of the three stores (conftest ``any_store``: SQLite, memory, PostgreSQL)."""
    s = any_store
    return s


def msg(sender: str = "a", to: str = "b", *, thread: str | None = None, at: float = T0) -> Message:
    return Message(
        id=new_id("msg"),
        from_agent=sender,
        to_agent=to,
        subject="s",
        body="b",
        thread_id=thread,
        created_at=iso_now(at),
    )


def guard(thread: str, n: int = 2, window: float = 60.0, to: str = "lead") -> ThreadGuard:
    esc = msg("agentmaild", to, thread=thread)
    return ThreadGuard(
        thread_id=thread, pair="a|b", max_messages=n, window_s=window, escalation=esc
    )


def put(store: MailStore, m: Message, now: float = T0, **kw: object) -> InsertResult:
    return store.insert(InsertRequest(messages=(m,), now=now, **kw))  # type: ignore[arg-type]


def test_a_repeat_inside_the_window_returns_the_first_and_counts_collapsed(
    store: MailStore,
) -> None:
    first = put(store, msg(), collapse=("d1", 60.0))
    again = put(store, msg(), now=T0 + 59, collapse=("d1", 60.0))
    assert again.duplicate and again.collapsed
    assert [m.id for m in again.messages] == [m.id for m in first.messages]
    assert len(store.inbox("b")) == 1
    assert store.rule_counters() == {"collapsed": 1, "unread_escalated": 0}


def test_a_repeat_after_the_window_or_of_other_content_is_new(store: MailStore) -> None:
    put(store, msg(), collapse=("d1", 60.0))
    later = put(store, msg(), now=T0 + 61, collapse=("d1", 60.0))
    other = put(store, msg(), now=T0 + 62, collapse=("d2", 60.0))
    assert not later.duplicate and not other.duplicate
    assert len(store.inbox("b")) == 3
    # The later send is the new original: a repeat of it collapses into it.
    assert put(store, msg(), now=T0 + 70, collapse=("d1", 60.0)).messages == later.messages
    assert store.rule_counters()["collapsed"] == 1


def test_the_cap_holds_the_thread_writes_one_escalation_and_refuses_more(
    store: MailStore,
) -> None:
    root = "msg-root1"
    assert not put(store, msg(thread=root), thread_guard=guard(root)).held
    assert not put(store, msg("b", "a", thread=root), now=T0 + 1, thread_guard=guard(root)).held
    tripped = put(store, msg(thread=root), now=T0 + 2, thread_guard=guard(root))
    assert tripped.held and tripped.messages == ()
    with pytest.raises(LoopHeld, match=r"limits reset --thread msg-root1"):
        put(store, msg("b", "a", thread=root), now=T0 + 3, thread_guard=guard(root))
    escalations = store.inbox("lead")
    assert len(escalations) == 1 and escalations[0].thread_id == root
    assert len(store.thread(root)) == 3  # two messages and the escalation; nothing refused
    assert store.release_thread(root) == 1
    assert not put(store, msg(thread=root), now=T0 + 4, thread_guard=guard(root)).held
    assert store.release_thread("msg-other") == 0


def test_the_cap_counts_inside_its_window_only(store: MailStore) -> None:
    root = "msg-root2"
    for i in range(5):  # one message a minute, the window is 60 s: never more than one in it
        assert not put(store, msg(thread=root), now=T0 + 61 * i, thread_guard=guard(root)).held
    assert store.inbox("lead") == []


def urgent(to: str = "b", at: float = T0, sender: str = "a", priority: str = "urgent") -> Message:
    return replace(msg(sender, to, at=at), priority=priority)


def test_take_overdue_returns_each_late_message_once(store: MailStore) -> None:
    late = urgent(at=T0)
    fresh = urgent(at=T0 + 250)
    normal = urgent(at=T0, priority="normal")  # off: never due
    own = urgent(at=T0, sender="agentmaild")  # agentmaild's own mail never escalates
    read = urgent(at=T0)
    for m in (late, fresh, normal, own, read):
        put(store, m)
    store.ack([read.id])
    after = {"urgent": 300.0, "high": 1800.0, "normal": 0.0, "low": 0.0}
    assert store.take_overdue(after, now=T0 + 200) == []
    assert [m.id for m in store.take_overdue(after, now=T0 + 301)] == [late.id]
    assert store.take_overdue(after, now=T0 + 400) == []  # taken already
    assert [m.id for m in store.take_overdue(after, now=T0 + 600)] == [fresh.id]
    assert store.rule_counters()["unread_escalated"] == 2
