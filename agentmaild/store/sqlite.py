"""SqliteMailStore: the MailStore on one SQLite file (WAL), short BEGIN IMMEDIATE transactions.

The store is assembled from one mixin per seam of the ``MailStore`` ABC: the seams written once over
the connector (``StoreMessages``, ``StoreProcs``, ``StoreTokens``, ``StoreTrust``, ``StoreQueues``,
``StoreHistory``, ``StoreAgents``, ``StoreRuleState``, ``StoreDeliveries``: ``messages`` with
``send``, ``procs``, ``tokens``, ``trust``, ``queues``, ``history``, ``agents``, ``rule_state``,
``deliveries`` with ``claim``), all over the transaction plumbing of
``sqlite_tx``; rows become models in ``rows``, and the SQL lives as named queries in
``sql/queries.sql``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from agentmaild.errors import StoreError
from agentmaild.store.agents import StoreAgents
from agentmaild.store.base import MailStore
from agentmaild.store.deliveries import StoreDeliveries
from agentmaild.store.files import create_private, make_store_dir, refuse_hard_links
from agentmaild.store.history import StoreHistory
from agentmaild.store.location import StoreLocation
from agentmaild.store.messages import StoreMessages
from agentmaild.store.migrate import migrate
from agentmaild.store.procs import StoreProcs
from agentmaild.store.queues import StoreQueues
from agentmaild.store.rule_state import StoreRuleState
from agentmaild.store.sqlite_open import check_path, connect_readonly
from agentmaild.store.sqlite_tx import SqliteTransactions
from agentmaild.store.tokens import StoreTokens
from agentmaild.store.trust import StoreTrust
from agentmaild.store.usage import StoreUsage

if TYPE_CHECKING:
    from agentmaild.store.looks import Looks

__all__ = [
    "SENDER_AUTOCHECKPOINT_PAGES",
    "WAL_SIZE_LIMIT_BYTES",
    "SqliteMailStore",
    "connect",
    "make_store_dir",
]

# Senders leave checkpoints to the daemon (which runs them every checkpoint_interval_s or when the
# WAL passes wal_checkpoint_pages); they only checkpoint themselves past this many pages (~10 MB
# at the page size below), which happens when no daemon runs.
SENDER_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024
# The page size of a store file we create. A send changes one page in each of about nine b-trees
# (the message, its five indexes, the loop guard's row), and WAL mode writes every changed page
# whole at COMMIT: 1 KiB pages write a quarter of the bytes of SQLite's default 4 KiB for the same
# pages. Measured on a send: 27 % less wall time, 9 % less CPU (bench/results.md, issue 15). A
# file that exists (ours from before, or Overstory's) keeps its page size.
NEW_STORE_PAGE_SIZE = 1024


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection with the three PRAGMAs every agentmaild connection sets.

    A store file that does not exist yet is created 0600 first (its WAL and shared-memory files
    then get the same mode from SQLite).
    """
    empty = False
    if str(path) != ":memory:":
        create_private(Path(path))
        empty = Path(path).stat().st_size == 0
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=5.0, check_same_thread=False)
    if empty:  # only before the first table (and before WAL mode) does SQLite take a page size
        conn.execute(f"PRAGMA page_size = {NEW_STORE_PAGE_SIZE}")
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {SENDER_AUTOCHECKPOINT_PAGES}")
    # When a checkpoint lets the WAL restart, cut the file back instead of keeping its peak.
    conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
    return conn


def _overstory_link(path: str, flavor: str | None) -> object:
    """The store's Overstory project (``[store] flavor``, else its path), or None."""
    from agentmaild.overstory.flavor import overstory_mode

    if path == ":memory:" or not overstory_mode(path, flavor):
        return None
    from agentmaild.overstory.link import OverstoryLink

    return OverstoryLink(path)


class SqliteMailStore(
    SqliteTransactions,
    StoreMessages,
    StoreAgents,
    StoreDeliveries,
    StoreProcs,
    StoreHistory,
    StoreTokens,
    StoreTrust,
    StoreRuleState,
    StoreQueues,
    StoreUsage,
    MailStore,
):
    """The product store. One connection, used from one thread at a time.

    ``readonly``: a ``mode=ro`` connection that never writes (nor creates) the file; its writes
    fail with a StoreError. ``create=False``: read-write, but a missing store is an error.
    ``flavor``: ``[store] flavor``; in Overstory mode ``overstory`` links Overstory's registry and
    banners (see ``agentmaild.overstory``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        readonly: bool = False,
        create: bool = True,
        flavor: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.location = StoreLocation.of(path)
        self.drained = set()
        self.deferred = {}
        self._wal: Path | None = None  # the -wal file, watched by inline writes (writable only)
        self.overstory = _overstory_link(str(path), flavor)
        try:
            check_path(self.path, create=create and not readonly)
            refuse_hard_links(self.path)  # two names, two WALs: not even for reading
            if readonly:
                self._conn = connect_readonly(self.path, lambda: SqliteMailStore(path).close())
                self._conn.row_factory = sqlite3.Row
            else:
                self._open_for_writing()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"cannot open store {self.path}: {exc.strerror or exc}") from exc

    def _open_for_writing(self) -> None:
        make_store_dir(self.path.parent)
        self._conn = connect(self.path)
        self._conn.row_factory = sqlite3.Row
        try:
            self._retrying(lambda: migrate(self._conn))
            page = int(self._conn.execute("PRAGMA page_size").fetchone()[0])
        except BaseException:
            self._conn.close()
            raise
        # Half the pages at which a COMMIT would checkpoint (see ``run_inline``).
        self._inline_wal_max = SENDER_AUTOCHECKPOINT_PAGES // 2 * page
        self._wal = self.path.with_name(self.path.name + "-wal")

    def _wal_large(self) -> bool:
        if self._wal is None:
            return True  # read-only: never a write, inline or not
        try:
            return self._wal.stat().st_size > self._inline_wal_max
        except OSError:  # no WAL file (nothing written since the last one was removed)
            return False

    def open_looks(self) -> Looks:
        """A read-only connection for the daemon's looks for mail read elsewhere."""
        from agentmaild.store.looks import SqliteLooks

        return SqliteLooks(self.path)

    @property
    def connection(self) -> sqlite3.Connection:
        return self._lend()

    def change_mark(self) -> object:
        from agentmaild.store.marks import sqlite_mark

        return sqlite_mark(self.connection)

    def close(self) -> None:
        self._conn.close()
