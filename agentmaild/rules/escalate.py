"""Long-unread escalation: the daemon's one store-wide look, every ``unread_escalate_interval_s``.

Mail unread past its priority's ``unread_escalate_after_<priority>_s`` (unread because a pull
agent never read it, or because a busy agent could not take it) is taken once by the store
(``take_overdue``), so each message is escalated at most once. For each recipient with such mail,
one ``escalation`` goes to every sender (naming their messages) and one to the recipient's parent
(naming all of them); a target that is both gets one mail.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import structlog

from agentmaild.config import LimitsConfig
from agentmaild.errors import AgentmaildError
from agentmaild.ids import iso_now, new_id
from agentmaild.mail.vocab import DAEMON_SENDER, IMPLICIT_RECIPIENTS
from agentmaild.models import Message
from agentmaild.store.aio import AsyncMailStore
from agentmaild.store.base import MailStore
from agentmaild.store.records import InsertRequest

log = structlog.get_logger(__name__)


def thresholds(limits: LimitsConfig) -> dict[str, float]:
    return {
        "urgent": limits.unread_escalate_after_urgent_s,
        "high": limits.unread_escalate_after_high_s,
        "normal": limits.unread_escalate_after_normal_s,
        "low": limits.unread_escalate_after_low_s,
    }


def _waited(m: Message, now: float) -> str:
    from datetime import datetime

    born = datetime.fromisoformat(m.created_at.replace("Z", "+00:00")).timestamp()
    s = max(0, int(now - born))
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _targets(store: MailStore, recipient: str, due: list[Message]) -> dict[str, list[Message]]:
    """Who hears about ``due`` (all addressed to ``recipient``): each sender, and the parent."""
    agent = None if recipient in IMPLICIT_RECIPIENTS else store.get_agent(recipient)
    out: dict[str, list[Message]] = {}
    for m in due:
        out.setdefault(m.from_agent, []).append(m)
    if agent is not None and agent.parent and agent.parent != recipient:
        out[agent.parent] = list(due)
    return out


def _mail(target: str, recipient: str, due: list[Message], now: float) -> Message:
    lines = [
        f"- {m.id} from {m.from_agent}, {m.priority}, {json.dumps(m.subject)}: unread for "
        f"{_waited(m, now)}"
        for m in due
    ]
    context = (
        f"{len(due)} message(s) to {recipient} have not been read in time "
        f"(limits.unread_escalate_after_*_s):\n" + "\n".join(lines)
    )
    severity = "error" if any(m.priority == "urgent" for m in due) else "warning"
    return Message(
        id=new_id("msg"),
        from_agent=DAEMON_SENDER,
        to_agent=target,
        subject=f"Unread: {len(due)} message(s) to {recipient}",
        body=context,
        type="escalation",
        priority="high",
        thread_id=due[0].thread_id or due[0].id,
        payload=json.dumps({"severity": severity, "taskId": None, "context": context}),
        created_at=iso_now(now),
    )


def escalate(store: MailStore, due: list[Message], now: float) -> list[Message]:
    """Write the escalations for ``due`` (taken by ``take_overdue``); returns them."""
    by_recipient: dict[str, list[Message]] = {}
    for m in due:
        by_recipient.setdefault(m.to_agent, []).append(m)
    sent: list[Message] = []
    for recipient, mine in by_recipient.items():
        for target, listed in _targets(store, recipient, mine).items():
            mail = _mail(target, recipient, listed, now)
            store.insert(
                InsertRequest(
                    messages=(mail,), now=now, nudges=((target, mail.id, "high escalation"),)
                )
            )
            sent.append(mail)
    return sent


@dataclass
class UnreadEscalator:
    """The daemon task: one look per interval until ``stopping`` is set."""

    store: AsyncMailStore
    limits: Callable[[], LimitsConfig]
    stopping: anyio.Event

    async def run(self) -> None:
        while not self.stopping.is_set():
            with anyio.move_on_after(self.limits().unread_escalate_interval_s):
                await self.stopping.wait()
            if self.stopping.is_set():
                return
            try:
                await self.check()
            except AgentmaildError as exc:  # the store is unwell; the next interval tries again
                log.warning("rules.escalation_failed", error=exc.message)

    async def check(self) -> int:
        after = thresholds(self.limits())
        if not any(v > 0 for v in after.values()):
            return 0
        now = time.time()
        due = await self.store.run_sync(self.store.sync.take_overdue, after, now=now)
        if not due:
            return 0
        sent = await self.store.run_sync(escalate, self.store.sync, due, now)
        log.info(
            "rules.unread_escalated",
            messages=[m.id for m in due],
            escalations=[(m.to_agent, m.id) for m in sent],
        )
        return len(sent)
