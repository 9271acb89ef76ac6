"""The store's port for the cold paths: what a hook, ``check --inject`` and the tmux channel ask
of a store, on one connection, whichever backend holds it.

``open_port(location)`` opens a port on the store a ``StoreLocation`` names (None when a SQLite
file does not exist yet: nobody can have mail there); ``port_of(store)`` lends one on an open
store's own connection (the daemon's HTTP API). A caller never learns which backend it has: the
port's operations are the same on SQLite (``port_sqlite.SqlitePort``) and PostgreSQL
(``port_postgres.PostgresPort``), its queries are written once (``sql/ports.sql``), and its
errors leave as ``StoreError``. ``Port.inject`` — take unread mail within a size budget, render
it, ack what was rendered — is written once here, over the backends' ``take`` and ``mark_read``.

Stdlib only, like ``pull``: the hooks' SQLite cold path loads it on every call.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar


    T = TypeVar("T")
    Rows = list[dict[str, Any]]
    Taken = tuple[Rows, int, Rows, str]  # the rows, the agent's unread count, their nudges, a lead
    Render = Callable[[Rows, int, Rows, str], tuple[str, list[str]]]

INJECT_RESERVE = 2500  # characters of the output budget kept for headers, banner and the tail note


class Port:
    """One connection's worth of the cold paths' store work (see the module docstring).

    ``local``: the store's path on this machine (the file, or a PostgreSQL store's stand-in):
    the hooks' marker files and log live beside it."""

    __slots__ = ("local",)

    local: str

    def write(self, work: Callable[[], T], *, wake: str = "") -> T:
        """``work()`` in one write transaction; ``wake``: an agent whose daemon hears of it."""
        raise NotImplementedError

    def set_state(self, agent: str, state: str, sid: str, only_from: str | None = None) -> None:
        """The agent's turn state (and Claude's session id ``sid``), only from ``only_from``."""
        raise NotImplementedError

    def record_seen(self, agent: str, sid: str | None, ids: list[str], keep_s: float) -> None:
        """A prompt held the batch headers ``ids``; records older than ``keep_s`` go."""
        raise NotImplementedError

    def turn(self, agent: str) -> tuple[str | None, str | None]:
        """The turn state the hooks recorded for ``agent`` and when (ISO 8601)."""
        raise NotImplementedError

    def delivery_seen(self, delivery_id: str) -> bool:
        """True once a UserPromptSubmit hook saw ``delivery_id``'s batch header in a prompt."""
        raise NotImplementedError

    def has_unread(self, agent: str) -> bool:
        raise NotImplementedError

    def knows(self, agent: str) -> bool:
        """Registered, or ever mailed."""
        raise NotImplementedError

    def take(
        self, agent: str, budget: int, keep: Callable[[Rows], Rows] | None = None
    ) -> Taken | None:
        """In a write: the unread mail not in flight to the daemon, priority order, cut at
        ``budget`` characters (at least one row), filtered by ``keep``; None when none is left."""
        raise NotImplementedError

    def mark_read(self, agent: str, ids: list[str], by: str) -> None:
        """In a write: ``ids`` are read (their nudges go) and the agent is reached."""
        raise NotImplementedError

    def claims(self) -> Any:
        """The write's statements as the connector's ``Tx`` offers them (``store.midturn``)."""
        raise NotImplementedError

    def settings(self, agent: str) -> dict[str, Any]:
        """The agent's registered channel settings ({} when it is not registered)."""
        raise NotImplementedError

    def mid_turn_take(self, agent: str, max_rank: int, budget: int) -> Taken | None:
        """In a write: the mail ``max_rank`` lets into the agent's running turn (``midturn``),
        cut at ``budget`` characters (at least one row); None when none is. Its count is of
        that mail alone (the rest waits for the turn's end anyway)."""
        from agentmaild.store.midturn import mid_turn_rows
        from agentmaild.store.pull import within

        candidates = mid_turn_rows(self.claims(), agent, max_rank)
        rows = [dict(r) for r in within(candidates, budget)]
        if not rows:
            return None
        _, _, nudges, lead = self.taken(agent, rows)
        return rows, len(candidates), nudges, lead

    def taken(self, agent: str, rows: Rows) -> Taken:
        """``rows`` with what their rendering needs: the unread count, their nudges, a lead."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def done(self) -> None:
        """The cold process is about to end (``entry`` exits with ``os._exit``)."""
        self.close()

    def inject(self, agent: str, max_chars: int, render: Render) -> tuple[str, list[str]]:
        """One write: take the agent's unread mail within ``max_chars``, render it, ack just what
        ``render`` says it rendered; ("", []) when there is none."""

        def work() -> tuple[str, list[str]]:
            taken = self.take(agent, max_chars - INJECT_RESERVE)
            if taken is None:
                return "", []
            text, ids = render(*taken)
            self.mark_read(agent, ids, "pull")
            return text, ids

        return self.write(work)
