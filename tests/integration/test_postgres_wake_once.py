"""One send to a PostgreSQL store wakes its daemon once: the send's in-transaction NOTIFY is the
wake-up, and the CLI pokes nothing more after the commit (``store.wake``).

The daemon's side is what ``serve`` runs for a PostgreSQL store (its services' wake seam), plus a
datagram receiver bound where a local poke would land, beside a control socket file as a running
daemon leaves it (senders poke only when that file is there): a second wake-up for the send would
be counted. A real ``agentmaild send`` process sends. A sentinel NOTIFY committed after that
process exited marks the end: notifications arrive in commit order, and a datagram sent before the
process exited was already queued. Real server, real CLI process, real sockets.

And a real daemon woken through NOTIFY alone: a send from another machine (no socket to poke),
and again after the server dropped its listener."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from agentmaild.config import load_config
from agentmaild.store.files import make_store_dir
from agentmaild.store.kinds import open_services
from agentmaild.store.location import StoreLocation
from agentmaild.store.postgres_listen import NotifyWakes
from agentmaild.store.wake import DatagramWakes
from tests.support.daemon import FAST, base_env
from tests.support.store_targets import ok
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

Woken = list[tuple[str, list[str] | None]]


async def _send(env: dict[str, str]) -> None:
    done = await anyio.run_process(
        [sys.executable, "-m", "agentmaild", "send", "--to", "demo", "--subject", "s",
         "--body", "b"], env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()


def _sentinel(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('agentmaild_mail', 'sentinel')")


def test_one_postgres_send_wakes_its_daemon_once(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # where this machine keeps the socket
    env = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn, "XDG_STATE_HOME": str(state)}, FAST)
    register = [sys.executable, "-m", "agentmaild", "agents", "add", "demo", "--capability",
                "builder", "--channel", "spawn", "--command", "true"]
    assert subprocess.run(register, env=env, capture_output=True, check=False).returncode == 0
    services = open_services(StoreLocation.of(pg_dsn), load_config(None, env))
    wakes = services.wakes
    assert isinstance(wakes, NotifyWakes)
    make_store_dir(services.socket.parent)
    woken: Woken = []

    async def main() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
            control.bind(str(services.socket))  # a daemon's control socket file: senders poke
            async with anyio.create_task_group() as tg:
                await tg.start(wakes.run, lambda names: woken.append(("notify", names)))
                await tg.start(DatagramWakes(services.socket).run,
                               lambda names: woken.append(("datagram", names)))
                await anyio.to_thread.run_sync(
                    wait_for, lambda: getattr(wakes.listener, "connections", 0) >= 1, 30,
                    "the LISTEN connection")
                await _send(env)
                await anyio.to_thread.run_sync(_sentinel, pg_dsn)
                await anyio.to_thread.run_sync(
                    wait_for, lambda: ("notify", ["sentinel"]) in woken, 30, "the sentinel")
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert woken == [("notify", ["demo"]), ("notify", ["sentinel"])]



def test_a_postgres_mark_moves_when_a_send_commits(tmp_path: Path, pg_dsn: str) -> None:
    from agentmaild.mail.mailer import Mailer
    from agentmaild.models import Agent
    from agentmaild.store.postgres import PostgresMailStore

    reader, writer = PostgresMailStore(pg_dsn), PostgresMailStore(pg_dsn)
    try:
        writer.add_agent(Agent(name="demo", capability="builder", channel="spawn",
                               command=("true",)))
        first = reader.change_mark()
        # (no "unchanged" check: xmax is the cluster's, and other databases' writes move it too)
        Mailer(writer).send(sender="operator", to="demo", subject="s", body="b")
        assert reader.change_mark() != first
    finally:
        reader.close()
        writer.close()


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
