"""The team rules' stored state, written once over the connector: overdue mail taken for
escalation, a thread's holds read and released, the rules' counters, and the team rules
themselves (``am_settings``: the store's daemon writes them, every send reads them). (The rules'
checks inside a send live in ``send``.)"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentmaild.ids import iso_now
from agentmaild.mail.vocab import DAEMON_SENDER, PRIORITIES
from agentmaild.models import Message
from agentmaild.store.connector import OverConnector, Tx
from agentmaild.store.guard import RULE_COUNTERS
from agentmaild.store.rows import message_from_row

TEAM_RULES_SETTING = "team_rules"  # its name in am_settings
# Every send asks for the team rules, and on PostgreSQL that read is a round trip as long as the
# send's own. A store keeps what it read this long: rules its daemon writes reach a long-lived
# sender (the daemon's HTTP face, an MCP session) within it, a new process (each CLI send) at once,
# and ``set_team_rules`` on the same store at once.
TEAM_RULES_FRESH_S = 1.0


def _cutoffs(after_s: dict[str, float], now: float) -> dict[str, str]:
    """Per priority, the ISO stamp mail must be older than to be due ('' when the rule is off)."""
    return {p: iso_now(now - after_s[p]) if after_s.get(p, 0) > 0 else "" for p in PRIORITIES}


class StoreRuleState(OverConnector):
    """The ``MailStore`` operations of the team rules' state, for every SQL store."""

    def take_overdue(
        self, after_s: dict[str, float], *, now: float, limit: int = 500
    ) -> list[Message]:
        params = {**_cutoffs(after_s, now), "daemon": DAEMON_SENDER, "limit": limit}

        def run(tx: Tx) -> list[Message]:
            # One taker at a time: two daemons checking at once escalate each message once.
            tx.lock("rules:overdue")
            due = [message_from_row(r) for r in tx.fetch_all("overdue_unread", params)]
            if due:
                tx.execute_many("escalated_put", [{"id": m.id, "at": now} for m in due])
                tx.execute("counter_bump", {"name": "unread_escalated", "n": len(due)})
            return due

        return self.db.write(run)

    def release_thread(self, thread_id: str) -> int:
        def run(tx: Tx) -> int:
            tx.execute("thread_log_forget", {"thread": thread_id})
            return tx.execute("thread_holds_release", {"thread": thread_id})

        return self.db.write(run)

    def rule_counters(self) -> dict[str, int]:
        found = {str(r["name"]): int(r["value"]) for r in self.db.fetch_all("counters")}
        return {**dict.fromkeys(RULE_COUNTERS, 0), **found}

    def held_pairs(self, thread_id: str) -> set[str]:
        rows = self.db.fetch_all("thread_held_pairs", {"thread": thread_id})
        return {str(r["pair"]) for r in rows}

    _rules_read: tuple[float, dict[str, Any]] | None = None  # (monotonic when read, the rules)

    def team_rules(self) -> dict[str, Any]:
        kept = self._rules_read
        if kept is not None and time.monotonic() - kept[0] < TEAM_RULES_FRESH_S:
            return dict(kept[1])

        def run(tx: Tx) -> dict[str, Any]:
            row = tx.fetch_one("setting_get", {"name": TEAM_RULES_SETTING})
            found = None if row is None else tx.from_json(row["value"])
            return dict(found) if isinstance(found, dict) else {}

        read_at = time.monotonic()
        rules = self.db.read(run)
        self._rules_read = (read_at, rules)
        return dict(rules)

    def set_team_rules(self, rules: Mapping[str, Any], *, now: float) -> bool:
        def run(tx: Tx) -> bool:
            row = tx.fetch_one("setting_get", {"name": TEAM_RULES_SETTING})
            if row is not None and tx.from_json(row["value"]) == dict(rules):
                return False
            value = tx.json(dict(rules))
            tx.execute("setting_put", {"name": TEAM_RULES_SETTING, "value": value, "at": now})
            return True

        changed = self.db.write(run)
        self._rules_read = None  # after the commit: a read racing the write is not kept
        return changed
