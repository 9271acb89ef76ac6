"""Each send rule (``store.checks``) and who may read mail, on every store: the same error
class and the same text, and nothing written by a refused send. Runs on memory, SQLite and
PostgreSQL (conftest ``any_store``), each through both of its insert paths where it has two:
the one-statement send (SQLite's ``send_probe``, PostgreSQL's ``am_send_one``) and the general
one (taken here by giving the send an idempotency key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentmaild.config import LimitsConfig
from agentmaild.errors import (
    Conflict,
    InboxFull,
    LoopHeld,
    MailError,
    RateLimited,
    RecipientRefused,
    UnknownAgent,
)
from agentmaild.ids import iso_now, new_id
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Message
from agentmaild.store.base import MailStore
from agentmaild.store.guard import ThreadGuard
from agentmaild.store.records import InsertRequest, InsertResult

T0 = 1_700_000_000.0
Via = Callable[..., dict[str, Any]]


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    """Each store, with bob working, carol completed and zed a zombie; nobody unregistered."""
    for name in ("bob", "carol", "zed"):
        any_store.add_agent(Agent(name=name, capability="builder"))
    any_store.set_agent_state("carol", "completed", force=True)
    any_store.set_agent_state("zed", "zombie", force=True)
    return any_store


@pytest.fixture(params=["one-statement", "general"])
def via(request: pytest.FixtureRequest) -> Via:
    """A send's fields, sent the one-statement way or (with a fresh idempotency key) the
    general way."""
    general = request.param == "general"

    def fields(**kw: Any) -> dict[str, Any]:
        return {**kw, "idempotency": ("lead", new_id("key"), "digest")} if general else kw

    return fields


def msg(to: str = "bob", sender: str = "lead", thread: str | None = None) -> Message:
    return Message(id=new_id("msg"), from_agent=sender, to_agent=to, subject="s", body="b",
                   thread_id=thread, created_at=iso_now(T0))  # fmt: skip


def send(store: MailStore, *messages: Message, now: float = T0, **kw: Any) -> InsertResult:
    return store.insert(InsertRequest(messages=messages, now=now, **kw))


def refused(store: MailStore, error: type[MailError], *messages: Message, **kw: Any) -> str:
    """The text of the ``error`` the send raises; asserts it wrote nothing."""
    before = len(store.list_messages())
    with pytest.raises(error) as caught:
        send(store, *messages, **kw)
    assert type(caught.value) is error
    assert len(store.list_messages()) == before, "a refused send wrote"
    return caught.value.message


# -- recipient refusal --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("to", "text"),
    [
        ("nobody", "unknown recipient 'nobody': register it with `agentmaild agents add` "
                   "or check `agentmaild agents list`"),
        ("carol", "recipient carol is completed: it will never read this mail"),
        ("zed", "recipient zed is zombie: it will never read this mail"),
    ],
    ids=["unknown", "completed", "zombie"],
)  # fmt: skip
def test_a_refused_recipient(store: MailStore, via: Via, to: str, text: str) -> None:
    assert refused(store, RecipientRefused, msg(to), **via(check_recipients=(to,))) == text


def test_a_registered_recipient_and_any_name_when_unknown_ones_are_allowed(
    store: MailStore, via: Via
) -> None:
    assert send(store, msg("bob"), **via(check_recipients=("bob",))).messages
    lenient = send(store, msg("nobody"), **via(check_recipients=("nobody",), refuse_unknown=False))
    assert lenient.messages and store.inbox("nobody")
    # An ended recipient is refused whatever the setting.
    text = refused(store, RecipientRefused, msg("carol"),
                   **via(check_recipients=("carol",), refuse_unknown=False))  # fmt: skip
    assert text == "recipient carol is completed: it will never read this mail"


def test_a_removed_agent_is_unknown_again(store: MailStore, via: Via) -> None:
    store.remove_agent("bob")
    text = refused(store, RecipientRefused, msg("bob"), **via(check_recipients=("bob",)))
    assert text.startswith("unknown recipient 'bob'")


def test_another_registry_s_state_counts_as_much_as_ours(store: MailStore) -> None:
    """``known_elsewhere`` (Overstory's sessions): an end there refuses, a registration there
    admits a name we never registered."""
    ended = refused(store, RecipientRefused, msg("bob"), check_recipients=("bob",),
                    known_elsewhere=(("bob", "completed"),))  # fmt: skip
    assert ended == "recipient bob is completed: it will never read this mail"
    theirs = send(store, msg("ov-1"), check_recipients=("ov-1",),
                  known_elsewhere=(("ov-1", "working"),))  # fmt: skip
    assert theirs.messages


def test_one_refused_recipient_refuses_a_multi_recipient_send_whole(store: MailStore) -> None:
    text = refused(store, RecipientRefused, msg("bob"), msg("carol"),
                   check_recipients=("bob", "carol"))  # fmt: skip
    assert text == "recipient carol is completed: it will never read this mail"
    assert store.inbox("bob") == []


# -- unread cap ---------------------------------------------------------------------------------


def test_the_unread_cap(store: MailStore, via: Via) -> None:
    send(store, msg(), msg())
    text = refused(store, InboxFull, msg(), **via(unread_max=2, check_recipients=("bob",)))
    assert text == "inbox of bob is full (2 unread); retry once it reads its mail"
    store.ack([m.id for m in store.inbox("bob")][:1])
    assert send(store, msg(), **via(unread_max=2, check_recipients=("bob",))).messages
    # a multi-recipient send is refused whole when one inbox is full
    text = refused(store, InboxFull, msg("amy"), msg(), **via(unread_max=2))
    assert text == "inbox of bob is full (2 unread); retry once it reads its mail"


# -- rate limit ---------------------------------------------------------------------------------


def test_the_rate_limit(store: MailStore) -> None:
    limits: dict[str, Any] = {"rate_limit_max": 2, "rate_limit_window_s": 30.0}
    send(store, msg(), **limits)
    send(store, msg(), now=T0 + 1, **limits)
    text = refused(store, RateLimited, msg(), now=T0 + 2, **limits)
    assert text == "rate limit: lead→bob sent 2 messages in the last 30s (max 2)"
    assert send(store, msg(), now=T0 + 30, **limits).messages  # the first left the window


# -- idempotency --------------------------------------------------------------------------------


def test_an_idempotency_key_reused_for_other_content(store: MailStore) -> None:
    first = send(store, msg(), idempotency=("lead", "k1", "one"))
    again = send(store, msg(), idempotency=("lead", "k1", "one"))
    assert again.duplicate and again.messages == first.messages
    text = refused(store, Conflict, msg(), idempotency=("lead", "k1", "two"))
    assert text == "idempotency key 'k1' was already used by lead for other content"
    with pytest.raises(Conflict) as looked_up:
        store.find_idempotent("lead", "k1", "two")
    assert looked_up.value.message == text


# -- repeat collapse ----------------------------------------------------------------------------


def test_a_repeat_collapses_inside_its_window_only(store: MailStore, via: Via) -> None:
    first = send(store, msg(), **via(collapse=("d", 60.0), check_recipients=("bob",)))
    again = send(store, msg(), now=T0 + 59.5, **via(collapse=("d", 60.0)))
    assert again.collapsed and again.messages == first.messages
    # the window is (now - 60, now]: the first send left it
    later = send(store, msg(), now=T0 + 60.0, **via(collapse=("d", 60.0)))
    assert not later.duplicate
    assert store.rule_counters()["collapsed"] == 1


# -- thread guard -------------------------------------------------------------------------------


def test_the_thread_guard_holds_with_its_text(store: MailStore) -> None:
    def guard() -> ThreadGuard:
        return ThreadGuard(thread_id="msg-t", pair="a|b", max_messages=1, window_s=60.0,
                           escalation=msg("lead", "agentmaild", "msg-t"))  # fmt: skip

    assert not send(store, msg("b", "a", "msg-t"), thread_guard=guard()).held
    assert send(store, msg("a", "b", "msg-t"), now=T0 + 1, thread_guard=guard()).held
    text = refused(store, LoopHeld, msg("b", "a", "msg-t"), now=T0 + 2, thread_guard=guard())
    assert text == (
        "loop guard (limits.pingpong_max): thread msg-t between a and b is held; "
        "`agentmaild limits reset --thread msg-t` releases it"
    )


# -- known agents (reading mail as a name) -------------------------------------------------------


@pytest.mark.parametrize("refuse_unknown", [True, False], ids=["refusing", "lenient"])
def test_who_may_read_mail(store: MailStore, refuse_unknown: bool) -> None:
    """``Mailer.check_known`` (the CLI's and the HTTP API's reads) over each store: registered,
    ended or not, ever mailed, the operator; any name when unknown names are allowed."""
    mailer = Mailer(store, LimitsConfig(refuse_unknown_recipients=refuse_unknown))
    send(store, msg("ghost"))  # mailed, never registered
    for name in ("bob", "carol", "ghost", "operator"):
        mailer.check_known(name)
    if not refuse_unknown:
        mailer.check_known("nobody")
        return
    with pytest.raises(UnknownAgent) as caught:
        mailer.check_known("nobody")
    assert caught.value.message == (
        "unknown agent 'nobody': not registered and no mail was ever addressed to it "
        "(see `agentmaild agents list`; register it with `agentmaild agents add`)"
    )
