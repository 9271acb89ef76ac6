"""Random walks over every MailStore (send, claim, ack, release, reap, pull, purge): none lost.

The differential machine also runs the send's checks (``store.checks``) on all three stores at
once: recipients added, ended and removed, refused or let through, repeats collapsed, threads
held by the ping-pong cap and released, multi-recipient sends; each answer, error text included,
must match. The PostgreSQL machines take their databases from the session's server
(``pg_databases``, made available to hypothesis by the autouse fixture below).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from agentmaild.errors import AgentmaildError
from agentmaild.ids import iso_now, new_id
from agentmaild.models import PRIORITY_RANK, Agent, Attempt, Batch, Message
from agentmaild.store.base import MailStore
from agentmaild.store.guard import ThreadGuard
from agentmaild.store.memory import MemoryMailStore
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.pg import PgDatabases, session_databases

AGENTS = ("bob", "carol")
LEASE_S = 10.0
TO = st.sampled_from(AGENTS)
PRIORITY = st.sampled_from(sorted(PRIORITY_RANK))
SIZE = st.integers(0, 30)
TICK = st.sampled_from([0.0, 0.001, 1.0])  # a zero tick ties created_at: order falls back to id
ADVANCE = st.sampled_from([0.0, 1.0, LEASE_S / 2, LEASE_S, LEASE_S + 1])
BOUNDED = settings(max_examples=50, stateful_step_count=30, deadline=None)
# The differential machine's registry: the mail recipients and one name only ever registered.
NAMES = st.sampled_from((*AGENTS, "dave"))
STATES = st.sampled_from(("booting", "working", "idle", "completed", "zombie"))
# A send's checks, as ``Mailer.send`` builds them from the config: recipients checked (or not,
# as for a group member or the operator), unknown names refused or let through, another
# registry's state, the repeat collapse, the ping-pong cap.
CHECKS = st.fixed_dictionaries(
    {
        "check": st.booleans(),
        "refuse_unknown": st.booleans(),
        "elsewhere": st.none() | st.sampled_from(("working", "completed")),
        # One window per store, as the config gives (the fake forgets by the current window).
        "collapse": st.none() | st.sampled_from("xy"),
        "thread": st.none() | st.sampled_from(("msg-t1", "msg-t2")),
    }
)


@pytest.fixture(autouse=True)
def _postgres(pg_databases: PgDatabases) -> None:
    """Starts (once) the server the PostgreSQL machines below take their databases from."""


class PgStore(PostgresMailStore):
    """A PostgresMailStore on a database of its own, handed back to the session on close."""

    def __init__(self) -> None:
        super().__init__(session_databases().create())

    def close(self) -> None:
        super().close()
        session_databases().drop(self.dsn)


def order(m: Message) -> tuple[int, str, str]:
    return (PRIORITY_RANK[m.priority], m.created_at, m.id)


class StoreMachine(RuleBasedStateMachine):
    """A model of what the daemon holds; the store must agree with it after every step."""

    make_store: ClassVar[Callable[[Path], MailStore]]

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="agentmaild-stateful-"))
        self.store = type(self).make_store(self.tmp)
        self.clock = 1_700_000_000.0
        self.sent: dict[str, Message] = {}
        self.purged: set[str] = set()
        self.active: dict[str, Batch] = {}  # claimed and not yet acked, released or reaped
        self.first_claim: dict[str, str] = {}  # message id -> delivery id that first claimed it
        self.members: dict[str, set[str]] = {}  # delivery id -> its message ids

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------
    def live(self) -> list[Message]:
        return [m for i, m in self.sent.items() if i not in self.purged]

    def is_read(self, message_id: str) -> bool:
        m = self.store.get_message(message_id)
        assert m is not None, f"{message_id} vanished without a purge"
        return m.read

    def unread(self) -> list[Message]:
        """Every live message still unread, from one store query."""
        read = {m.id: m.read for m in self.store.list_messages()}
        assert set(read) == {m.id for m in self.live()}, "a message vanished without a purge"
        return [m for m in self.live() if not read[m.id]]

    def in_flight(self) -> set[str]:
        return {i for b in self.active.values() for i in b.message_ids}

    # -- rules ------------------------------------------------------------------------------
    @initialize(mail=st.lists(st.tuples(TO, PRIORITY, SIZE, TICK), min_size=1, max_size=8))
    def some_mail(self, mail: list[tuple[str, str, int, float]]) -> None:
        for args in mail:
            self.send(*args)

    @rule(to=TO, priority=PRIORITY, size=SIZE, tick=TICK)
    def send(self, to: str, priority: str, size: int, tick: float) -> None:
        self.clock += tick
        m = Message(
            id=new_id("msg"),
            from_agent="lead",
            to_agent=to,
            subject="s",
            body="x" * size,
            priority=priority,
            created_at=iso_now(self.clock),
        )
        self.store.insert(InsertRequest(messages=(m,), now=self.clock))
        self.sent[m.id] = m

    @rule(agent=st.sampled_from(AGENTS), n=st.integers(1, 4), chars=st.integers(1, 80))
    def claim(self, agent: str, n: int, chars: int) -> None:
        blocked = any(b.agent == agent and b.lease_until > self.clock for b in self.active.values())
        batch = self.store.claim(
            agent, max_messages=n, max_chars=chars, lease_s=LEASE_S, now=self.clock
        )
        if batch is None:
            assert blocked or agent not in self.store.pending_agents()
            return
        assert not blocked, "a second claim while the lease is active"
        assert batch.delivery_id not in self.active
        first = {self.first_claim.get(i) for i in batch.message_ids}
        # A redelivery carries the delivery id of its first claim; a new batch only fresh mail.
        assert first == ({None} if batch.attempt == 1 else {batch.delivery_id})
        assert not any(m.read for m in batch.messages)
        assert list(batch.messages) == sorted(batch.messages, key=order)
        self.first_claim.update(dict.fromkeys(batch.message_ids, batch.delivery_id))
        event("claim: redelivery" if batch.redelivery else "claim: new batch")
        if batch.attempt == 1:
            self.check_new_batch(batch, n, chars)
        else:
            assert set(batch.message_ids) <= self.members[batch.delivery_id]
        self.active[batch.delivery_id] = batch

    def check_new_batch(self, batch: Batch, n: int, chars: int) -> None:
        assert batch.delivery_id not in self.members, "a new batch reused a delivery id"
        self.members[batch.delivery_id] = set(batch.message_ids)
        assert len(batch.messages) <= n
        assert len(batch.messages) == 1 or sum(m.size for m in batch.messages) <= chars
        # Nothing left behind may come before what was taken.
        left = [
            m for m in self.unread() if m.to_agent == batch.agent and m.id not in self.first_claim
        ]
        if left:
            assert max(map(order, batch.messages)) < min(map(order, left))

    @precondition(lambda self: self.active)
    @rule(data=st.data())
    def ack_delivery(self, data: st.DataObject) -> None:
        batch = self.active.pop(data.draw(st.sampled_from(sorted(self.active))))
        self.store.ack_delivery(batch.delivery_id, now=self.clock)
        for i in batch.message_ids:
            assert i in self.purged or self.is_read(i)

    @precondition(lambda self: self.active)
    @rule(data=st.data(), max_attempts=st.integers(1, 3), reclaim=st.booleans())
    def release(self, data: st.DataObject, max_attempts: int, reclaim: bool) -> None:
        batch = self.active.pop(data.draw(st.sampled_from(sorted(self.active))))
        released = self.store.release(
            batch.delivery_id, error="boom", max_attempts=max_attempts, now=self.clock
        )
        assert released.state in ("pending", "dead")
        event(f"release: {released.state}")
        # A dead letter is listed while it has messages to retry (a purge may have taken them).
        if released.state == "dead" and set(batch.message_ids) - self.purged:
            assert {d.delivery_id for d in self.store.dead_letters()} >= {batch.delivery_id}
        if reclaim:  # the daemon's retry: makes redeliveries common enough to test
            self.claim(batch.agent, n=4, chars=80)

    @precondition(lambda self: self.active)
    @rule(data=st.data(), past=st.sampled_from([0.0, 0.5]))
    def lease_runs_out(self, data: st.DataObject, past: float) -> None:
        batch = self.active[data.draw(st.sampled_from(sorted(self.active)))]
        self.reap(max(0.0, batch.lease_until + past - self.clock))  # a lease ending now counts

    @rule(advance=ADVANCE)
    def reap(self, advance: float) -> None:
        self.clock += advance
        expired = {d for d, b in self.active.items() if b.lease_until <= self.clock}
        reaped = self.store.reap_expired(now=self.clock)
        assert {d for d, _ in reaped} == expired
        event(f"reap: {min(len(reaped), 2)} re-queued")
        assert all(agent == self.active[d].agent for d, agent in reaped)
        for d in expired:
            del self.active[d]

    @rule()
    def daemon_restarts(self) -> None:
        """A new daemon re-queues every claim, live lease or not, keeping the delivery ids."""
        reaped = self.store.reap_expired(now=self.clock, everything=True)
        assert sorted(reaped) == sorted((d, b.agent) for d, b in self.active.items())
        self.active.clear()

    @rule(agent=st.sampled_from(AGENTS), chars=st.integers(0, 80))
    def pull(self, agent: str, chars: int) -> None:
        taken = self.store.take_unread(agent, max_chars=chars)
        assert not {m.id for m in taken} & self.in_flight()
        assert taken == sorted(taken, key=order)
        assert len(taken) <= 1 or not chars or sum(m.size for m in taken) <= chars
        for m in taken:
            assert self.is_read(m.id)

    @rule()
    def retry(self) -> None:
        requeued = set(self.store.retry_dead())
        event(f"retry: {min(len(requeued), 1)}+ re-queued")
        assert not requeued & set(self.active)
        assert self.store.dead_letters() == []

    @precondition(lambda self: len(self.sent) - len(self.purged) >= 6)
    @rule()
    def purge_all(self) -> None:
        assert self.store.purge(everything=True) == len(self.live())
        self.purged.update(self.sent)

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def nothing_is_lost(self) -> None:
        dead = {i for d in self.store.dead_letters() for i in d.message_ids}
        flying = self.in_flight()
        pending = self.store.pending_agents()
        for m in self.unread():
            placed = [m.id in flying, m.id in dead, m.to_agent in pending]
            assert any(placed), f"{m.id} is unread but neither pending, in flight nor dead"
            assert not (m.id in flying and m.id in dead)
        for i in self.purged:
            assert self.store.get_message(i) is None

    @invariant()
    def the_store_sees_the_same_claims(self) -> None:
        counts = self.store.counts()
        for agent in AGENTS:
            mine = sum(1 for b in self.active.values() if b.agent == agent)
            assert (counts[agent].in_flight if agent in counts else 0) == mine
        unread = len(self.unread())
        assert self.store.totals() == {"messages": len(self.live()), "unread": unread}


class SqliteMachine(StoreMachine):
    make_store = staticmethod(lambda tmp: SqliteMailStore(tmp / "mail.db"))


class MemoryMachine(StoreMachine):
    make_store = staticmethod(lambda tmp: MemoryMailStore())


class PostgresMachine(StoreMachine):
    make_store = staticmethod(lambda tmp: PgStore())


TestSqliteStore = SqliteMachine.TestCase
TestSqliteStore.settings = BOUNDED
TestMemoryStore = MemoryMachine.TestCase
TestMemoryStore.settings = BOUNDED
TestPostgresStore = PostgresMachine.TestCase
TestPostgresStore.settings = BOUNDED


# -- differential: the fake must answer exactly as the product store does ----------------------

Call = Callable[[MailStore, Callable[[str], str]], object]


class DifferentialMachine(RuleBasedStateMachine):
    """Runs the same calls on the SQLite, memory and PostgreSQL stores; every answer must match.

    Delivery ids are random, so each store's ids are renamed d0, d1, ... in order of appearance.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="agentmaild-differential-"))
        self.stores: tuple[MailStore, ...] = (
            SqliteMailStore(self.tmp / "m.db"), MemoryMailStore(), PgStore()
        )
        self.labels: tuple[dict[str, str], ...] = ({}, {}, {})  # real delivery id -> label
        self.real: tuple[dict[str, str], ...] = ({}, {}, {})  # label -> real delivery id
        self.clock = 1_700_000_000.0
        self.sent: list[str] = []

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def canon(self, k: int, obj: object) -> object:
        if isinstance(obj, Message) and not (obj.acked_by or "dlv-").startswith("dlv-"):
            # A pull's read mark is stamped by the real clock, a few ms apart in the two stores;
            # a delivery's ack is stamped with the caller's ``now`` and compared as it is.
            obj = replace(obj, acked_at="(stamped)")
        if isinstance(obj, str) and obj.startswith("dlv-"):
            label = self.labels[k].setdefault(obj, f"d{len(self.labels[k])}")
            self.real[k][label] = obj
            return label
        if is_dataclass(obj) and not isinstance(obj, type):
            return (type(obj).__name__, *(self.canon(k, getattr(obj, f.name)) for f in fields(obj)))
        if isinstance(obj, list | tuple):
            return tuple(self.canon(k, x) for x in obj)
        if isinstance(obj, set | frozenset):
            return frozenset(self.canon(k, x) for x in obj)
        if isinstance(obj, dict):
            return tuple(sorted((key, self.canon(k, v)) for key, v in obj.items()))
        return obj

    def same(self, call: Call) -> object:
        answers = []
        for k, store in enumerate(self.stores):
            try:
                answer = self.canon(
                    k, call(store, lambda label, k=k: self.real[k].get(label, label))
                )
            except AgentmaildError as exc:
                # The text too, each delivery id it names renamed as the answers' are.
                text = re.sub(r"dlv-\w+", lambda d, k=k: str(self.canon(k, d[0])), exc.message)
                answer = ("raised", type(exc).__name__, text)
            answers.append(answer)
        assert answers[0] == answers[1], "sqlite and memory disagree"
        assert answers[0] == answers[2], "sqlite and postgres disagree"
        return answers[0]

    def delivery(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from([*sorted(self.real[0]), "dlv-unknown"]))

    @initialize(mail=st.lists(st.tuples(TO, PRIORITY, SIZE, TICK), min_size=1, max_size=8))
    def some_mail(self, mail: list[tuple[str, str, int, float]]) -> None:
        for to, priority, size, tick in mail:
            self.send(to, priority, size, tick, {}, None, nudge=priority == "urgent")

    @rule(
        to=TO,
        priority=PRIORITY,
        size=SIZE,
        tick=st.sampled_from([0.0, 0.001, 5.0]),
        limits=st.sampled_from([{}, {"unread_max": 3}, {"rate_limit_max": 2}]),
        idem=st.none() | st.tuples(st.sampled_from("kl"), st.sampled_from("ab")),
        nudge=st.booleans(),
    )
    def send(
        self,
        to: str,
        priority: str,
        size: int,
        tick: float,
        limits: dict[str, int],
        idem: tuple[str, str] | None,
        nudge: bool,
    ) -> None:
        self.clock += tick
        m = Message(
            id=new_id("msg"),
            from_agent="lead",
            to_agent=to,
            subject="s",
            body="x" * size,
            priority=priority,
            created_at=iso_now(self.clock),
        )
        req = InsertRequest(
            messages=(m,),
            now=self.clock,
            nudges=((to, m.id, priority),) if nudge else (),
            idempotency=("lead", *idem) if idem else None,
            **limits,  # type: ignore[arg-type]
        )
        self.same(lambda s, _: s.insert(req))
        self.sent.append(m.id)

    def message(self, to: str, size: int = 1, thread: str | None = None) -> Message:
        return Message(id=new_id("msg"), from_agent="lead", to_agent=to, subject="s",
                       body="x" * size, thread_id=thread,
                       created_at=iso_now(self.clock))  # fmt: skip

    def checked(self, messages: tuple[Message, ...], how: dict[str, Any]) -> dict[str, Any]:
        """The ``InsertRequest`` fields of the checks ``how`` (a ``CHECKS`` draw) asks for."""
        names = tuple(dict.fromkeys(m.to_agent for m in messages))
        fields: dict[str, Any] = {"refuse_unknown": how["refuse_unknown"]}
        if how["check"]:
            fields["check_recipients"] = names
        if how["elsewhere"] is not None:
            fields["known_elsewhere"] = ((names[0], how["elsewhere"]),)
        if how["collapse"] is not None:
            fields["collapse"] = (f"{how['collapse']}-{'+'.join(names)}", 5.0)
        if how["thread"] is not None and len(names) == 1:  # the cap is about two agents
            escalation = replace(self.message("operator", thread=how["thread"]),
                                 from_agent="agentmaild")  # fmt: skip
            fields["thread_guard"] = ThreadGuard(
                thread_id=how["thread"], pair="|".join(sorted(("lead", names[0]))),
                max_messages=2, window_s=30.0, escalation=escalation,
            )  # fmt: skip
        return fields

    @initialize(
        registry=st.dictionaries(NAMES, STATES, max_size=3),
        to=st.lists(NAMES, min_size=1, max_size=3, unique=True),
        ticks=st.lists(st.sampled_from([0.0, 1.0, 10.0]), min_size=1, max_size=4),
        how=CHECKS,
    )
    def some_agents_and_checked_mail(
        self, registry: dict[str, str], to: list[str], ticks: list[float], how: dict[str, Any]
    ) -> None:
        """Every walk starts with a registry and a checked send: the checks are never left out."""
        for name, state in registry.items():
            self.add_agent(name)
            self.set_agent_state(name, state, force=True)
        self.send_checked(to, ticks, how, {})

    @rule(
        to=st.lists(NAMES, min_size=1, max_size=3, unique=True),
        ticks=st.lists(st.sampled_from([0.0, 1.0, 10.0]), min_size=1, max_size=4),
        how=CHECKS,
        limits=st.sampled_from([{}, {"unread_max": 2}, {"rate_limit_max": 3}]),
    )
    def send_checked(
        self, to: list[str], ticks: list[float], how: dict[str, Any], limits: dict[str, int]
    ) -> None:
        """A send (to one name or several, as a group send) through the checks, repeated once
        per tick: repeats collapse or trip the ping-pong cap as often as they would in a loop."""
        for tick in ticks:
            self.clock += tick
            messages = tuple(self.message(name, thread=how["thread"]) for name in to)
            req = InsertRequest(
                messages=messages, now=self.clock, **self.checked(messages, how), **limits
            )
            answer = self.same(lambda s, _, req=req: s.insert(req))
            self.sent.extend(m.id for m in messages)
            raised = isinstance(answer, tuple) and answer[0] == "raised"
            event(f"checked send: {answer[1] if raised else 'answered'}")
        counters = self.stores[1].rule_counters()["collapsed"], self.stores[1].inbox("operator")
        event(f"collapsed so far: {min(counters[0], 1)}+; held so far: {min(len(counters[1]), 1)}+")

    @rule(name=NAMES)
    def add_agent(self, name: str) -> None:
        self.same(lambda s, _: s.add_agent(Agent(name=name, capability="builder")).state)

    @rule(name=NAMES, state=STATES, force=st.booleans())
    def set_agent_state(self, name: str, state: str, force: bool) -> None:
        self.same(lambda s, _: s.set_agent_state(name, state, force=force).state)

    @rule(name=NAMES)
    def remove_agent(self, name: str) -> None:
        self.same(lambda s, _: s.remove_agent(name))

    @rule(thread=st.sampled_from(("msg-t1", "msg-t2", "msg-none")))
    def release_thread(self, thread: str) -> None:
        self.same(lambda s, _: s.release_thread(thread))

    @rule(agent=st.sampled_from(AGENTS), n=st.integers(0, 4), chars=st.integers(0, 80))
    def claim(self, agent: str, n: int, chars: int) -> None:
        now = self.clock
        self.same(
            lambda s, _: s.claim(agent, max_messages=n, max_chars=chars, lease_s=LEASE_S, now=now)
        )

    def record(self, delivery_id: str, outcome: str) -> Attempt:
        return Attempt(
            delivery_id=delivery_id,
            agent=AGENTS[len(self.sent) % 2],
            message_ids=tuple(self.sent[-2:]),
            attempt=1,
            outcome=outcome,
            error=None if outcome == "acked" else "e",
            duration_s=0.5,
            at=self.clock,
        )

    @rule(data=st.data())
    def ack_delivery(self, data: st.DataObject) -> None:
        label, now = self.delivery(data), self.clock
        self.same(
            lambda s, real: s.ack_delivery(
                real(label), now=now, record=self.record(real(label), "acked")
            )
        )

    @rule(data=st.data(), max_attempts=st.integers(1, 3), count=st.integers(0, 2))
    def release(self, data: st.DataObject, max_attempts: int, count: int) -> None:
        label, now = self.delivery(data), self.clock
        self.same(
            lambda s, real: s.release(
                real(label),
                error="e",
                max_attempts=max_attempts,
                now=now,
                count=count,
                record=self.record(real(label), "failed" if count else "released"),
            )
        )

    @rule(
        agent=st.none() | st.sampled_from(AGENTS),
        age=st.none() | st.floats(0, 30),
        everything=st.booleans(),
    )
    def purge_attempts(self, agent: str | None, age: float | None, everything: bool) -> None:
        older = None if age is None else self.clock - age
        self.same(
            lambda s, _: s.purge_attempts(older_than=older, agent=agent, everything=everything)
        )

    @rule(data=st.data(), lease_s=st.floats(0, LEASE_S))
    def extend_lease(self, data: st.DataObject, lease_s: float) -> None:
        label, now = self.delivery(data), self.clock
        self.same(lambda s, real: s.extend_lease(real(label), lease_s=lease_s, now=now))

    @rule(advance=ADVANCE, everything=st.booleans())
    def reap(self, advance: float, everything: bool) -> None:
        self.clock += advance
        now = self.clock
        self.same(lambda s, _: s.reap_expired(now=now, everything=everything))

    @rule(key=st.sampled_from("kl"), digest=st.sampled_from("ab"))
    def find_idempotent(self, key: str, digest: str) -> None:
        self.same(lambda s, _: s.find_idempotent("lead", key, digest))

    @rule(agent=st.sampled_from(AGENTS), chars=st.integers(0, 80), ack=st.booleans())
    def take_unread(self, agent: str, chars: int, ack: bool) -> None:
        self.same(lambda s, _: s.take_unread(agent, max_chars=chars, ack=ack))

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from([*self.sent, "msg-unknown"]), max_size=4))
        self.same(lambda s, _: sorted(s.ack(chosen)))

    @rule(
        agent=st.none() | st.sampled_from(AGENTS),
        age=st.none() | st.floats(0, 30),
        everything=st.booleans(),
    )
    def purge(self, agent: str | None, age: float | None, everything: bool) -> None:
        older = None if age is None else iso_now(self.clock - age)
        self.same(lambda s, _: s.purge(older_than=older, agent=agent, everything=everything))

    @rule(agent=st.none() | st.sampled_from(AGENTS))
    def retry_dead(self, agent: str | None) -> None:
        self.same(lambda s, _: sorted(s.retry_dead(agent=agent)))

    @rule(agent=st.sampled_from(AGENTS))
    def nudges_and_limits(self, agent: str) -> None:
        self.same(lambda s, _: s.take_nudges(agent))
        self.same(lambda s, _: s.reset_rate_limit("lead", agent))

    @invariant()
    def same_views(self) -> None:
        self.same(lambda s, _: s.list_messages())
        self.same(lambda s, _: (s.rule_counters(), [(a.name, a.state) for a in s.list_agents()]))
        self.same(lambda s, _: [s.inbox(a, unread_only=True) for a in AGENTS])
        self.same(lambda s, _: (s.pending_agents(), s.counts(), s.totals()))
        self.same(lambda s, _: s.dead_letters())
        # Row ids may differ (SQLite reuses the ids of purged newest rows); the order may not.
        self.same(lambda s, _: [replace(a, id=0) for a in s.list_attempts(limit=None)])
        since = self.clock - 1.0
        for agent in AGENTS:
            self.same(
                lambda s, _, a=agent: [
                    replace(x, id=0) for x in s.list_attempts(agent=a, since=since, limit=3)
                ]
            )


TestStoresAgree = DifferentialMachine.TestCase
TestStoresAgree.settings = BOUNDED
