"""The MailStore contract: every store (SQLite and the in-memory fake) passes this one module."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace

import pytest

from agentmaild.errors import Conflict, InboxFull, NotFound, RateLimited, StateError, StoreError
from agentmaild.ids import iso_now, new_id
from agentmaild.models import STATE_TRANSITIONS, Agent, Attempt, Batch, Message
from agentmaild.store.base import MailStore
from agentmaild.store.records import AgentProc, InsertRequest, InsertResult

T0 = 1_700_000_000.0  # a fixed wall clock: leases and stamps never depend on the real one
LEASE_S = 30.0


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    return any_store


def make(
    to: str = "bob",
    *,
    sender: str = "lead",
    at: float = T0,
    priority: str = "normal",
    subject: str = "s",
    body: str = "b",
    type: str = "status",
    thread_id: str | None = None,
) -> Message:
    return Message(
        id=new_id("msg"),
        from_agent=sender,
        to_agent=to,
        subject=subject,
        body=body,
        type=type,
        priority=priority,
        thread_id=thread_id,
        created_at=iso_now(at),
    )


def put(store: MailStore, *messages: Message, now: float = T0, **limits: object) -> InsertResult:
    return store.insert(InsertRequest(messages=messages, now=now, **limits))  # type: ignore[arg-type]


def claim(
    store: MailStore, agent: str = "bob", *, now: float = T0, n: int = 10, chars: int = 10_000
) -> Batch | None:
    return store.claim(agent, max_messages=n, max_chars=chars, lease_s=LEASE_S, now=now)


def ids(messages: Iterable[Message]) -> list[str]:
    return [m.id for m in messages]


def unread_ids(store: MailStore, agent: str = "bob") -> set[str]:
    return {m.id for m in store.inbox(agent, unread_only=True)}


# -- messages ---------------------------------------------------------------------------------


def test_insert_then_get_round_trips(store: MailStore) -> None:
    m = make(type="question", priority="high", thread_id="msg-root", subject="subj", body="body")
    m = replace(m, payload='{"k": 1}')
    result = put(store, m)
    assert not result.duplicate
    assert result.messages == (m,)
    assert store.get_message(m.id) == m
    assert store.get_message("msg-unknown") is None


def test_insert_stores_messages_unread_and_undelivered(store: MailStore) -> None:
    m = make()
    put(store, replace(m, read=True, delivery_id="dlv-x"))
    got = store.get_message(m.id)
    assert got is not None
    assert not got.read
    assert got.delivery_id is None


def test_insert_of_an_existing_id_fails_and_writes_nothing(store: MailStore) -> None:
    m = make()
    put(store, m)
    with pytest.raises(StoreError):
        put(store, make(), m)
    assert store.totals() == {"messages": 1, "unread": 1}


def test_inbox_is_chronological_and_filters_unread(store: MailStore) -> None:
    late, early, other = make(at=T0 + 2), make(at=T0 + 1), make("carol")
    put(store, late, early, other)
    assert ids(store.inbox("bob")) == [early.id, late.id]
    store.ack([early.id])
    assert ids(store.inbox("bob", unread_only=True)) == [late.id]
    assert ids(store.inbox("bob")) == [early.id, late.id]
    assert store.inbox("nobody") == []


def test_ack_returns_only_newly_acked_ids_and_ignores_unknown(store: MailStore) -> None:
    a, b, c = make(), make(), make()
    put(store, a, b, c)
    assert sorted(store.ack([a.id, "msg-unknown", b.id])) == sorted([a.id, b.id])
    assert store.ack([a.id, b.id]) == []
    assert store.ack([b.id, c.id]) == [c.id]
    assert store.ack([]) == []
    assert unread_ids(store) == set()


def test_take_unread_is_priority_then_time_order_and_acks(store: MailStore) -> None:
    low = make(priority="low", at=T0)
    normal_late, normal_early = make(at=T0 + 2), make(at=T0 + 1)
    urgent, high = make(priority="urgent", at=T0 + 5), make(priority="high", at=T0 + 4)
    put(store, low, normal_late, normal_early, urgent, high, make("carol"))
    taken = store.take_unread("bob")
    assert ids(taken) == [urgent.id, high.id, normal_early.id, normal_late.id, low.id]
    assert unread_ids(store) == set()
    assert store.take_unread("bob") == []
    assert len(unread_ids(store, "carol")) == 1


def test_take_unread_ties_on_created_at_break_by_id(store: MailStore) -> None:
    batch = [make(at=T0) for _ in range(5)]
    put(store, *reversed(batch))
    assert ids(store.take_unread("bob")) == sorted(m.id for m in batch)


def test_take_unread_without_ack_leaves_mail_unread(store: MailStore) -> None:
    m = make()
    put(store, m)
    assert ids(store.take_unread("bob", ack=False)) == [m.id]
    assert unread_ids(store) == {m.id}


def test_take_unread_max_chars_stops_before_passing_but_takes_at_least_one(
    store: MailStore,
) -> None:
    big = make(body="x" * 99, at=T0)  # size 100 with the 1-char subject
    small = [make(body="x" * 9, at=T0 + i) for i in range(1, 4)]  # size 10 each
    put(store, big, *small)
    assert ids(store.take_unread("bob", max_chars=50)) == [big.id]
    assert ids(store.take_unread("bob", max_chars=20)) == [small[0].id, small[1].id]  # = 20 fits
    assert ids(store.take_unread("bob", max_chars=10)) == [small[2].id]


def test_take_unread_skips_in_flight_but_takes_pending_and_dead(store: MailStore) -> None:
    first = make(at=T0)
    put(store, first)
    dead = claim(store)
    assert dead is not None
    store.release(dead.delivery_id, error="boom", max_attempts=1, now=T0)
    second = make(at=T0 + 1)
    put(store, second)
    pending = claim(store)
    assert pending is not None
    assert pending.message_ids == (second.id,)
    store.release(pending.delivery_id, error="busy", max_attempts=5, now=T0)
    third = make(at=T0 + 2)
    put(store, third)
    flying = claim(store)
    assert flying is not None
    assert flying.message_ids == (second.id,)  # the pending redelivery goes first
    assert ids(store.take_unread("bob")) == [first.id, third.id]
    assert unread_ids(store) == {second.id}


def test_list_messages_filters_newest_first_with_limit(store: MailStore) -> None:
    a = make(sender="lead", at=T0 + 1)
    b = make(sender="carol", at=T0 + 2, type="question")
    c = make("carol", sender="lead", at=T0 + 3)
    put(store, a, b, c)
    store.ack([b.id])
    assert ids(store.list_messages()) == [c.id, b.id, a.id]
    assert ids(store.list_messages(from_agent="lead")) == [c.id, a.id]
    assert ids(store.list_messages(to_agent="bob")) == [b.id, a.id]
    assert ids(store.list_messages(type="question")) == [b.id]
    assert ids(store.list_messages(unread=True)) == [c.id, a.id]
    assert ids(store.list_messages(unread=False)) == [b.id]
    assert ids(store.list_messages(limit=2)) == [c.id, b.id]
    assert ids(store.list_messages(from_agent="lead", to_agent="bob", unread=True)) == [a.id]
    assert store.list_messages(from_agent="nobody") == []


def test_thread_includes_the_root_in_order(store: MailStore) -> None:
    root = make(at=T0)
    reply = make("lead", sender="bob", at=T0 + 2, thread_id=root.id)
    reply2 = make(at=T0 + 1, thread_id=root.id)
    put(store, root, reply, reply2, make(at=T0 + 3, thread_id="msg-other"))
    assert ids(store.thread(root.id)) == [root.id, reply2.id, reply.id]
    assert ids(store.thread("msg-other")) != []
    assert store.thread("msg-none") == []


def test_purge_needs_a_filter_unless_everything(store: MailStore) -> None:
    put(store, make(), make())
    assert store.purge() == 0
    assert store.totals()["messages"] == 2
    assert store.purge(everything=True) == 2
    assert store.totals() == {"messages": 0, "unread": 0}


def test_purge_by_age_and_agent(store: MailStore) -> None:
    old, new = make(at=T0), make(at=T0 + 86_400)
    carol_in, carol_out = make("carol", at=T0 + 1), make("dave", sender="carol", at=T0 + 86_401)
    put(store, old, new, carol_in, carol_out)
    assert store.purge(older_than=iso_now(T0 + 10), agent="bob") == 1
    assert store.get_message(old.id) is None
    assert store.purge(agent="carol") == 2
    assert store.purge(older_than=iso_now(T0 + 10)) == 0
    assert ids(store.list_messages()) == [new.id]


def test_purge_clears_nudges_and_empty_deliveries(store: MailStore) -> None:
    m = make(priority="urgent")
    put(store, m, nudges=(("bob", m.id, "urgent"),))
    batch = claim(store)
    assert batch is not None
    store.release(batch.delivery_id, error="x", max_attempts=1, now=T0)
    assert store.purge(agent="bob") == 1
    assert store.take_nudges("bob") == []
    assert store.dead_letters() == []
    assert store.counts() == {}


def test_an_idempotency_key_whose_messages_are_gone_is_free_again(store: MailStore) -> None:
    put(store, make(), idempotency=("lead", "k9", "h9"))
    assert store.purge(everything=True) == 1
    assert store.sweep_orphans() == 0  # purge swept already
    fresh = make()
    again = put(store, fresh, idempotency=("lead", "k9", "h9"))
    assert not again.duplicate and ids(again.messages) == [fresh.id]


def test_a_claimed_batch_read_elsewhere_is_acked_as_read_elsewhere(store: MailStore) -> None:
    put(store, make())
    batch = claim(store)
    assert batch is not None
    store.ack([batch.message_ids[0]], by="elsewhere-test")  # by another reader, by name
    assert store.ack_delivery(batch.delivery_id, now=T0) == 0
    m = store.get_message(batch.message_ids[0])
    assert m is not None and m.acked_by == "elsewhere-test"  # a recorded reader is kept


# -- idempotency, limits, nudges --------------------------------------------------------------


def test_idempotent_repeat_returns_the_original_rows(store: MailStore) -> None:
    first = put(store, make(), make("carol"), idempotency=("lead", "k1", "h1"))
    again = put(store, make(), make("carol"), idempotency=("lead", "k1", "h1"))
    assert again.duplicate
    assert ids(again.messages) == ids(first.messages)
    assert store.totals()["messages"] == 2
    other_sender = put(store, make(), idempotency=("carol", "k1", "h2"))
    assert not other_sender.duplicate
    assert store.totals()["messages"] == 3


def test_idempotency_key_with_other_content_conflicts(store: MailStore) -> None:
    put(store, make(), idempotency=("lead", "k1", "h1"))
    with pytest.raises(Conflict):
        put(store, make(), idempotency=("lead", "k1", "h2"))
    assert store.totals()["messages"] == 1


def test_find_idempotent_answers_without_writing(store: MailStore) -> None:
    assert store.find_idempotent("lead", "k1", "h1") is None
    first = put(store, make(), make("carol"), idempotency=("lead", "k1", "h1"))
    found = store.find_idempotent("lead", "k1", "h1")
    assert found == InsertResult(messages=first.messages, duplicate=True)
    with pytest.raises(Conflict):
        store.find_idempotent("lead", "k1", "h2")
    assert store.find_idempotent("carol", "k1", "h1") is None
    assert store.totals()["messages"] == 2
    store.purge(agent="carol")  # the key outlives its rows: a repeat still writes nothing
    found = store.find_idempotent("lead", "k1", "h1")
    assert found == InsertResult(messages=first.messages[:1], duplicate=True)


def test_refused_insert_does_not_record_its_idempotency_key(store: MailStore) -> None:
    put(store, make(), make())
    with pytest.raises(InboxFull):
        put(store, make(), unread_max=2, idempotency=("lead", "k", "h1"))
    store.ack(list(unread_ids(store)))
    result = put(store, make(), unread_max=2, idempotency=("lead", "k", "h2"))
    assert not result.duplicate


def test_unread_cap_refuses_with_inbox_full(store: MailStore) -> None:
    put(store, make(), make(), unread_max=2)
    with pytest.raises(InboxFull):
        put(store, make("carol"), make(), unread_max=2)
    assert store.totals() == {"messages": 2, "unread": 2}  # the carol row was rolled back too
    put(store, make("carol"), unread_max=2)
    store.ack([next(iter(unread_ids(store)))])
    put(store, make(), unread_max=2)
    put(store, make(), make(), make())  # 0: no cap


def test_rate_limit_window_refuses_then_slides(store: MailStore) -> None:
    limits = {"rate_limit_max": 2, "rate_limit_window_s": 60.0}
    put(store, make(), now=T0, **limits)
    put(store, make(), now=T0 + 1, **limits)
    with pytest.raises(RateLimited):
        put(store, make(), now=T0 + 2, **limits)
    put(store, make("carol"), now=T0 + 2, **limits)  # another pair has its own window
    put(store, make(sender="carol"), now=T0 + 2, **limits)
    with pytest.raises(RateLimited):
        put(store, make(), now=T0 + 59.5, **limits)
    put(store, make(), now=T0 + 60, **limits)  # the window is (now - window_s, now]
    with pytest.raises(RateLimited):
        put(store, make(), now=T0 + 60.5, **limits)
    assert store.totals()["messages"] == 5


def test_rate_limit_counts_rows_of_the_same_request(store: MailStore) -> None:
    limits = {"rate_limit_max": 1, "rate_limit_window_s": 60.0}
    with pytest.raises(RateLimited):
        put(store, make(), make(), **limits)
    assert store.totals()["messages"] == 0
    put(store, make(), **limits)  # the refused request left no rate-log entry behind


def test_reset_rate_limit_clears_one_pair(store: MailStore) -> None:
    limits = {"rate_limit_max": 1, "rate_limit_window_s": 60.0}
    put(store, make(), **limits)
    put(store, make("carol"), **limits)
    with pytest.raises(RateLimited):
        put(store, make(), **limits)
    assert store.reset_rate_limit("lead", "bob") == 1
    assert store.reset_rate_limit("lead", "bob") == 0
    put(store, make(), **limits)
    with pytest.raises(RateLimited):
        put(store, make("carol"), **limits)


def test_nudges_are_queued_returned_once_and_cleared(store: MailStore) -> None:
    urgent = make(priority="urgent", subject="fire", type="escalation", sender="carol")
    done = make(type="worker_done")
    put(store, urgent, nudges=(("bob", urgent.id, "urgent"),), now=T0)
    put(store, done, nudges=(("bob", done.id, "worker_done"),), now=T0 + 1)
    put(store, make("dave"), nudges=(("dave", "msg-x", "x"),))
    nudges = store.take_nudges("bob")
    assert nudges == [
        {
            "message_id": urgent.id,
            "reason": "urgent",
            "subject": "fire",
            "priority": "urgent",
            "type": "escalation",
            "from_agent": "carol",
        },
        {
            "message_id": done.id,
            "reason": "worker_done",
            "subject": "s",
            "priority": "normal",
            "type": "worker_done",
            "from_agent": "lead",
        },
    ]
    assert store.take_nudges("bob") == []


def test_nudges_of_read_mail_are_not_returned(store: MailStore) -> None:
    a, b, c = make(priority="high"), make(priority="high"), make(priority="high")
    put(store, a, b, c, nudges=tuple(("bob", m.id, "high") for m in (a, b, c)))
    store.ack([a.id])
    batch = claim(store)
    assert batch is not None
    store.ack_delivery(batch.delivery_id, now=T0)  # b and c read through the daemon
    assert store.take_nudges("bob") == []
    d = make(priority="high")
    put(store, d, nudges=(("bob", d.id, "high"),))
    store.take_unread("bob", ack=False)
    assert [n["message_id"] for n in store.take_nudges("bob")] == [d.id]


# -- agents -----------------------------------------------------------------------------------


def agent(name: str = "bob", **fields: object) -> Agent:
    return Agent(name=name, capability="builder", **fields)  # type: ignore[arg-type]


def test_agents_add_get_list_remove(store: MailStore) -> None:
    added = store.add_agent(
        agent("zed", channel="spawn", command=("claude", "-p"), cwd="/w", settings={"ack_on": "x"})
    )
    assert added.created_at
    assert added.updated_at == added.created_at
    store.add_agent(agent("amy", parent="zed"))
    assert store.get_agent("zed") == added
    assert [a.name for a in store.list_agents()] == ["amy", "zed"]
    with pytest.raises(Conflict):
        store.add_agent(agent("amy"))
    store.remove_agent("amy")
    assert store.get_agent("amy") is None
    with pytest.raises(NotFound):
        store.remove_agent("amy")
    assert [a.name for a in store.list_agents()] == ["zed"]


def test_add_agent_keeps_every_given_field(store: MailStore) -> None:
    """What add_agent returns is what get_agent reads back, turn_state included."""
    added = store.add_agent(agent(turn_state="idle", state="working", session_id="s-1"))
    assert store.get_agent("bob") == added
    assert added.turn_state == "idle"


def test_update_agent_changes_mutable_fields_only(store: MailStore) -> None:
    store.add_agent(agent())
    updated = store.update_agent("bob", {"command": ["x", "y"], "poll_interval_s": 0.5})
    assert updated.command == ("x", "y")
    assert updated.poll_interval_s == 0.5
    assert updated.turn_state_at is None
    assert store.get_agent("bob") == updated
    turned = store.update_agent("bob", {"turn_state": "busy", "settings": {"a": 1}})
    assert turned.turn_state == "busy"
    assert turned.turn_state_at == turned.updated_at
    assert store.get_agent("bob") == turned
    with pytest.raises(StoreError):
        store.update_agent("bob", {"state": "idle"})
    with pytest.raises(StoreError):
        store.update_agent("bob", {"name": "other"})
    with pytest.raises(NotFound):
        store.update_agent("nobody", {"cwd": "/"})


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(STATE_TRANSITIONS, repeat=2)))
def test_set_agent_state_follows_the_transition_table(store: MailStore, src: str, dst: str) -> None:
    store.add_agent(agent(state=src))
    if dst == src or dst in STATE_TRANSITIONS[src]:
        assert store.set_agent_state("bob", dst).state == dst
    else:
        with pytest.raises(StateError):
            store.set_agent_state("bob", dst)
        assert store.set_agent_state("bob", dst, force=True).state == dst
    got = store.get_agent("bob")
    assert got is not None
    assert got.state == dst


def test_set_agent_state_errors(store: MailStore) -> None:
    with pytest.raises(NotFound):
        store.set_agent_state("nobody", "idle")
    store.add_agent(agent())
    with pytest.raises(StateError):
        store.set_agent_state("bob", "asleep", force=True)


# -- deliveries -------------------------------------------------------------------------------


def test_claim_takes_priority_order_in_batches_of_max_messages(store: MailStore) -> None:
    msgs = [make(priority=p, at=T0 + i) for i, p in enumerate(["low", "normal", "urgent", "high"])]
    put(store, *msgs, make("carol"))
    first = claim(store, n=3)
    assert first is not None
    assert first.agent == "bob"
    assert first.attempt == 1
    assert not first.redelivery
    assert first.lease_until == T0 + LEASE_S
    assert first.message_ids == (msgs[2].id, msgs[3].id, msgs[1].id)
    assert first.delivery_id.startswith("dlv-")
    store.ack_delivery(first.delivery_id, now=T0)
    second = claim(store, n=3)
    assert second is not None
    assert second.message_ids == (msgs[0].id,)
    assert second.delivery_id != first.delivery_id
    store.ack_delivery(second.delivery_id, now=T0)
    assert claim(store) is None


def test_claim_batches_by_max_chars_with_at_least_one(store: MailStore) -> None:
    big = make(body="x" * 99, at=T0)
    small = [make(body="x" * 9, at=T0 + i) for i in range(1, 4)]
    put(store, big, *small)
    for expected in ([big.id], [small[0].id, small[1].id], [small[2].id]):
        batch = claim(store, chars=20)
        assert batch is not None
        assert list(batch.message_ids) == expected
        store.ack_delivery(batch.delivery_id, now=T0)


def test_claimed_messages_carry_their_delivery_id(store: MailStore) -> None:
    put(store, make())
    batch = claim(store)
    assert batch is not None
    got = store.get_message(batch.message_ids[0])
    assert got is not None
    assert got.delivery_id == batch.delivery_id
    assert all(m.delivery_id == batch.delivery_id for m in batch.messages)
    store.release(batch.delivery_id, error="x", max_attempts=5, now=T0)
    again = claim(store)
    assert again is not None
    assert all(m.delivery_id == batch.delivery_id for m in again.messages)


def test_an_active_lease_blocks_a_second_claim_for_that_agent(store: MailStore) -> None:
    put(store, make(), make("carol"))
    first = claim(store, n=1)
    assert first is not None
    put(store, make())
    assert claim(store, now=T0 + LEASE_S - 1) is None
    other = claim(store, "carol")
    assert other is not None
    assert store.extend_lease(first.delivery_id, lease_s=LEASE_S, now=T0 + 10)
    assert claim(store, now=T0 + LEASE_S + 1) is None
    store.ack_delivery(first.delivery_id, now=T0 + 11)
    assert claim(store, now=T0 + 11) is not None


def test_release_redelivers_the_same_delivery_id_with_the_next_attempt(store: MailStore) -> None:
    put(store, make(), make())
    batch = claim(store)
    assert batch is not None
    released = store.release(batch.delivery_id, error="busy", max_attempts=3, now=T0 + 1)
    assert (released.state, released.failures, released.messages) == ("pending", 1, ())
    put(store, make(priority="urgent", at=T0 + 2))
    again = claim(store, now=T0 + 2)
    assert again is not None
    assert again.delivery_id == batch.delivery_id
    assert again.attempt == 2
    assert again.redelivery
    assert again.message_ids == batch.message_ids
    clean = store.release(again.delivery_id, error="stop", max_attempts=3, now=T0 + 3, count=0)
    assert (clean.state, clean.failures) == ("pending", 1)
    third = claim(store, now=T0 + 4)
    assert third is not None
    assert (third.delivery_id, third.attempt) == (batch.delivery_id, 3)


def test_release_after_max_attempts_makes_a_dead_letter(store: MailStore) -> None:
    a, b = make(at=T0), make(at=T0 + 1)
    put(store, a, b)
    batch = claim(store)
    assert batch is not None
    store.release(batch.delivery_id, error="one", max_attempts=2, now=T0 + 1)
    again = claim(store, now=T0 + 2)
    assert again is not None
    store.ack([a.id])
    dead = store.release(again.delivery_id, error="two", max_attempts=2, now=T0 + 3)
    assert (dead.state, dead.failures) == ("dead", 2)
    assert ids(dead.messages) == [b.id]  # only what is still unread
    assert claim(store, now=T0 + 4) is None
    assert "bob" not in store.pending_agents()
    [letter] = store.dead_letters()
    assert letter.delivery_id == batch.delivery_id
    assert letter.agent == "bob"
    assert letter.message_ids == (a.id, b.id)
    assert letter.attempts == 2
    assert letter.last_error == "two"
    assert letter.dead_at == iso_now(T0 + 3)
    assert store.dead_letters("bob") == [letter]
    assert store.dead_letters("carol") == []


def test_release_of_an_unclaimed_delivery_is_not_found(store: MailStore) -> None:
    with pytest.raises(NotFound):
        store.release("dlv-nothing", error="x", max_attempts=3, now=T0)
    put(store, make())
    batch = claim(store)
    assert batch is not None
    store.ack_delivery(batch.delivery_id, now=T0)
    with pytest.raises(NotFound):
        store.release(batch.delivery_id, error="x", max_attempts=3, now=T0)
    assert not store.extend_lease(batch.delivery_id, lease_s=5, now=T0)
    assert not store.extend_lease("dlv-nothing", lease_s=5, now=T0)


def test_retry_dead_requeues_by_agent_or_id(store: MailStore) -> None:
    dead: dict[str, str] = {}
    for who in ("bob", "carol", "dave"):
        put(store, make(who))
        batch = claim(store, who)
        assert batch is not None
        store.release(batch.delivery_id, error="x", max_attempts=1, now=T0)
        dead[who] = batch.delivery_id
    assert store.pending_agents() == set()
    assert store.retry_dead(agent="bob") == [dead["bob"]]
    assert store.retry_dead(delivery_id=dead["carol"]) == [dead["carol"]]
    assert store.retry_dead(delivery_id=dead["carol"]) == []
    assert store.pending_agents() == {"bob", "carol"}
    again = claim(store)
    assert again is not None
    assert (again.delivery_id, again.attempt) == (dead["bob"], 2)
    failed = store.release(again.delivery_id, error="y", max_attempts=2, now=T0)
    assert failed.state == "pending"  # retry reset the failure count
    assert store.retry_dead() == [dead["dave"]]
    assert store.dead_letters() == []


def test_ack_delivery_marks_read_and_counts_once(store: MailStore) -> None:
    a, b = make(), make()
    put(store, a, b)
    batch = claim(store)
    assert batch is not None
    store.ack([a.id])
    assert store.ack_delivery(batch.delivery_id, now=T0 + 1) == 1
    assert store.ack_delivery(batch.delivery_id, now=T0 + 1) == 0
    assert store.ack_delivery("dlv-nothing", now=T0) == 0
    assert unread_ids(store) == set()
    assert store.counts() == {}
    assert claim(store) is None


def test_a_pending_delivery_read_by_pull_is_skipped(store: MailStore) -> None:
    a, b = make(at=T0), make(at=T0 + 1)
    put(store, a, b)
    batch = claim(store)
    assert batch is not None
    store.release(batch.delivery_id, error="x", max_attempts=5, now=T0)
    assert ids(store.take_unread("bob")) == [a.id, b.id]
    assert "bob" not in store.pending_agents()
    assert claim(store) is None
    fresh = make(at=T0 + 2)
    put(store, fresh)
    nxt = claim(store)
    assert nxt is not None
    assert nxt.delivery_id != batch.delivery_id
    assert nxt.message_ids == (fresh.id,)


def test_a_partly_read_pending_delivery_redelivers_the_rest(store: MailStore) -> None:
    a, b = make(at=T0), make(at=T0 + 1)
    put(store, a, b)
    batch = claim(store)
    assert batch is not None
    store.release(batch.delivery_id, error="x", max_attempts=5, now=T0)
    store.ack([a.id])
    again = claim(store)
    assert again is not None
    assert (again.delivery_id, again.message_ids, again.attempt) == (batch.delivery_id, (b.id,), 2)


def test_reap_expired_requeues_only_expired_claims(store: MailStore) -> None:
    put(store, make(), make("carol"), make("dave"))
    old = claim(store, now=T0)
    mid = claim(store, "carol", now=T0 + 10)
    young = claim(store, "dave", now=T0 + 20)
    assert old is not None
    assert mid is not None
    assert young is not None
    assert store.reap_expired(now=T0 + 5) == []
    reaped = store.reap_expired(now=T0 + LEASE_S + 10)  # mid's lease ends exactly now
    assert reaped == sorted([(old.delivery_id, "bob"), (mid.delivery_id, "carol")])
    assert store.reap_expired(now=T0 + LEASE_S + 10) == []
    assert store.pending_agents() == {"bob", "carol"}
    again = claim(store, now=T0 + LEASE_S + 11)
    assert again is not None
    assert (again.delivery_id, again.attempt) == (old.delivery_id, 2)
    assert store.counts()["dave"].in_flight == 1  # young was not reaped: still claimed
    assert store.release(young.delivery_id, error="x", max_attempts=1, now=T0 + 41).state == "dead"


def test_reap_everything_requeues_live_claims_too(store: MailStore) -> None:
    """What the daemon does at start: no claim of a dead process is still being worked on."""
    put(store, make(), make("carol"))
    bob, carol = claim(store), claim(store, "carol")
    assert bob is not None
    assert carol is not None
    reaped = store.reap_expired(now=T0, everything=True)
    assert reaped == sorted([(bob.delivery_id, "bob"), (carol.delivery_id, "carol")])
    assert store.reap_expired(now=T0, everything=True) == []
    again = claim(store, now=T0)
    assert again is not None
    assert (again.delivery_id, again.attempt, again.message_ids) == (
        bob.delivery_id,
        2,
        bob.message_ids,
    )


def test_pending_agents_excludes_in_flight_and_dead(store: MailStore) -> None:
    assert store.pending_agents() == set()
    put(store, make(), make("carol"), make("dave"), make("erin"))
    store.ack([m.id for m in store.inbox("erin")])
    assert store.pending_agents() == {"bob", "carol", "dave"}
    flying = claim(store)
    dead = claim(store, "carol")
    assert flying is not None
    assert dead is not None
    store.release(dead.delivery_id, error="x", max_attempts=1, now=T0)
    assert store.pending_agents() == {"dave"}
    put(store, make())
    assert store.pending_agents() == {"bob", "dave"}  # new mail waits behind the lease


def test_counts_and_totals(store: MailStore) -> None:
    assert store.counts() == {}
    assert store.totals() == {"messages": 0, "unread": 0}
    put(store, make(), make(), make("carol"), make("dave"), make("erin"))
    store.ack([m.id for m in store.inbox("erin")])
    flying = claim(store, n=1)
    dead = claim(store, "carol")
    assert flying is not None
    assert dead is not None
    store.release(dead.delivery_id, error="x", max_attempts=1, now=T0)
    counts = store.counts()
    assert set(counts) == {"bob", "carol", "dave"}
    assert (counts["bob"].unread, counts["bob"].in_flight, counts["bob"].dead_letters) == (2, 1, 0)
    assert (counts["carol"].unread, counts["carol"].in_flight, counts["carol"].dead_letters) == (
        1,
        0,
        1,
    )
    assert counts["dave"].agent == "dave"
    assert (counts["dave"].unread, counts["dave"].in_flight) == (1, 0)
    assert store.totals() == {"messages": 5, "unread": 4}


# -- agent processes ---------------------------------------------------------------------------


def proc(pid: int, agent: str = "bob", *, start: str = "100", at: float = T0) -> AgentProc:
    return AgentProc(
        pid=pid, start_time=start, pgid=pid, agent=agent, delivery_id=f"dlv-{pid}",
        daemon_pid=7, started_at=at,
    )


def test_record_list_and_forget_agent_procs(store: MailStore) -> None:
    assert store.list_procs() == []
    store.record_proc(proc(30, at=T0 + 2))
    store.record_proc(proc(20, "ann", at=T0 + 1))
    store.record_proc(AgentProc(
        pid=40, start_time="9", pgid=40, agent="bob", delivery_id=None, daemon_pid=7,
        started_at=T0 + 3,
    ))
    assert [p.pid for p in store.list_procs()] == [20, 30, 40]  # oldest first
    assert store.list_procs("bob") == [proc(30, at=T0 + 2), store.list_procs("bob")[1]]
    assert store.list_procs("bob")[1].delivery_id is None
    assert store.forget_proc(30, "100") is True
    assert store.forget_proc(30, "100") is False
    assert [p.pid for p in store.list_procs()] == [20, 40]


def test_a_proc_is_its_pid_and_start_time(store: MailStore) -> None:
    store.record_proc(proc(30, start="100"))
    store.record_proc(proc(30, start="200"))  # the pid reused by a later process
    store.record_proc(proc(30, "ann", start="200"))  # the same process recorded again: replaced
    assert sorted((p.start_time, p.agent) for p in store.list_procs()) == [
        ("100", "bob"), ("200", "ann")
    ]
    assert store.forget_proc(30, "999") is False  # another process under that pid: untouched
    assert store.forget_proc(30, "100") is True
    assert [(p.pid, p.start_time) for p in store.list_procs()] == [(30, "200")]

# -- read marks and the delivery history ------------------------------------------------------


def attempt(
    batch: Batch | None, outcome: str, *, at: float, error: str | None = None, agent: str = "bob"
) -> Attempt:
    assert batch is not None
    return Attempt(
        delivery_id=batch.delivery_id,
        agent=agent,
        message_ids=batch.message_ids,
        attempt=batch.attempt,
        outcome=outcome,
        error=error,
        duration_s=0.25,
        at=at,
    )


def test_read_marks_say_when_and_by_whom(store: MailStore) -> None:
    a, b, c = make(at=T0), make(at=T0 + 1), make("carol")
    put(store, a, b, c)
    batch = claim(store, n=1)
    assert batch is not None
    store.ack_delivery(batch.delivery_id, now=T0 + 5)
    got = store.get_message(a.id)
    assert got is not None
    assert (got.read, got.acked_by, got.acked_at) == (True, batch.delivery_id, iso_now(T0 + 5))
    assert got.delivery_id == batch.delivery_id
    store.take_unread("bob")
    assert store.get_message(b.id).acked_by == "pull"  # type: ignore[union-attr]
    assert store.get_message(b.id).acked_at  # type: ignore[union-attr]
    store.ack([c.id], by="operator")
    assert store.get_message(c.id).acked_by == "operator"  # type: ignore[union-attr]
    fresh = make()
    put(store, replace(fresh, acked_by="forged", acked_at="x"))
    assert store.get_message(fresh.id).acked_by is None  # type: ignore[union-attr]


def test_ack_delivery_writes_its_attempt_in_the_same_step(store: MailStore) -> None:
    put(store, make(), make())
    batch = claim(store)
    assert batch is not None
    store.ack_delivery(batch.delivery_id, now=T0 + 2, record=attempt(batch, "acked", at=T0 + 2))
    [row] = store.list_attempts()
    assert row.id > 0
    assert (row.delivery_id, row.agent, row.message_ids) == (
        batch.delivery_id,
        "bob",
        batch.message_ids,
    )
    assert (row.attempt, row.outcome, row.error, row.duration_s, row.at) == (
        1,
        "acked",
        None,
        0.25,
        T0 + 2,
    )
    assert row.to_dict()["at"] == iso_now(T0 + 2)


def _release_with(store: MailStore, outcome: str, error: str, *, now: float, count: int = 1) -> str:
    batch = claim(store, now=now - 1)
    assert batch is not None
    record = attempt(batch, outcome, at=now, error=error)
    return store.release(
        batch.delivery_id, error=error, max_attempts=2, now=now, count=count, record=record
    ).state


def test_release_records_failed_then_dead_and_a_clean_release(store: MailStore) -> None:
    put(store, make())
    assert _release_with(store, "failed", "boom", now=T0 + 1) == "pending"
    assert _release_with(store, "released", "stop", now=T0 + 3, count=0) == "pending"
    assert _release_with(store, "unavailable", "x" * 5000, now=T0 + 5) == "dead"
    rows = store.list_attempts()
    assert [(r.attempt, r.outcome) for r in rows] == [(3, "dead"), (2, "released"), (1, "failed")]
    assert rows[0].error == "x" * 2000  # capped like the delivery's last_error
    assert (rows[1].error, rows[2].error) == ("stop", "boom")
    assert rows[0].id > rows[1].id > rows[2].id


def test_a_release_that_finds_no_claim_records_nothing(store: MailStore) -> None:
    put(store, make())
    batch = claim(store)
    assert batch is not None
    store.ack_delivery(batch.delivery_id, now=T0)
    with pytest.raises(NotFound):
        store.release(
            batch.delivery_id,
            error="late",
            max_attempts=3,
            now=T0 + 1,
            record=attempt(batch, "failed", at=T0 + 1),
        )
    assert store.list_attempts() == []


def _history(store: MailStore) -> tuple[Attempt, ...]:
    rows = (
        Attempt(delivery_id="dlv-aaaaaa1", agent="bob", message_ids=("msg-a", "msg-b"),
                attempt=1, outcome="failed", error="e", at=T0),
        Attempt(delivery_id="dlv-aaaaaa1", agent="bob", message_ids=("msg-a", "msg-b"),
                attempt=2, outcome="acked", at=T0 + 10),
        Attempt(delivery_id="dlv-cccccc1", agent="carol", message_ids=("msg-c",),
                attempt=1, outcome="unavailable", at=T0 + 20),
        Attempt(delivery_id="dlv-bbbbbb2", agent="bob", message_ids=("msg-ab",),
                attempt=1, outcome="acked", at=T0 + 30),
    )  # fmt: skip
    for r in rows:
        store.record_attempt(r)
    return rows


def test_list_attempts_filters_newest_first(store: MailStore) -> None:
    rows = _history(store)

    def keys(found: list[Attempt]) -> list[tuple[str, int]]:
        return [(a.delivery_id, a.attempt) for a in found]

    every = [(r.delivery_id, r.attempt) for r in reversed(rows)]
    assert keys(store.list_attempts()) == every
    assert keys(store.list_attempts(limit=None)) == every
    assert keys(store.list_attempts(limit=2)) == every[:2]
    assert keys(store.list_attempts(agent="bob")) == [
        ("dlv-bbbbbb2", 1),
        ("dlv-aaaaaa1", 2),
        ("dlv-aaaaaa1", 1),
    ]
    assert keys(store.list_attempts(agent="dave")) == []
    # A message id matches whole ids only: msg-a is not msg-ab.
    assert keys(store.list_attempts(message_id="msg-a")) == [("dlv-aaaaaa1", 2), ("dlv-aaaaaa1", 1)]
    assert keys(store.list_attempts(since=T0 + 10)) == every[:3]
    assert keys(store.list_attempts(agent="bob", since=T0 + 5, limit=1)) == [("dlv-bbbbbb2", 1)]
    assert store.list_attempts(since=T0 + 31) == []


def test_purge_attempts_by_age_agent_or_everything(store: MailStore) -> None:
    _history(store)
    assert store.purge_attempts() == 0
    assert store.purge_attempts(older_than=T0 + 10) == 1
    assert store.purge_attempts(agent="carol") == 1
    assert store.purge_attempts(older_than=T0 + 25, agent="carol") == 0
    assert [a.at for a in store.list_attempts()] == [T0 + 30, T0 + 10]
    assert store.purge_attempts(everything=True) == 2
    assert store.list_attempts() == []


# -- HTTP API tokens (schema 4) ---------------------------------------------------------------
def test_tokens_are_stored_by_hash_listed_and_revoked(store: MailStore) -> None:
    from agentmaild.errors import StoreError
    from agentmaild.trust.tokens import hash_secret, mint

    secret, record = mint("bob", ("read", "ack"), now=1000.0, expires_in_s=60.0)
    store.add_token(record)
    later_secret, later = mint("operator", ("read", "send", "ack"), now=2000.0, expires_in_s=None)
    store.add_token(later)
    assert store.find_token(hash_secret(secret)) == record
    assert store.find_token(hash_secret(secret + "x")) is None
    assert secret not in repr(store.list_tokens())  # only the hash is kept
    assert [t.id for t in store.list_tokens()] == [record.id, later.id]
    assert record.usable(1059.0) is None and record.usable(1060.0) == "expired"
    assert store.revoke_token(record.id, now=1500.0) is True
    assert store.revoke_token(record.id, now=1600.0) is False  # already revoked
    assert store.revoke_token("tok-unknown", now=1600.0) is False
    revoked = store.find_token(hash_secret(secret))
    assert revoked is not None and revoked.revoked_at == 1500.0 and revoked.usable(0) == "revoked"
    assert store.find_token(hash_secret(later_secret)) == later
    with pytest.raises(StoreError):
        store.add_token(record)  # the same id twice


def test_reap_of_one_agent_requeues_only_its_claims(store: MailStore) -> None:
    """A loop restarted after a claim whose answer was lost: its agent's claims, live or not."""
    put(store, make(), make("carol"))
    bob, carol = claim(store), claim(store, "carol")
    assert bob is not None
    assert carol is not None
    assert store.reap_expired(now=T0, everything=True, agent="carol") == [
        (carol.delivery_id, "carol")
    ]
    assert store.reap_expired(now=T0, everything=True, agent="carol") == []
    assert store.counts()["bob"].in_flight == 1  # another agent's live claim is left alone
    assert store.reap_expired(now=T0 + LEASE_S + 1, agent="dave") == []  # nor an expired one
    assert store.reap_expired(now=T0 + LEASE_S + 1) == [(bob.delivery_id, "bob")]


def test_unread_among_names_only_stored_unread_messages(store: MailStore) -> None:
    """The loop's look for mail read elsewhere, before it injects a claimed batch."""
    a, b, c = make(at=T0), make(at=T0 + 1), make(at=T0 + 2)
    put(store, a, b, c)
    store.ack([b.id])
    assert store.unread_among([a.id, b.id, c.id, "msg-gone"]) == {a.id, c.id}
    assert store.unread_among([]) == set()
