"""Who may interrupt an agent's turn, how often, and the mail an interrupt carries.

Written once for ``agentmaild interrupt`` and ``send --interrupt``. The agent's parent, a lead
(an agent whose capability is one of ``LEADS``) or the operator may interrupt it; anyone else is
refused with ``InterruptRefused``. Interrupts are mail (type ``interrupt``, priority urgent), so
the loop guard's duplicate collapse and the rate limit count them like any send; on top of that,
interrupts between two agents, in either direction, are counted per ``[limits]
interrupt_window_s``: one past ``interrupt_max`` (0: no cap) is refused with ``LoopHeld``, and the
first such refusal in a window writes one escalation to whoever the loop guard would tell
(``loopguard.escalation_target``). The caps are the store's team rules (``Mailer.rules``).
"""

from __future__ import annotations

import time
from datetime import datetime

from agentmaild.errors import InterruptRefused, LoopHeld, NotFound
from agentmaild.ids import iso_now, new_id
from agentmaild.mail.mailer import Mailer
from agentmaild.mail.vocab import DAEMON_SENDER, INTERRUPT_TYPE, OPERATOR
from agentmaild.models import Message
from agentmaild.rules.loopguard import escalation_target
from agentmaild.store.base import MailStore
from agentmaild.store.records import InsertRequest

LEADS = frozenset({"lead", "coordinator", "orchestrator", "supervisor"})


def check_may_interrupt(store: MailStore, sender: str, target: str) -> None:
    """Raise ``InterruptRefused`` unless ``sender`` is ``target``'s parent, a lead or operator."""
    agent = store.get_agent(target)
    if agent is None:
        raise NotFound(f"no agent named {target!r}")
    if sender == OPERATOR or agent.parent == sender:
        return
    asker = store.get_agent(sender)
    if asker is not None and asker.capability in LEADS and sender != target:
        return
    raise InterruptRefused(
        f"{sender} may not interrupt {target}: only its parent "
        f"({agent.parent or 'none'}), a lead or the operator may"
    )


def _since(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def check_interrupt_rate(mailer: Mailer, sender: str, target: str) -> None:
    """Raise ``LoopHeld`` when the pair used up ``interrupt_max`` in ``interrupt_window_s``."""
    rules, store = mailer.rules(), mailer.store
    cap, window = rules.interrupt_max, rules.interrupt_window_s
    if cap <= 0 or sender == OPERATOR:
        return
    now = time.time()
    recent = [
        m
        for a, b in ((sender, target), (target, sender))
        for m in store.list_messages(from_agent=a, to_agent=b, type=INTERRUPT_TYPE, limit=cap)
        if now - _since(m.created_at) < window
    ]
    if len(recent) < cap:
        return
    pair = " and ".join(sorted((sender, target)))
    subject = f"Loop guard: interrupts held between {pair}"
    told = escalation_target(store, sender, target)
    earlier = store.list_messages(from_agent=DAEMON_SENDER, to_agent=told, type="escalation",
                                  limit=50)  # fmt: skip
    if not any(m.subject == subject and now - _since(m.created_at) < window for m in earlier):
        mail = _escalation(told, subject, pair, cap, window)
        store.insert(InsertRequest(messages=(mail,), now=now,
                                   nudges=((told, mail.id, "high escalation"),)))  # fmt: skip
    raise LoopHeld(
        f"{pair} interrupted each other {len(recent)} times within {window:g}s "
        f"(limits.interrupt_max = {cap}); the interrupt is refused"
    )


def _escalation(to: str, subject: str, pair: str, cap: int, window: float) -> Message:
    body = (
        f"{pair} sent {cap} interrupts between them within {window:g}s (limits.interrupt_max); "
        "further interrupts are refused until the window passes. Look at what they are doing."
    )
    return Message(id=new_id("msg"), from_agent=DAEMON_SENDER, to_agent=to, subject=subject,
                   body=body, type="escalation", priority="high", created_at=iso_now(time.time()),
                   payload='{"severity":"warning","taskId":null,"context":"interrupt loop"}')


def interrupt_text(sender: str, reason: str) -> tuple[str, str]:
    """The subject and body of an interrupt's mail, from who asks and why (may be empty)."""
    subject = f"Interrupt from {sender}" + (f": {reason.splitlines()[0][:120]}" if reason else "")
    return subject, reason or "Stop what you are doing and read this first."


def send_interrupt(
    mailer: Mailer, *, sender: str, to: str, subject: str, body: str, thread_id: str | None = None
) -> tuple[Message, bool]:
    """Check who asks and how often, then write the interrupt's mail (urgent, one recipient);
    the mail, and whether it was a repeat the loop guard collapsed into an earlier one (then
    no turn is stopped again)."""
    check_may_interrupt(mailer.store, sender, to)
    check_interrupt_rate(mailer, sender, to)
    sent = mailer.send(sender=sender, to=to, subject=subject, body=body, type=INTERRUPT_TYPE,
                       priority="urgent", thread_id=thread_id)  # fmt: skip
    return sent.messages[0], sent.duplicate
