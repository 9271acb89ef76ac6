"""The dashboard on either store over real HTTP (a real daemon process on a SQLite file or a
PostgreSQL database): the team page with its host column, a thread page, full-text search and the
live stream, read through the dashboard's own read-only connection. PostgreSQL only: the search
plan uses the GIN index of schema step 5; the reader cannot write and its mark moves."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from agentmaild.store.reader_postgres import PQ, PostgresReader
from tests.support.net import daemon_answers, free_port
from tests.support.store_targets import StoreTarget
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)
BODY = "the <script>alert(1)</script> canary rollout starts at noon"


def ok(env: dict[str, str], *args: str) -> Any:
    argv = [sys.executable, "-m", "agentmaild", "--json", *args]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr or done.stdout
    return json.loads(done.stdout)




@pytest.fixture
def board(tmp_path: Path, store_target: StoreTarget) -> Iterator[dict[str, Any]]:
    """A daemon on either store with its HTTP face; its team spans two hosts; one thread of
    mail."""
    port = free_port()
    env = store_target.with_env(AGENTMAILD_HTTP_LISTEN=f"127.0.0.1:{port}")
    ok(env, "agents", "add", "alice", "--capability", "builder")
    ok(env, "agents", "add", "far", "--capability", "builder", "--host", "elsewhere")
    first = ok(env, "send", "--from", "bob", "--to", "far", "-s", "deploy plan", "-b", BODY)
    mid = first["ids"][0]
    ok(env, "send", "--from", "far", "--to", "alice", "-s", "re: deploy plan", "--thread", mid,
       "-b", "noted, watching the dashboards")  # fmt: skip
    token = ok(env, "tokens", "create", "operator")["token"]
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: daemon.poll() is not None or daemon_answers(store_target.socket), 30,
                 "the daemon's socket")  # fmt: skip
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
            login = client.get(f"/?token={token}", follow_redirects=False)
            assert login.status_code == 303 and login.headers["location"] == "/"
            yield {"client": client, "mid": mid, "target": store_target}
    finally:
        daemon.send_signal(2)
        daemon.wait(timeout=30)
        log.close()


def test_team_page_shows_the_host_column_and_the_stream_sends_the_team(
    board: dict[str, Any],
) -> None:
    client: httpx.Client = board["client"]
    page = client.get("/")
    assert page.status_code == 200, page.text
    assert "<th>host</th>" in page.text  # two hosts: alice's (this machine) and far's
    assert '<td class="host">elsewhere</td>' in page.text and 'id="agent-alice"' in page.text
    with client.stream("GET", "/events", params={"topic": "team"}) as stream:
        lines = stream.iter_lines()
        assert next(line for line in lines if line.startswith("event:")) == "event: team"
        fragment = "".join(next(lines) for _ in range(40))
        assert 'id="agent-far"' in fragment and '<td class="host">elsewhere</td>' in fragment
    target: StoreTarget = board["target"]
    if target.kind == "postgres":  # a server names its clients; a file has no such view
        with psycopg.connect(target.target, autocommit=True) as conn:
            readers = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                "'agentmaild-dashboard' AND datname = current_database()"
            ).fetchone()
        assert readers == (1,)  # its own connection, not the store's
    for path in ("/timeline", "/timeline?agent=far", "/dead", "/mail"):
        assert client.get(path).status_code == 200, path


def test_thread_page_and_full_text_search(board: dict[str, Any]) -> None:
    client: httpx.Client = board["client"]
    thread = client.get(f"/mail/thread/{board['mid']}")
    assert thread.status_code == 200
    assert "noted, watching the dashboards" in thread.text and "re: deploy plan" in thread.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in thread.text
    assert "<script>alert" not in thread.text
    found = client.get("/mail/search", params={"q": "canary noon"}).text
    # A server's full-text index covers all mail; a file's search scans a recent window.
    scope = {"postgres": "all mail is searched",
             "sqlite": "the newest 5000 messages are searched"}[board["target"].kind]  # fmt: skip
    assert "1 match for" in found and scope in found
    assert "<mark>canary</mark>" in found and "deploy plan" in found
    assert "1 match for" in client.get("/mail/search", params={"q": '"rollout starts"'}).text
    # One grammar on every store (reader.search_terms): ``-word`` excludes, ``or`` joins.
    assert "0 matches" in client.get("/mail/search", params={"q": "canary -noon"}).text
    assert "1 match for" in client.get("/mail/search", params={"q": "canary -zebra"}).text
    assert "0 matches" in client.get("/mail/search", params={"q": "-noon"}).text
    either = client.get("/mail/search", params={"q": "zebra or canary"}).text
    assert "1 match for" in either
    assert "2 matches" in client.get("/mail/search", params={"q": "deploy"}).text
    assert "0 matches" in client.get("/mail/search", params={"q": "' OR 1=1 --"}).text


def test_the_operator_pages_on_either_store(board: dict[str, Any]) -> None:
    """Needs you (a question to the operator, answered from the page), the agent page and the
    graph read through the same reader on SQLite and PostgreSQL."""
    client: httpx.Client = board["client"]
    env = board["target"].with_env()
    asked = ok(env, "send", "--from", "far", "--to", "operator", "--type", "question",
               "-s", "ship it?", "-b", BODY)["ids"][0]  # fmt: skip
    page = client.get("/needs-you")
    assert page.status_code == 200 and f'data-ref="{asked}"' in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert 'class="count">1<' in client.get("/").text  # the header's count
    token = ok(env, "tokens", "create", "operator", "--scope", "dashboard",
               "--scope", "control")["token"]  # fmt: skip
    with httpx.Client(base_url=client.base_url, timeout=20) as steerer:
        steerer.get(f"/?token={token}", follow_redirects=False)
        csrf = steerer.get("/").text.split('"X-CSRF-Token": "', 1)[1].split('"', 1)[0]
        answered = steerer.post(f"/mail/reply/{asked}", data={"body": "yes, ship it"},
                                headers={"origin": str(client.base_url).rstrip("/"),
                                         "x-csrf-token": csrf})  # fmt: skip
    assert answered.status_code == 200 and "to far" in answered.text, answered.text
    assert f'data-ref="{asked}"' not in client.get("/needs-you").text
    agent = client.get("/agents/far")
    assert agent.status_code == 200 and "elsewhere" in agent.text and "deploy plan" in agent.text
    assert client.get("/agents/nobody").status_code == 404
    drawn = client.get("/graph").text
    assert 'data-from="bob" data-to="far"' in drawn and 'data-from="far" data-to="alice"' in drawn
    assert 'data-from="operator" data-to="far"' in drawn


def test_search_uses_the_schema_5_full_text_index(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # Neither a scan of the table nor one of the newest-first index, which a pooled
        # database's statistics can make the cheaper way to the first 5: the full-text index
        # is then the only way left, and the plan shows whether it serves this query at all.
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_indexscan = off")
        plan = conn.execute("EXPLAIN " + PQ["search"], {"query": "canary", "limit": 5})
        text = "\n".join(r[0] for r in plan.fetchall())
    assert "am_idx_messages_fts" in text


def test_the_reader_cannot_write_and_its_mark_moves_with_a_commit(pg_dsn: str) -> None:
    reader = PostgresReader(pg_dsn)
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.conn().execute("DELETE FROM messages")
        before, parts = reader.tick({"team": None, "dead": None})
        assert parts == {"team": [], "dead": []}
        assert reader.tick({"team": reader.mark()})[1] in ({}, {"team": []})  # the cluster's
        # next transaction id: another database's commit moves it too, so may read again
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO am_agents (name, capability, state, channel, created_at, updated_at,"
                " host) VALUES ('ann', 'builder', 'idle', 'pull', 'x', 'x', 'h2')"
            )
        after, parts = reader.tick({"team": before})
        assert after != before and [a["host"] for a in parts["team"]] == ["h2"]
    finally:
        reader.close()
