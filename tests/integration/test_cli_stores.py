"""The CLI on either store, named the same way: a SQLite path or a ``postgresql://`` DSN wherever
a store is named (``--db``, ``AGENTMAIL_DB``, ``[store] db``); then what only a server has (an
unreachable server, ``store check`` of the schema and amcheck). The real CLI as child processes,
a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.postgres_migrate import PG_SCHEMA_VERSION
from tests.support.pg import PgDatabases
from tests.support.store_targets import StoreTarget

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


def test_send_and_read_with_db_flag(tmp_path: Path, empty_store_target: StoreTarget) -> None:
    target = empty_store_target.target  # no store yet: the first write command creates it
    env = env_for(tmp_path)
    ok(env, "--db", target, "agents", "add", "bob", "--capability", "builder")
    sent = ok(env, "--db", target, "send", "--to", "bob", "--subject", "hi", "--body", "über")
    inbox = ok(env, "--db", target, "inbox", "--agent", "bob")
    assert [m["id"] for m in inbox["messages"]] == [sent["ids"][0]]
    status = ok(env, "--db", target, "status")
    assert status["store"] == empty_store_target.location.shown and status["running"] is False
    assert [(a["agent"], a["unread"]) for a in status["agents"]] == [("bob", 1)]
    store = empty_store_target.open()
    assert store.list_messages()[0].body == "über"
    store.close()


def test_check_inject_on_a_target_takes_renders_and_acks(
    tmp_path: Path, store_target: StoreTarget
) -> None:
    env = env_for(tmp_path, AGENTMAIL_DB=store_target.target)
    ok(env, "agents", "add", "bob", "--capability", "builder")
    ok(env, "send", "--to", "bob", "--subject", "first", "--body", "one")
    taken = ok(env, "check", "--inject", "--agent", "bob")
    assert len(taken["acked"]) == 1 and "first" in taken["text"]
    assert ok(env, "check", "--inject", "--agent", "bob") == {"ok": True, "acked": [], "text": ""}
    unknown = cli(env, "check", "--inject", "--agent", "nobody")
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: unknown agent")
    # as in send, the config may let any name read (store.checks.is_known)
    env["AGENTMAILD_LIMITS_REFUSE_UNKNOWN_RECIPIENTS"] = "false"
    lenient = ok(env, "check", "--inject", "--agent", "nobody")
    assert lenient == {"ok": True, "acked": [], "text": ""}


def test_store_db_in_the_config_file_names_the_store(
    tmp_path: Path, store_target: StoreTarget
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\ndb = "{store_target.target}"\n')
    env = env_for(tmp_path, AGENTMAILD_CONFIG=str(config))
    ok(env, "agents", "add", "carol", "--capability", "reviewer")
    store = store_target.open()
    assert [a.name for a in store.list_agents()] == ["carol"]
    store.close()


def test_a_read_only_command_never_creates_the_store(
    tmp_path: Path, empty_store_target: StoreTarget
) -> None:
    done = cli(env_for(tmp_path), "--db", empty_store_target.target, "inbox", "--agent", "bob")
    # The wording differs by what is missing: a file that is not there; a database (which
    # exists) without agentmaild's schema in it.
    missing = {"sqlite": "no store at", "postgres": "no agentmaild store"}[empty_store_target.kind]
    assert done.returncode == 1 and missing in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not Path(empty_store_target.location.local_path).exists()  # nothing made here either


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


def check(env: dict[str, str], dsn: str, *args: str) -> tuple[int, dict[str, Any]]:
    done = cli(env, "--db", dsn, "store", "check", *args, "--json")
    return done.returncode, json.loads(done.stdout)


def test_store_check_on_a_dsn_checks_the_schema_and_the_rows(
    tmp_path: Path, pg_databases: PgDatabases
) -> None:
    env = env_for(tmp_path)
    empty = pg_databases.create(migrated=False)
    refused = cli(env, "--db", empty, "store", "check")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error: no agentmaild store in postgresql://")
    dsn = pg_databases.create()
    ok(env, "--db", dsn, "agents", "add", "bob", "--capability", "builder")
    mid = ok(env, "--db", dsn, "send", "--to", "bob", "--subject", "s", "--body", "b")["ids"][0]
    assert check(env, dsn) == (0, {"ok": True, "store": check(env, dsn)[1]["store"],
                                   "check": "pg_schema", "problems": [], "warnings": []})
    human = cli(env, "--db", dsn, "store", "check")
    assert human.returncode == 0 and "pg_schema: ok" in human.stdout

    store = PostgresMailStore(dsn)
    conn = store.connection
    conn.execute("UPDATE messages SET delivery_id = 'dlv-gone00' WHERE id = %s", (mid,))
    conn.execute("INSERT INTO am_nudges VALUES ('bob', 'msg-gone', 'urgent', '2026-01-01')")
    code, report = check(env, dsn)
    assert code == 1 and report["ok"] is False
    assert report["problems"] == ["1 unread message(s) belong to a delivery that does not "
                                  "exist; they would never be delivered"]
    assert report["warnings"] == ["1 nudge(s) name a message that no longer exists (harmless)"]
    assert report["error"]["code"] == "store_damaged"

    conn.execute("DROP TRIGGER am_registry_on_update ON am_agents")
    conn.execute("DROP TABLE am_prompt_seen")
    code, report = check(env, dsn)
    assert code == 1 and report["problems"] == [
        f"schema version {PG_SCHEMA_VERSION} but table(s) missing: am_prompt_seen",
        "registry trigger(s) missing (daemons miss registry changes): am_registry_on_update",
    ]
    conn.execute("UPDATE am_schema_version SET version = 99")
    assert "schema version 99 is newer" in check(env, dsn)[1]["warnings"][0]
    store.close()
    pg_databases.drop(dsn)
    pg_databases.drop(empty)


def test_store_check_full_on_a_dsn_runs_amcheck_when_installed(
    tmp_path: Path, pg_dsn: str
) -> None:
    env = env_for(tmp_path)
    ok(env, "--db", pg_dsn, "agents", "add", "bob", "--capability", "builder")
    ok(env, "--db", pg_dsn, "send", "--to", "bob", "--subject", "s", "--body", "b")
    code, report = check(env, pg_dsn, "--full")
    assert (code, report["check"]) == (0, "pg_amcheck")
    assert report["warnings"] == [
        "--full: the amcheck extension is not installed in this database, so the indexes' "
        "structure was not checked (CREATE EXTENSION amcheck enables it)"
    ]
    text = cli(env, "--db", pg_dsn, "store", "check", "--full").stdout
    assert "pg_amcheck: ok" not in text and "pg_schema: ok" in text  # it did not run
    assert "amcheck extension is not installed" in text
    store = PostgresMailStore(pg_dsn)
    store.connection.execute("CREATE EXTENSION amcheck")
    store.close()
    assert "pg_amcheck: ok" in cli(env, "--db", pg_dsn, "store", "check", "--full").stdout
    assert check(env, pg_dsn, "--full") == (0, {
        "ok": True, "store": report["store"], "check": "pg_amcheck", "problems": [],
        "warnings": [],
    })  # fmt: skip
