"""The message vocabulary as plain constants: types, priorities, implicit names (stdlib only).

``models.MessageType``/``Priority`` are the typed views of the same lists.
"""

from __future__ import annotations

SEMANTIC_TYPES = ("status", "question", "result", "error")
PROTOCOL_TYPES = (
    "worker_done",
    "worker_died",
    "merge_ready",
    "merged",
    "merge_failed",
    "escalation",
    "health_check",
    "dispatch",
    "assign",
    "decision_gate",
)
INTERRUPT_TYPE = "interrupt"  # the mail an interrupt carries: it opens the next turn, never a running one
MESSAGE_TYPES = SEMANTIC_TYPES + PROTOCOL_TYPES + (INTERRUPT_TYPE,)
PRIORITIES = ("low", "normal", "high", "urgent")

# The human at the keyboard: the default sender, a recipient that needs no registration.
OPERATOR = "operator"
IMPLICIT_RECIPIENTS = frozenset({OPERATOR})
# Recipients in these agent states are refused by send and reply: they will never read mail.
REFUSED_STATES = frozenset({"completed", "zombie"})
# The sender of the mail agentmaild writes itself (non-delivery reports, escalations).
DAEMON_SENDER = "agentmaild"
INTERRUPT_TYPE = "interrupt"  # the mail an interrupt carries: it opens the next turn, never a running one
