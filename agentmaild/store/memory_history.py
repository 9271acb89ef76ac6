"""The delivery history of the in-memory fake: attempts appended, listed and purged."""

from __future__ import annotations

from agentmaild.models import Attempt
from agentmaild.store.memory_state import MemoryState, atomic


class MemoryHistory(MemoryState):
    """The ``MailStore`` delivery-history operations over the fake's list."""

    @atomic
    def record_attempt(self, attempt: Attempt) -> None:
        self._append_attempt(attempt)

    @atomic
    def list_attempts(
        self,
        *,
        agent: str | None = None,
        message_id: str | None = None,
        since: float | None = None,
        limit: int | None = 100,
    ) -> list[Attempt]:
        def keep(a: Attempt) -> bool:
            return (
                agent in (None, a.agent)
                and (since is None or a.at >= since)
                and (message_id is None or message_id in a.message_ids)
            )

        found = [a for a in reversed(self._attempts) if keep(a)]
        return found if limit is None or limit < 0 else found[:limit]  # LIMIT -1: no limit

    @atomic
    def purge_attempts(
        self, *, older_than: float | None = None, agent: str | None = None, everything: bool = False
    ) -> int:
        if older_than is None and agent is None and not everything:
            return 0

        def gone(a: Attempt) -> bool:
            return (older_than is None or a.at < older_than) and agent in (None, a.agent)

        kept = [a for a in self._attempts if not gone(a)]
        n, self._attempts = len(self._attempts) - len(kept), kept
        return n
