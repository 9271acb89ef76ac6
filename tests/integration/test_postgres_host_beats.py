"""A host daemon's heartbeat row (``am_hosts``): beaten while it runs, shown up; shown down once
older than 3 leases (a crashed daemon's); removed when the daemon stops cleanly. Real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psycopg

from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_hosts import PgHeartbeat, read_hosts
from tests.support.daemon import base_env
from tests.support.waiting import wait_for


def test_a_heartbeat_is_up_then_down_and_gone_after_a_clean_stop(pg_dsn: str) -> None:
    PostgresMailStore(pg_dsn).close()  # the schema
    beat = PgHeartbeat(pg_dsn, "host-a", lease_s=3.0)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(beat.run)
            await anyio.to_thread.run_sync(wait_for, lambda: read_hosts(pg_dsn), 30, "a beat")
            (row,) = read_hosts(pg_dsn)
            assert (row["host"], row["pid"], row["state"]) == ("host-a", os.getpid(), "up")
            assert read_hosts(pg_dsn, now=row["beat_at"] + 8.9)[0]["state"] == "up"
            assert read_hosts(pg_dsn, now=row["beat_at"] + 9.1)[0]["state"] == "down"
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert read_hosts(pg_dsn) == []  # stopped cleanly: no row left to look down
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a crashed host's row stays
        conn.execute("INSERT INTO am_hosts VALUES ('host-b', 1, 0, 0, 300)")
    assert [(h["host"], h["state"]) for h in read_hosts(pg_dsn)] == [("host-b", "down")]


def test_status_shows_every_host_and_a_down_one(tmp_path: Path, pg_dsn: str) -> None:
    PostgresMailStore(pg_dsn).close()  # the schema
    now = time.time()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # one beating, one crashed long ago
        conn.execute("INSERT INTO am_hosts VALUES ('host-a', 11, %s, %s, 300)", (now, now))
        conn.execute("INSERT INTO am_hosts VALUES ('host-b', 22, 0, 0, 300)")
    env = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn, "XDG_STATE_HOME": str(tmp_path / "s")})
    run = [sys.executable, "-m", "agentmaild", "status"]
    shown = subprocess.run([*run, "--json"], capture_output=True, text=True, env=env,
                           timeout=60, check=True)
    hosts = json.loads(shown.stdout)["hosts"]
    assert [(h["host"], h["pid"], h["state"]) for h in hosts] == [
        ("host-a", 11, "up"), ("host-b", 22, "down")]
    text = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60, check=True)
    assert "host host-a: up (pid 11," in text.stdout
    assert "host host-b: down (pid 22," in text.stdout
