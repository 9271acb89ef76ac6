"""The CLI on a PostgreSQL store: a ``postgresql://`` DSN wherever a store is named (``--db``,
``AGENTMAIL_DB``, ``[store] db``). The real CLI as child processes, a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmaild.store.postgres import PostgresMailStore
from tests.support.pg import PgDatabases

pytestmark = pytest.mark.timeout(120)


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL", "CLAUDE"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentmaild", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def ok(env: dict[str, str], *args: str) -> Any:
    done = cli(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_send_and_read_with_db_flag(tmp_path: Path, pg_databases: PgDatabases) -> None:
    dsn = pg_databases.create(migrated=False)  # the first write command creates the schema
    env = env_for(tmp_path)
    ok(env, "--db", dsn, "agents", "add", "bob", "--capability", "builder")
    sent = ok(env, "--db", dsn, "send", "--to", "bob", "--subject", "hi", "--body", "über")
    inbox = ok(env, "--db", dsn, "inbox", "--agent", "bob")
    assert [m["id"] for m in inbox["messages"]] == [sent["ids"][0]]
    status = ok(env, "--db", dsn, "status")
    assert status["store"].startswith("postgresql://") and status["running"] is False
    assert [(a["agent"], a["unread"]) for a in status["agents"]] == [("bob", 1)]
    store = PostgresMailStore(dsn)
    assert store.list_messages()[0].body == "über"
    store.close()
    pg_databases.drop(dsn)


def test_check_inject_on_a_dsn_takes_renders_and_acks(tmp_path: Path, pg_dsn: str) -> None:
    env = env_for(tmp_path, AGENTMAIL_DB=pg_dsn)
    ok(env, "agents", "add", "bob", "--capability", "builder")
    ok(env, "send", "--to", "bob", "--subject", "first", "--body", "one")
    taken = ok(env, "check", "--inject", "--agent", "bob")
    assert len(taken["acked"]) == 1 and "first" in taken["text"]
    assert ok(env, "check", "--inject", "--agent", "bob") == {"ok": True, "acked": [], "text": ""}
    unknown = cli(env, "check", "--inject", "--agent", "nobody")
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: unknown agent")


def test_store_db_in_the_config_file_names_a_dsn(tmp_path: Path, pg_dsn: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\ndb = "{pg_dsn}"\n')
    env = env_for(tmp_path, AGENTMAILD_CONFIG=str(config))
    ok(env, "agents", "add", "carol", "--capability", "reviewer")
    store = PostgresMailStore(pg_dsn)
    assert [a.name for a in store.list_agents()] == ["carol"]
    store.close()


def test_an_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    dsn = "postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2"
    for args in (["agents", "list"], ["send", "--to", "x", "--subject", "s", "--body", "b"]):
        done = cli(env, "--db", dsn, *args)
        assert done.returncode == 1
        assert done.stderr.startswith("error: cannot open store postgresql://nobody@127.0.0.1:1/")
        assert len(done.stderr.splitlines()) == 1 and "secret" not in done.stderr
    as_json = cli(env, "--db", dsn, "agents", "list", "--json")
    assert json.loads(as_json.stdout)["error"]["code"] == "store"


def test_a_read_only_command_never_creates_the_schema(
    tmp_path: Path, pg_databases: PgDatabases
) -> None:
    dsn = pg_databases.create(migrated=False)
    done = cli(env_for(tmp_path), "--db", dsn, "inbox", "--agent", "bob")
    assert done.returncode == 1 and "no agentmaild store" in done.stderr
    pg_databases.drop(dsn)
