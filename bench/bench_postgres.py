"""PostgreSQL store benchmarks (issue 11), each beside a same-run bare-psycopg baseline.

(1) woken send→ack over PostgreSQL: the real ``Daemon`` wired as ``serve --db postgresql://…``
    wires it (its store's services: the poll gate, LISTEN, the host lock) in a child process
    under anyio + uvloop,
    with bench_daemon's instant in-process channel and phase-stamping store. This process sends
    with ``Mailer.send`` on its own ``PostgresMailStore``; no poke: the send's NOTIFY is the only
    wake-up. Baseline: bare psycopg INSERT + NOTIFY on one connection, the LISTENing connection
    gets the notification and claims the row (UPDATE … FOR UPDATE SKIP LOCKED … RETURNING).
(2) single sends: ``Mailer.send`` one at a time vs a bare psycopg INSERT of the same row per
    transaction (autocommit), both on one connection each, against the same database.
(3) claims: 2 daemons (host-a, host-b) x 10 agents each vs 1 daemon with all 20, every message
    claimed and acked through the instant channel; double claims counted from the acks (a
    message acked under two delivery ids, or a delivery acked twice).

The server: ``AGENTMAIL_TEST_PG`` when set, else a private cluster (tests/support/pg.py).
``python bench_postgres.py harness DSN HOST`` is the daemon child.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchlib import ROOT, Figure, clean_env
from daemon_parts import ChildHarness, _harness_types

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

UNDER_LOAD = "measured on a shared 2-core machine under load (other jobs running)"


# -- the server -------------------------------------------------------------------------------
@contextlib.contextmanager
def _server() -> Iterator[Any]:
    from tests.support.pg import PgDatabases, start_cluster

    cluster = None
    admin = os.environ.get("AGENTMAIL_TEST_PG", "")
    if not admin:
        cluster = start_cluster()
        admin = cluster.admin_dsn
    databases = PgDatabases(admin)
    try:
        yield databases
    finally:
        databases.drop_all()
        if cluster is not None:
            cluster.stop()


# -- the daemon child -------------------------------------------------------------------------
def _harness_main(dsn: str, host: str) -> None:
    import anyio

    from agentmaild.config import load_config
    from agentmaild.daemon.journal import StoreProcJournal
    from agentmaild.daemon.serve import Daemon
    from agentmaild.log import configure_logging
    from agentmaild.store.kinds import open_services
    from agentmaild.store.location import StoreLocation

    instant, timed = _harness_types(pg=True)

    class BenchDaemon(Daemon):
        def _make_channel(self, agent: Any, config: Any) -> Any:
            return instant()

    config = load_config()
    config = dataclasses.replace(config, daemon=dataclasses.replace(config.daemon, host=host))
    configure_logging(config.log.level, config.log.format, config.log.file)
    services = open_services(StoreLocation.of(dsn), config)  # as serve opens them
    services.facade = timed

    async def main() -> int:
        store = await services.open_store()
        gate = await services.open_gate()
        try:
            daemon = BenchDaemon(services, config, store, gate, StoreProcJournal(store))
            return await daemon.run()
        finally:
            await gate.aclose()
            with anyio.CancelScope(shield=True):
                await store.aclose()

    with services.hold():
        sys.exit(anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True}))


def _add_agents(dsn: str, agents: dict[str, str]) -> None:
    from agentmaild.models import Agent
    from agentmaild.store.postgres import PostgresMailStore

    store = PostgresMailStore(dsn)
    try:
        for name, host in agents.items():
            store.add_agent(Agent(name=name, capability="builder", channel="spawn",
                                  command=("true",), host=host))
    finally:
        store.close()


class PgHarness(ChildHarness):
    """One daemon child for ``host``; ``acks`` collects its ack lines as they arrive."""

    def __init__(self, tmp: Path, dsn: str, host: str, agents: list[str], *,
                 env: dict[str, str] | None = None) -> None:
        from agentmaild.control.protocol import socket_path_for

        self.agents = agents
        env = {**clean_env(str(tmp)), **(env or {}), "XDG_STATE_HOME": str(tmp / f"state-{host}")}
        old = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = env["XDG_STATE_HOME"]
        try:
            from agentmaild.store.location import StoreLocation

            self.sock = socket_path_for(StoreLocation.of(dsn).local_path)
        finally:
            if old is None:
                os.environ.pop("XDG_STATE_HOME")
            else:
                os.environ["XDG_STATE_HOME"] = old
        self._spawn([sys.executable, __file__, "harness", dsn, host], env, tmp,
                    tmp / f"daemon-{host}.log", len(agents))


def run(quick: bool) -> list[Figure]:
    from pg_figures import run as run_all

    return run_all(quick)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "harness":
        _harness_main(sys.argv[2], sys.argv[3])
    else:
        for f in run(quick="--quick" in sys.argv):
            print(f.name, f.ours, f.baseline, f.verdict(), *f.notes, sep="\n  ")
