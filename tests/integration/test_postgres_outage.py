"""A PostgreSQL store that goes away mid-run: the server kills the daemons' LISTEN connections
(`pg_terminate_backend`), then the whole database restarts (`pg_ctl stop -m immediate` + start)
with deliveries in flight. Two host daemons (separate processes) live through both: they
reconnect, take their host locks again (a second daemon of the host is still refused), nothing is
lost or acked twice (the history checker on a store copy), and `status` reports the outages.

The database is a private cluster of this test's own (restarting the session's server would
break every other test), durable: a commit the senders saw survives the immediate stop."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentmaild.errors import StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.store.postgres import PostgresMailStore
from tests.reliability.history import read_ledgers
from tests.support.daemon import AGENTS, FAST, base_env
from tests.support.pg import PgCluster, PgDatabases, start_cluster
from tests.support.pg_history import check_pg_history, daemon_events, ledger_name
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

HOSTS = {"a1": "host-a", "a2": "host-a", "b1": "host-b", "b2": "host-b"}
PER_PHASE = 40


@pytest.fixture
def cluster() -> Iterator[PgCluster]:
    own = start_cluster(durable=True)
    try:
        yield own
    finally:
        own.stop()


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentmaild", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def ok(env: dict[str, str], *args: str) -> Any:
    done = run(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def host_env(env: dict[str, str], tmp: Path, host: str) -> dict[str, str]:
    return {**env, "XDG_STATE_HOME": str(tmp / f"state-{host}"), "AM_TEST_HOST": host}


def serve(env: dict[str, str], log: Path, host: str) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen([sys.executable, "-m", "agentmaild", "serve", "--host", host],
                            env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)


def send(mailer: Mailer, phase: str) -> list[str]:
    """PER_PHASE messages; a send that failed with the connection (the first after the restart:
    the store replaces a dropped connection on the next call, never inside one) is sent again
    under its idempotency key, so a commit lost in flight is not written twice."""
    names, ids = list(HOSTS), []
    for n in range(PER_PHASE):
        args = {"sender": "lead", "to": names[n % len(names)], "subject": f"{phase} {n}",
                "body": f"b {n}", "idempotency_key": f"{phase}-{n}"}
        try:
            ids += mailer.send(**args).ids
        except StoreError:
            ids += mailer.send(**args).ids
    return ids


def lock_holders(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() "
            "AND a.application_name LIKE 'agentmaild serve %' ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]


def unread(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM messages WHERE read = 0 "
                           "AND from_agent = 'lead'").fetchone()
    return int(row[0]) if row else -1


def test_daemons_live_through_a_killed_listener_and_a_database_restart(
    tmp_path: Path, cluster: PgCluster
) -> None:
    databases = PgDatabases(cluster.admin_dsn)
    dsn = databases.create()
    env = base_env(tmp_path, {"AGENTMAIL_DB": dsn, "XDG_STATE_HOME": str(tmp_path / "cli")},
                   FAST)
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    ok(env, "agents", "add", "lead", "--capability", "lead")
    for name, host in HOSTS.items():
        ledger = ledgers / ledger_name('"$AM_TEST_HOST"', name)
        command = f"sh -c 'exec {sys.executable} -S {AGENTS / 'ledger_agent.py'} {ledger}'"
        ok(env, "agents", "add", name, "--capability", "builder", "--channel", "spawn",
           "--host", host, "--command", command)
    envs = {h: host_env(env, tmp_path, h) for h in ("host-a", "host-b")}
    logs = {h: tmp_path / f"{h}.log" for h in envs}
    daemons = {h: serve(envs[h], logs[h], h) for h in envs}
    store = PostgresMailStore(dsn)
    try:
        for h, log in logs.items():
            wait_for(lambda log=log: daemon_events([log], "listener.listening"), 60,
                     f"{h} to LISTEN")
        mailer = Mailer(store)
        sent = send(mailer, "before")

        # 1. The server ends both LISTEN connections; the daemons reconnect and poll once.
        with psycopg.connect(dsn, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'agentmaild listener' AND datname = current_database()"
            ).fetchone()
        assert killed == (2,)
        for h, log in logs.items():
            wait_for(lambda log=log: len(daemon_events([log], "listener.listening")) >= 2, 60,
                     f"{h}'s listener to reconnect")
        sent += send(mailer, "between")

        # 2. The database restarts with those deliveries in flight.
        cluster.restart()
        for h, log in logs.items():
            wait_for(lambda log=log: daemon_events([log], "daemon.lock_retaken"), 60,
                     f"{h} to take its host lock again")
        sent += send(mailer, "after")  # the sender's own connection is replaced on its next send
        wait_for(lambda: unread(dsn) == 0, 180, "every message acked")

        holders = lock_holders(dsn)
        for h, proc in daemons.items():
            assert proc.poll() is None, logs[h].read_text()[-3000:]
            assert f"agentmaild serve pid={proc.pid} host={h}" in holders
            second = run(envs[h], "serve", "--host", h)  # still the one daemon of its host
            assert second.returncode == 1 and "already running" in second.stderr, second.stderr
            outages = ok(envs[h], "status")["daemon"]["outages"]
            assert outages["open"] == []
            assert {o["what"] for o in outages["recent"]} == {"listener", "lock"}, outages
            assert all(o["until"] for o in outages["recent"])
            text = run(envs[h], "status").stdout
            assert f"store outages: {outages['count']} (open: none;" in text
        for proc in daemons.values():
            proc.send_signal(signal.SIGTERM)
        assert [proc.wait(30) for proc in daemons.values()] == [0, 0]
        ledger = read_ledgers(sorted(ledgers.glob("*.jsonl")))
        history = check_pg_history(dsn, tmp_path, ledger, sent, hosts=HOSTS,
                                   acked_events=daemon_events(logs.values(), "delivery.acked"))
        history.assert_ok("(PostgreSQL outage)")
        assert len(sent) == 3 * PER_PHASE
    finally:
        store.close()
        for proc in daemons.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        databases.drop_all()
