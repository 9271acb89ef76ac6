"""The PostgreSQL store on the paths the team rules and the HTTP face added: `ask` with no daemon
polls the store; a daemon on PostgreSQL serves tokens, `/v1/inbox/take` with inject and
`/v1/hooks/*` (the hooks of a remote agent). Real server, real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmaild.control.protocol import socket_path_for
from agentmaild.store.location import StoreLocation
from agentmaild.store.postgres import PostgresMailStore
from tests.support.daemon import FAST, base_env
from tests.support.net import daemon_answers, free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentmaild", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)  # fmt: skip


def ok(env: dict[str, str], *args: str) -> Any:
    done = cli(env, "--json", *args)
    assert done.returncode == 0, done.stderr or done.stdout
    return json.loads(done.stdout)


def test_ask_with_no_daemon_finds_the_reply_in_a_postgres_store(
    tmp_path: Path, pg_dsn: str
) -> None:
    env = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn, "XDG_STATE_HOME": str(tmp_path / "st")})
    ok(env, "agents", "add", "worker", "--capability", "builder")
    ok(env, "agents", "add", "lead", "--capability", "lead")
    ask = subprocess.Popen(
        [sys.executable, "-m", "agentmaild", "--json", "ask", "--from", "lead", "--to", "worker",
         "-s", "which port?", "-b", "for the API", "--timeout", "60s"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def question() -> str | None:
        found = ok(env, "list", "--to", "worker", "--type", "question")["messages"]
        return str(found[0]["id"]) if found else None

    qid = wait_for(question, 30, "the question to be in the store")
    ok(env, "reply", qid, "--from", "worker", "-b", "8080")
    out, err = ask.communicate(timeout=60)
    assert ask.returncode == 0, err
    answer = json.loads(out)
    assert answer["question_id"] == qid and answer["reply"]["body"] == "8080"




def test_a_postgres_daemon_serves_tokens_inject_takes_and_hooks(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    port = free_port()
    extra = {"AGENTMAIL_DB": pg_dsn, "XDG_STATE_HOME": str(state),
             "AGENTMAILD_HTTP_LISTEN": f"127.0.0.1:{port}"}  # fmt: skip
    env = base_env(tmp_path, extra, FAST)
    ok(env, "agents", "add", "alice", "--capability", "builder")
    token = ok(env, "tokens", "create", "operator")["token"]
    assert [t["agent"] for t in ok(env, "tokens", "list")["tokens"]] == ["operator"]
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    headers = {"authorization": f"Bearer {token}"}
    try:
        sock = socket_path_for(StoreLocation.of(pg_dsn).local_path)
        wait_for(lambda: daemon.poll() is not None or daemon_answers(sock), 30,
                 "the daemon's socket")
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=20) as c:
            wait_for(lambda: _health(c), 30, "the HTTP API")
            sent = c.post("/v1/messages", json={"to": "alice", "from": "bob", "subject": "hi",
                                                 "body": "for the hook"})  # fmt: skip
            assert sent.status_code == 201, sent.text
            took = c.post("/v1/inbox/take", json={"agent": "alice", "inject": True}).json()
            assert "for the hook" in took["text"] and took["acked"] == sent.json()["ids"]
            again = c.post("/v1/messages", json={"to": "alice", "from": "bob", "subject": "yo",
                                                  "body": "by the remote hook"})  # fmt: skip
            hook = c.post("/v1/hooks/user-prompt-submit",
                          json={"agent": "alice", "input": '{"prompt": "go"}'})  # fmt: skip
            assert hook.status_code == 200, hook.text
            answer = hook.json()
            assert answer["exit"] == 0 and "by the remote hook" in answer["stdout"]
            assert again.json()["ids"][0] in answer["stdout"]
            assert _turn(pg_dsn, "alice") == "busy"
            stop = c.post("/v1/hooks/stop", json={"agent": "alice", "input": "{}"}).json()
            assert (stop["exit"], stop["stdout"]) == (0, "") and _turn(pg_dsn, "alice") == "idle"
            taken = c.post("/v1/inbox/take", json={"agent": "alice", "inject": True}).json()
            assert taken["acked"] == []  # the hook acked what it printed
            page = c.get("/mail")  # the dashboard serves PostgreSQL too: a session is needed
            assert page.status_code == 401 and "agentmaild dashboard" in page.text
            assert c.get("/v1/health").status_code == 200  # the daemon carries on
    finally:
        daemon.send_signal(2)
        daemon.wait(timeout=30)
        log.close()


def _turn(dsn: str, agent: str) -> str | None:
    store = PostgresMailStore(dsn)
    try:
        found = store.get_agent(agent)
        assert found is not None
        return found.turn_state
    finally:
        store.close()


def _health(c: httpx.Client) -> bool:
    try:
        return c.get("/v1/health").status_code == 200
    except httpx.TransportError:
        return False
