"""`agentmaild serve --db postgresql://…`: the daemon delivers from a PostgreSQL store; one daemon
per store (an advisory lock naming its holder); status and control through this machine's
socket. Real server, real daemon process, a real spawned agent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentmaild.control.protocol import socket_path_for
from agentmaild.store.location import StoreLocation
from agentmaild.store.postgres import PostgresMailStore
from tests.support.daemon import FAST, base_env
from tests.support.net import daemon_answers
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentmaild", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def ok(env: dict[str, str], *args: str) -> Any:
    done = cli(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)



def test_a_daemon_delivers_from_a_postgres_store(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # where this machine keeps socket and logs
    env = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn, "XDG_STATE_HOME": str(state)}, FAST)
    inbox, seen_db = tmp_path / "inbox.jsonl", tmp_path / "agent-db.txt"
    script = f'cat >> "{inbox}"; printf %s "$AGENTMAIL_DB" > "{seen_db}"'
    ok(env, "agents", "add", "demo", "--capability", "builder", "--channel", "spawn",
       "--command", f"sh -c '{script}'")
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        sock = socket_path_for(StoreLocation.of(pg_dsn).local_path)
        wait_for(lambda: daemon.poll() is not None or daemon_answers(sock), 30,
                 "the daemon's socket")
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]

        second = cli(env, "serve")
        assert second.returncode == 1
        assert second.stderr.startswith("error: agentmaild is already running for postgresql://")
        assert f"pid={daemon.pid}" in second.stderr and len(second.stderr.splitlines()) == 1

        ids = [ok(env, "send", "--to", "demo", "--subject", f"s{i}", "--body", "b")["ids"][0]
               for i in range(3)]
        wait_for(lambda: inbox.exists() and all(i in inbox.read_text() for i in ids), 60,
                 "the agent to receive all three messages")
        store = PostgresMailStore(pg_dsn)
        wait_for(lambda: store.totals()["unread"] == 0, 30, "the deliveries to be acked")
        assert all((m.acked_by or "").startswith("dlv-") for m in store.list_messages())
        store.close()
        assert seen_db.read_text() == pg_dsn  # the agent's own CLI reaches the same store

        status = ok(env, "status")
        assert status["running"] is True and status["store"].startswith("postgresql://")
        assert [(a["agent"], a["unread"]) for a in status["agents"]] == [("demo", 0)]
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(30)
        log.close()
    assert code == 0
    assert not (tmp_path / "mail.db").exists()  # nothing was written as a SQLite file


def events(log: Path, name: str) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == name:
            found.append(event)
    return found


def test_a_send_from_another_machine_wakes_the_daemon_through_notify(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    slow_poll = {**FAST, "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "120"}  # only a wake-up is quick
    env = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn, "XDG_STATE_HOME": str(state)}, slow_poll)
    # Another machine: the same store, but no daemon socket to poke — only NOTIFY reaches ours.
    elsewhere = {**env, "XDG_STATE_HOME": str(tmp_path / "other-machine")}
    inbox = tmp_path / "inbox.jsonl"
    ok(env, "agents", "add", "demo", "--capability", "builder", "--channel", "spawn",
       "--command", f"sh -c 'cat >> \"{inbox}\"'")
    log_path = tmp_path / "daemon.log"
    log = log_path.open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: daemon.poll() is not None or events(log_path, "listener.listening"), 30,
                 "the daemon to LISTEN")
        assert daemon.poll() is None, log_path.read_text()[-3000:]

        first = ok(elsewhere, "send", "--to", "demo", "--subject", "a", "--body", "b")["ids"][0]
        wait_for(lambda: inbox.exists() and first in inbox.read_text(), 30,
                 "a delivery woken by NOTIFY (the poll is 120 s away)")

        with psycopg.connect(pg_dsn, autocommit=True) as admin:  # the server drops the listener
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'agentmaild listener' AND datname = current_database()"
            ).fetchone()
        assert killed == (1,)
        wait_for(lambda: [e["connections"] for e in events(log_path, "listener.listening")]
                 == [1, 2], 30, "the listener to reconnect")
        assert events(log_path, "listener.lost")

        second = ok(elsewhere, "send", "--to", "demo", "--subject", "c", "--body", "d")["ids"][0]
        wait_for(lambda: second in inbox.read_text(), 30, "a wake-up after the reconnection")
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(30)
        log.close()
    assert code == 0
