"""serve() for a PostgreSQL store: the store's daemon lock → store → the same ``Daemon``.

What differs from a store file: the one-daemon lock is a PostgreSQL advisory lock per host (it
holds across machines; each host's daemon delivers to that host's agents and beats its
``am_hosts`` row), the poll gate asks the server (``PgPollGate``), sends wake the loops through
LISTEN/NOTIFY (``PgListener``; polling stays the fallback), and the daemon's local files —
control socket, agent logs — live in the store's anchor directory on this machine
(``store.anchor``). There is no file to check, watch or checkpoint.
"""

from __future__ import annotations

from typing import Any

import anyio
import structlog

from agentmaild.config import Config
from agentmaild.config.sections import daemon_host
from agentmaild.daemon.journal import StoreProcJournal
from agentmaild.daemon.pg_hosts import PgHeartbeat
from agentmaild.daemon.pg_listen import PgListener
from agentmaild.daemon.pg_lock import PgHostLock, hold_pg_lock
from agentmaild.daemon.pg_outages import Outages, PgLockKeeper
from agentmaild.procs.cgroups import use_cgroups
from agentmaild.procs.escapes import become_subreaper
from agentmaild.store.anchor import anchor_for
from agentmaild.store.files import check_private_dir, make_store_dir

log = structlog.get_logger(__name__)


def serve_pg(dsn: str, config: Config) -> int:
    anchor = anchor_for(dsn)
    make_store_dir(anchor.parent)
    check_private_dir(anchor.parent)
    with hold_pg_lock(dsn, daemon_host(config.daemon)) as lock:
        options: dict[str, Any] = {}
        try:
            import uvloop  # noqa: F401  (only probing that it is installed)

            options["use_uvloop"] = True
        except ImportError:
            pass
        return anyio.run(_main, dsn, config, lock, backend="asyncio", backend_options=options)


async def _main(dsn: str, config: Config, lock: PgHostLock) -> int:
    from agentmaild.daemon.serve import Daemon
    from agentmaild.store.aio_pg import PgPollGate
    from agentmaild.store.aio_postgres import PgAsyncMailStore
    from agentmaild.store.postgres import PostgresMailStore

    subreaper = become_subreaper()
    use_cgroups(config.daemon.cgroups)
    size = config.store.pg_pool_size
    store = await anyio.to_thread.run_sync(lambda: PostgresMailStore(dsn, pool_size=size))
    astore = PgAsyncMailStore(store, concurrency=size)
    try:
        gate = await PgPollGate.open(dsn)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await astore.aclose()
        raise
    try:
        daemon = Daemon(anchor_for(dsn), config, astore, gate, StoreProcJournal(astore))
        daemon.subreaper = subreaper
        daemon.host = daemon_host(config.daemon)
        outages = daemon.outages = Outages()  # `status` shows them
        daemon.background.append(PgListener(dsn, daemon.supervisor.wake, outages).run)
        beat = PgHeartbeat(dsn, daemon.host, config.daemon.lease_s)
        daemon.background.append(beat.run)
        # The host lock outlives a database restart: its session is checked every beat.
        keeper = PgLockKeeper(lock, outages, beat.interval_s, daemon.request_shutdown)
        daemon.background.append(keeper.run)
        return await daemon.run()
    finally:
        await gate.aclose()
        with anyio.CancelScope(shield=True):
            await astore.aclose()
