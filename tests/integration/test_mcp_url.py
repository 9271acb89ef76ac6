"""``agentmaild mcp`` in URL mode (``AGENTMAIL_URL`` + ``AGENTMAIL_TOKEN``): the token's agent is
the server's, through a live daemon's HTTP API; and a server whose client is killed goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.http_api import base_url, http_env, mint
from tests.support.mcp_client import mcp_session, text_of
from tests.support.waiting import alive, wait_for


@pytest.fixture
def served(store: SqliteMailStore, daemons: Callable[..., DaemonProc]) -> DaemonProc:
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    return daemons(http_env())


def _remote_env(d: DaemonProc, token: str) -> dict[str, str]:
    # A store path that does not exist: the API answers, never the file.
    return {**d.env, "AGENTMAIL_URL": base_url(d), "AGENTMAIL_TOKEN": token,
            "AGENTMAIL_DB": "/nonexistent/mail.db"}  # fmt: skip


async def test_url_mode_acts_as_the_tokens_agent(
    served: DaemonProc, store: SqliteMailStore
) -> None:
    env = _remote_env(served, mint(served, "alice"))
    async with mcp_session(env) as (s, _):
        sent = await s.call_tool("send", {"to": "bob", "subject": "over http", "body": "hi"})
        assert not sent.is_error, text_of(sent)
        forged = await s.call_tool("send", {"to": "bob", "subject": "x", "from": "bob"})
        assert forged.is_error and "acts as 'alice' only" in text_of(forged)
        refused = await s.call_tool("send", {"to": "ghost", "subject": "x"})
        assert refused.is_error and "unknown recipient 'ghost'" in text_of(refused)
        team = await s.call_tool("team", {})
        assert team.is_error and "needs the store" in text_of(team)
    [m] = store.inbox("bob")
    assert (m.from_agent, m.subject, m.id) == (
        "alice",
        "over http",
        sent.structured_content["ids"][0],
    )
    bob_env = _remote_env(served, mint(served, "bob"))
    async with mcp_session(bob_env) as (s, _):
        checked = await s.call_tool("check", {})
        assert checked.structured_content["acked"] == [m.id] and "hi" in text_of(checked)
        read = await s.call_tool("read", {"id": m.id})
        assert not read.is_error and read.structured_content["message"]["from"] == "alice"


def test_url_mode_refuses_another_agent_than_the_tokens(served: DaemonProc) -> None:
    env = _remote_env(served, mint(served, "alice"))
    argv = [sys.executable, "-m", "agentmaild", "mcp", "--agent", "bob"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, input="")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: mcp: this token acts as 'alice', not 'bob'"


CLIENT = textwrap.dedent(
    """
    import sys, anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def main():
        p = StdioServerParameters(command=sys.executable,
                                  args=["-m", "agentmaild", "mcp", "--agent", "alice"])
        async with stdio_client(p) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.list_tools()
            print("ready", flush=True)
            await anyio.sleep(600)

    anyio.run(main)
    """
)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_a_killed_client_leaves_no_server(tmp_path: Path, db: Path, store: SqliteMailStore) -> None:
    env = {**os.environ, "AGENTMAIL_DB": str(db), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    client = subprocess.Popen([sys.executable, "-c", CLIENT], env=env, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == "ready"
        [server] = _children(client.pid)
        assert alive(server)
        client.send_signal(signal.SIGKILL)
        client.wait(10)
        wait_for(lambda: not alive(server), 20, "the server to exit after its client died")
    finally:
        if client.poll() is None:
            client.kill()


async def test_a_daemon_down_is_a_tool_error_and_the_server_waits_for_it(
    served: DaemonProc, store: SqliteMailStore
) -> None:
    env = _remote_env(served, mint(served, "alice"))
    async with mcp_session(env) as (s, _):
        assert not (await s.call_tool("send", {"to": "bob", "subject": "one"})).is_error
        served.stop()
        for tool, args in (("send", {"to": "bob", "subject": "two"}), ("inbox", {})):
            down = await s.call_tool(tool, args)
            assert down.is_error and "cannot reach agentmaild at" in text_of(down), tool
            assert down.structured_content["error"]["code"] == "daemon_not_running"
        assert (await s.call_tool("check", {})).is_error  # still serving, the daemon still down
    assert [m.subject for m in store.inbox("bob")] == ["one"]
