"""The in-memory fake's state: dicts behind one lock, the atomic step, the orders SQL sorts by."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Concatenate, ParamSpec, TypeVar

from agentmaild.ids import iso_now
from agentmaild.models import PRIORITY_RANK, Agent, Attempt, Batch, Message
from agentmaild.store.records import AgentProc
from agentmaild.trust.peers import Peer, PeerOrigin
from agentmaild.trust.tokens import ApiToken

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="MemoryState")
RateLog = list[tuple[str, str, float]]


def atomic(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """One call, one lock hold: the fake's stand-in for one SQL transaction."""

    @functools.wraps(method)
    def locked(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


def order(m: Message) -> tuple[int, str, str]:
    """Delivery order: priority (unknown ranks last, like the SQL CASE), then created_at, id."""
    return (PRIORITY_RANK.get(m.priority, 3), m.created_at, m.id)


def chrono(m: Message) -> tuple[str, str]:
    return (m.created_at, m.id)


@dataclass(slots=True, kw_only=True)
class Delivery:
    """One ``am_deliveries`` row."""

    id: str
    agent: str
    state: str  # claimed | pending | acked | dead
    attempts: int
    failures: int = 0
    lease_until: float | None = None
    last_error: str | None = None
    created_at: str = ""
    updated_at: str = ""
    queue: str | None = None  # set when it carries work-queue mail: any member may take it over

    def batch(self, messages: Iterable[Message]) -> Batch:
        return Batch(
            delivery_id=self.id,
            agent=self.agent,
            messages=tuple(replace(m, delivery_id=self.id) for m in messages),
            attempt=self.attempts,
            lease_until=self.lease_until or 0.0,
        )


class MemoryState:
    """The tables as dicts, and the lookups the message and delivery operations share."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.drained: set[str] = set()  # the fake cannot tell: ``MailStore.more_after`` says True
        self._messages: dict[str, Message] = {}
        self._agents: dict[str, Agent] = {}
        self._deliveries: dict[str, Delivery] = {}
        self._nudges: dict[tuple[str, str], tuple[str, str]] = {}  # (agent, id) -> (reason, at)
        self._rate_log: RateLog = []
        self._idempotency: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}
        self._procs: dict[tuple[int, str], AgentProc] = {}  # (pid, start_time) -> row
        self._attempts: list[Attempt] = []  # the delivery history, oldest first
        self._attempt_seq = 0
        self._tokens: dict[str, ApiToken] = {}  # HTTP API tokens by id
        # The team rules: digest -> (message ids, at); (thread, pair, at) rows; holds; counters.
        self._recent_sends: dict[str, tuple[tuple[str, ...], float]] = {}
        self._thread_log: list[tuple[str, str, float]] = []
        self._holds: dict[tuple[str, str], tuple[int, str]] = {}  # -> (messages, escalation id)
        self._counters: dict[str, int] = {}
        self._team_rules: dict[str, object] = {}  # what the daemon wrote (am_settings)
        self._escalated: set[str] = set()  # message ids the long-unread rule has escalated
        self._queue_members: dict[str, set[str]] = {}  # queue -> its member agents
        self._served: dict[tuple[str, str], float] = {}  # (queue, member) -> when it last took work
        self.deferred: dict[str, float] = {}  # as the SQL stores' (deliveries.StoreDeliveries)
        # The trust domains: peers by name, nonce -> (peer, expires_at), origins by message id,
        # relayed message id -> (peer, at).
        self._peers: dict[str, Peer] = {}
        self._nonces: dict[str, tuple[str, float]] = {}
        self._origins: dict[str, PeerOrigin] = {}
        self._relayed: dict[str, tuple[str, float]] = {}

    def _unread(self, agent: str) -> Iterable[Message]:
        return (m for m in self._messages.values() if m.to_agent == agent and not m.read)

    def _in_state(self, m: Message, *states: str) -> bool:
        d = self._deliveries.get(m.delivery_id) if m.delivery_id else None
        return d is not None and d.state in states

    def _mark_reached(self, agent: str) -> None:
        a = self._agents.get(agent)
        if a is not None and a.state == "booting":
            self._agents[agent] = replace(a, state="working", updated_at=iso_now())

    def _mark_read(self, ids: Iterable[str], by: str, now: float | None = None) -> list[str]:
        stamp = iso_now(now)
        done: list[str] = []
        for i in ids:
            m = self._messages.get(i)
            if m is not None and not m.read:
                self._messages[i] = replace(m, read=True, acked_at=stamp, acked_by=by)
                self._nudges.pop((m.to_agent, i), None)
                done.append(i)
        return done

    def _append_attempt(self, record: Attempt) -> None:
        self._attempt_seq += 1
        error = record.error[:2000] if record.error is not None else None
        self._attempts.append(replace(record, id=self._attempt_seq, error=error))
