"""What ``status`` and ``metrics`` show of the team rules: counters, held threads, queues."""

from __future__ import annotations

from typing import Any

from agentmaild.store.base import MailStore


def rules_status(store: MailStore) -> dict[str, Any]:
    """The ``rules`` part of a status reply (the daemon's or the offline one)."""
    return {
        "counters": store.rule_counters(),
        "queues": [q.to_dict() for q in store.queues()],
    }


def rules_metrics(rules: dict[str, Any]) -> list[str]:
    """Prometheus lines for the rule counters (``agentmaild_collapsed_total``, ...)."""
    lines: list[str] = []
    for name, value in sorted(rules.get("counters", {}).items()):
        lines += [
            f"# HELP agentmaild_{name}_total Team-rule events ({name}) in this store.",
            f"# TYPE agentmaild_{name}_total counter",
            f"agentmaild_{name}_total {value}",
        ]
    return lines


def rules_line(rules: dict[str, Any] | None) -> str | None:
    """One human line for ``status``, or None when no rule ever fired."""
    counters = (rules or {}).get("counters", {})
    fired = {k: v for k, v in counters.items() if v}
    if not fired:
        return None
    return "rules: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(fired.items()))


def queue_lines(rules: dict[str, Any] | None) -> list[str]:
    """One human line per work queue: depth, members, and who holds which delivery."""
    lines = []
    for q in (rules or {}).get("queues", []):
        held = ", ".join(f"{h['agent']} {h['delivery_id']}" for h in q["held"]) or "none"
        lines.append(
            f"queue {q['name']}: {q['depth']} waiting, members {' '.join(q['members']) or '-'}, "
            f"held: {held}"
        )
    return lines
