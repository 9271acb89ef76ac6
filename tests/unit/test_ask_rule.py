"""``find_reply``, the one rule both of ``ask``'s waits use: only mail *to the asker*, from someone
else, on the question's own thread releases it.

Each condition of the rule has a message here that only that condition keeps out, so dropping any
one of them makes a test fail (issue 33, item 10).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.rules.ask import find_reply
from agentmaild.store.sqlite import SqliteMailStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteMailStore]:
    s = SqliteMailStore(tmp_path / "mail.db")
    for name, capability in (("lead", "lead"), ("worker", "builder"), ("observer", "reviewer")):
        s.add_agent(Agent(name=name, capability=capability))
    yield s
    s.close()


@pytest.fixture
def mailer(store: SqliteMailStore) -> Mailer:
    return Mailer(store)


def ask(mailer: Mailer) -> str:
    return mailer.send(
        sender="lead", to="worker", subject="which port?", body="?", type="question"
    ).ids[0]


def test_a_third_party_on_the_thread_to_someone_else_does_not_release(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    qid = ask(mailer)
    mailer.send(sender="observer", to="worker", subject="fyi", body="8081?", thread_id=qid)
    assert find_reply(store, qid, "lead") is None


def test_the_askers_own_follow_up_does_not_release(store: SqliteMailStore, mailer: Mailer) -> None:
    qid = ask(mailer)
    follow = mailer.reply(qid, sender="lead", body="also: which host?")
    assert store.get_message(follow.ids[0]).to_agent == "worker"  # the reply rule's direction
    # A note the asker sends itself on the thread is to the asker, yet not an answer.
    mailer.send(sender="lead", to="lead", subject="note", body="asked worker", thread_id=qid)
    assert find_reply(store, qid, "lead") is None


def test_a_reply_to_the_asker_on_another_thread_does_not_release(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    qid = ask(mailer)
    other = mailer.send(sender="lead", to="worker", subject="other", body="?").ids[0]
    mailer.reply(other, sender="worker", body="not this one")
    assert find_reply(store, qid, "lead") is None


def test_the_first_answer_to_the_asker_on_the_thread_is_the_reply(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    qid = ask(mailer)
    mailer.send(sender="observer", to="worker", subject="fyi", body="8081?", thread_id=qid)
    mailer.reply(qid, sender="lead", body="also: which host?")
    first = mailer.reply(qid, sender="worker", body="8080").ids[0]
    mailer.send(sender="observer", to="lead", subject="late", body="8082", thread_id=qid)
    found = find_reply(store, qid, "lead")
    assert found is not None
    assert (found.id, found.from_agent, found.body) == (first, "worker", "8080")
