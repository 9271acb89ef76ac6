"""Small SQLite stores the unit tests start from."""

from __future__ import annotations

from pathlib import Path

from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Message
from agentmaild.store.base import MailStore
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore


def with_bob_and_ended_carol(db: Path) -> SqliteMailStore:
    """A new store at ``db`` (left open) with bob registered and carol registered but completed,
    so a send can meet a recipient that takes mail, one that is ended and one never known."""
    store = SqliteMailStore(db)
    for name in ("bob", "carol"):
        store.add_agent(Agent(name=name, capability="builder"))
    store.set_agent_state("carol", "completed", force=True)
    return store


def put_queue_work(store: MailStore, n: int, at: float, queue: str = "work") -> list[str]:
    """``n`` messages to ``queue:<queue>``, sent at ``at`` a millisecond apart; their ids."""
    msgs = tuple(
        Message(id=new_id("msg"), from_agent="lead", to_agent=f"queue:{queue}", subject=f"s{i}",
                body="b", created_at=iso_now(at + i / 1000))
        for i in range(n)
    )
    store.insert(InsertRequest(messages=msgs, now=at))
    return [m.id for m in msgs]
