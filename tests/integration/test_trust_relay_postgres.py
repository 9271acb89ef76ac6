"""Signed mail into a PostgreSQL store: domain A (SQLite) relays to domain B, a daemon on a
PostgreSQL DSN whose key file is named by ``$AGENTMAIL_KEY_FILE`` (a DSN has no directory). B
pins A, verifies, records the origin and refuses the replay in its own tables."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from agentmaild.control.protocol import socket_path_for
from agentmaild.store.location import StoreLocation
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import FAST, base_env
from tests.support.net import daemon_answers, free_port
from tests.support.waiting import wait_for


def _cli(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "agentmaild", *args, "--json"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr or done.stdout
    return json.loads(done.stdout)


def _healthy(c: httpx.Client) -> bool:
    try:
        return c.get("/v1/health").status_code == 200
    except httpx.TransportError:
        return False


def test_mail_relayed_into_a_postgres_domain_is_verified_recorded_and_not_replayed(
    tmp_path: Path, pg_dsn: str
) -> None:
    (tmp_path / "a").mkdir()
    db_a = tmp_path / "a" / "mail.db"
    SqliteMailStore(db_a).close()
    env_a = base_env(tmp_path / "a", {"AGENTMAIL_DB": str(db_a)}, FAST)
    port = free_port()
    env_b = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn, "AGENTMAILD_HTTP_LISTEN":
                                f"127.0.0.1:{port}",
                                "AGENTMAIL_KEY_FILE": str(tmp_path / "b.key")}, FAST)  # fmt: skip
    _cli(env_a, "agents", "add", "bob", "--capability", "builder", "--channel", "pull")
    _cli(env_b, "agents", "add", "alice", "--capability", "builder", "--channel", "pull")
    a_key = _cli(env_a, "keys", "create", "--domain", "a")
    assert _cli(env_b, "keys", "create", "--domain", "b")["key_file"] == str(tmp_path / "b.key")
    _cli(env_b, "peers", "add", "a", "--public-key", a_key["public_key"])
    token = _cli(env_b, "tokens", "create", "alice")["token"]
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env_b,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: daemon.poll() is not None or daemon_answers(
            socket_path_for(StoreLocation.of(pg_dsn).local_path)), 30, "B's daemon")  # fmt: skip
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        with httpx.Client(base_url=url, timeout=20,
                          headers={"authorization": f"Bearer {token}"}) as c:  # fmt: skip
            wait_for(lambda: _healthy(c), 30, "B's HTTP API")
            sent = _cli(env_a, "send", "--from", "bob", "--to", "peer:b/alice", "--subject",
                        "into postgres", "--body", "signed")  # fmt: skip
            [a_id] = sent["ids"]
            assert _cli(env_a, "relay", "--to", url, "--once")["relayed"] == [a_id]
            [probe] = c.get("/v1/inbox").json()["messages"]
            assert probe["from"] == "peer:a/bob" and probe["subject"] == "into postgres"
            assert probe["origin"] == {"peer": "a", "key_id": a_key["key_id"], "origin_id": a_id}
            # A forgets it relayed (killed before marking): B returns the first delivery.
            with sqlite3.connect(db_a) as conn:
                conn.execute("DELETE FROM am_relayed")
            assert _cli(env_a, "relay", "--to", url, "--once")["relayed"] == [a_id]
            assert len(c.get("/v1/inbox").json()["messages"]) == 1
            read = _cli(env_b, "read", probe["id"])["message"]
            assert read["body"] == "signed" and read["origin"] == probe["origin"]
    finally:
        daemon.send_signal(2)
        daemon.wait(timeout=30)
        log.close()
