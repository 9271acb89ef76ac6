"""The spawn presets' MCP server: ``agentmaild.hot.mcp_relay`` relays a turn's MCP session to
its daemon's MCP socket (``mcpserver.hosted``), so the turn's CLI does not wait for the SDK to
load; with no daemon it becomes the cold ``agentmaild mcp``. Real daemon, real relay process, the
SDK's client.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from agentmaild.channels.mcp_wiring import server_argv
from agentmaild.control import protocol
from agentmaild.hot.mcp_relay import mcp_socket_of
from tests.support.daemon import DaemonProc
from tests.support.mcp_client import mcp_session, text_of
from tests.support.waiting import wait_for

RELAY = ("agentmaild.hot.mcp_relay",)


def _loaded_sdk(imported: str) -> bool:
    """An importtime line names the SDK's types module."""
    return any(line.rsplit("|", 1)[-1].strip() == "mcp_types" for line in imported.splitlines())


def _env(d: DaemonProc) -> dict[str, str]:
    return {**d.env, "AGENTMAIL_DB": str(d.db)}  # what a spawned turn has: its store


def _initialize(d: DaemonProc) -> tuple[dict[str, object], str]:
    """One ``initialize`` through a relay process run to its end: the answer, and the modules
    the process imported (importtime on its stderr, read whole once it exited)."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", *RELAY, "--agent", "alice"],
        env={**_env(d), "PYTHONPROFILEIMPORTTIME": "1"},  # kept across the fallback's exec
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(hello).encode() + b"\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    _out, err = proc.communicate(timeout=30)  # closes stdin: the client's EOF ends the session
    assert proc.returncode == 0, err[-500:]
    return answer, err.decode(errors="replace")


def _team(d: DaemonProc) -> None:
    for name in ("alice", "bob"):
        assert d.cli("agents", "add", name, "-c", "builder", "--channel", "pull").returncode == 0


async def _send_through(env: dict[str, str], errlog: Path) -> dict[str, object]:
    with errlog.open("w") as err:
        async with mcp_session(env, "--agent", "alice", module=RELAY, errlog=err) as (s, _):
            names = {t.name for t in (await s.list_tools()).tools}
            assert {"send", "check", "team"} <= names
            forged = await s.call_tool("send", {"to": "bob", "subject": "x", "from": "mallory"})
            assert forged.is_error and "acts as 'alice' only" in text_of(forged)
            sent = await s.call_tool("send", {"to": "bob", "subject": "hi", "body": "relayed"})
            assert not sent.is_error, text_of(sent)
            return dict(sent.structured_content or {})


async def test_the_presets_start_the_relay() -> None:
    assert server_argv("alice") == [sys.executable, "-m", *RELAY, "--agent", "alice"]


async def test_the_relay_is_served_by_the_daemon_without_loading_the_sdk(
    daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    d = daemons()
    _team(d)
    sent = await _send_through(_env(d), tmp_path / "relay.err")
    [mid] = sent["ids"]  # type: ignore[misc]
    rows = json.loads(d.cli("--json", "inbox", "--agent", "bob").stdout)["messages"]
    assert [(m["id"], m["from"], m["subject"]) for m in rows] == [(mid, "alice", "hi")]
    answer, imported = _initialize(d)
    assert answer["result"]["serverInfo"]["name"] == "agentmail"  # type: ignore[index]
    assert not _loaded_sdk(imported)  # the daemon served it
    wait_for(lambda: d.events("mcp.session_ended"), 10, "the daemon to end the session")
    assert [e["agent"] for e in d.events("mcp.session")] == ["alice", "alice"]
    assert d.ctl("ping")["pong"]


async def test_without_a_daemon_the_relay_is_the_cold_server(
    daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    d = daemons(start=False)
    _team(d)
    sent = await _send_through(_env(d), tmp_path / "relay.err")
    [mid] = sent["ids"]  # type: ignore[misc]
    rows = json.loads(d.cli("--json", "inbox", "--agent", "bob").stdout)["messages"]
    assert [(m["id"], m["from"]) for m in rows] == [(mid, "alice")]
    answer, imported = _initialize(d)
    assert answer["result"]["serverInfo"]["name"] == "agentmail"  # type: ignore[index]
    assert _loaded_sdk(imported)  # it became `agentmaild mcp`


def test_bad_arguments_are_one_line_and_exit_2(daemons: Callable[..., DaemonProc]) -> None:
    d = daemons(start=False)
    for args in ([], ["--agent"], ["--agent", "Not A/Name"], ["--who", "alice"]):
        done = subprocess.run([sys.executable, "-m", *RELAY, *args], env=_env(d),
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        assert done.returncode == 2, args
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, done.stderr)


def test_a_bad_first_line_is_refused_and_the_daemon_goes_on(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = daemons()
    path = mcp_socket_of(str(d.sock))
    for first in (b"nonsense\n", b'{"agent": "../etc"}\n', b'{"who": 1}\n'):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(15)
            s.connect(path)
            s.sendall(first)
            assert s.recv(100) == b""  # closed, nothing served
    assert len(d.events("mcp.refused")) == 3
    # A client gone before its answer is written (a turn that ended): the session ends, the
    # daemon goes on serving.
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    for _ in range(3):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(b'{"agent": "alice"}\n' + json.dumps(hello).encode() + b"\n")
    wait_for(lambda: len(d.events("mcp.session_ended")) == 3, 20, "three sessions to end")
    assert d.ctl("ping")["pong"] and d.alive()


def test_a_socket_path_too_long_for_the_mcp_socket_leaves_the_daemon_serving(
    daemons: Callable[..., DaemonProc],
) -> None:
    """``[daemon] socket`` set to a path with no room for ``.mcp``: the MCP socket is not bound
    (logged) and the daemon serves on; it had stopped with "AF_UNIX path too long"."""
    base = Path(tempfile.mkdtemp(prefix="am-long-", dir="/tmp"))
    try:
        room = protocol.MAX_SOCKET_PATH_BYTES - len(os.fsencode(base / "s.sock")) - 2
        sock = base / ("s" * (room + 2) + ".sock")  # fits, but "<sock>.mcp" does not
        assert len(os.fsencode(sock)) == protocol.MAX_SOCKET_PATH_BYTES - 1
        d = daemons(start=False)
        d.env["AGENTMAILD_DAEMON_SOCKET"] = str(sock)
        d.sock = sock
        d.start()
        assert d.ctl("ping")["pong"]
        [unbound] = d.events("mcp.socket_unbound")
        assert "too long" in unbound["error"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
RELAY_CLIENT = """
import os, sys, anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

async def main():
    p = StdioServerParameters(command=sys.executable,
                              args=["-m", "agentmaild.hot.mcp_relay", "--agent", "alice"],
                              env=dict(os.environ))  # the store's daemon: AGENTMAIL_DB
    async with stdio_client(p) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await s.list_tools()
        print("ready", flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


def test_a_killed_client_leaves_no_relay_and_the_daemon_ends_its_session(
    daemons: Callable[..., DaemonProc],
) -> None:
    from tests.support.waiting import alive

    d = daemons()
    _team(d)
    client = subprocess.Popen([sys.executable, "-c", RELAY_CLIENT], env=_env(d),
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == "ready"
        [relay] = [int(c) for t in Path(f"/proc/{client.pid}/task").iterdir()
                   for c in (t / "children").read_text().split()]  # fmt: skip
        assert alive(relay)
        wait_for(lambda: d.events("mcp.session"), 20, "the daemon to serve the relay's session")
        assert [e["agent"] for e in d.events("mcp.session")] == ["alice"]
        client.kill()
        client.wait(10)
        wait_for(lambda: not alive(relay), 20, "the relay to exit after its client died")
        wait_for(lambda: d.events("mcp.session_ended"), 20, "the daemon to end the session")
    finally:
        if client.poll() is None:
            client.kill()
    assert d.ctl("ping")["pong"]  # the daemon serves on
