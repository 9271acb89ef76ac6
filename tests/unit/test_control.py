"""The control socket on a real Unix socket: protocol, limits, peer checks, stale files, client."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agentmaild.control import client, protocol
from agentmaild.control.server import ControlServer, Handler, ensure_private_dir
from agentmaild.errors import (
    ControlError,
    DaemonNotRunning,
    NotFound,
    ProtocolError,
    ValidationError,
)

BOUND = 30.0  # generous upper bound for any single test step; only a hang comes close


async def handle(cmd: str, args: dict[str, Any]) -> dict[str, Any]:
    if cmd == "ping":
        return {"pong": True, "pid": os.getpid()}
    if cmd == "status":
        raise NotFound("no agent named 'bob'")
    if cmd == "pause":
        raise ValidationError("args.agent is required")
    if cmd == "agents":
        raise RuntimeError("boom")
    if cmd == "metrics":
        return {"not json": object()}
    return {"cmd": cmd, "args": args}


@asynccontextmanager
async def running(
    path: Path, handler: Handler = handle, **kwargs: Any
) -> AsyncIterator[ControlServer]:
    """Serve inside the calling test's task (never across a fixture yield)."""
    server = ControlServer(path, handler, **kwargs)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(BOUND):
            await tg.start(server.serve)
        yield server
        tg.cancel_scope.cancel()


async def call(path: Path, cmd: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    with anyio.fail_after(BOUND):
        return await anyio.to_thread.run_sync(functools.partial(client.request, path, cmd, args))


def raw_exchange(path: Path, payload: bytes) -> bytes:
    """Send raw bytes, then read until the server closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(BOUND)
        sock.connect(str(path))
        sock.sendall(payload)
        return recv_all(sock)


def recv_all(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def error_of(reply: bytes) -> dict[str, Any]:
    obj = json.loads(reply)
    assert obj["v"] == 1
    assert obj["ok"] is False
    return dict(obj["error"])


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    # pytest's tmp paths are often too long for sun_path; this exercises the fallback as needed.
    return protocol.socket_path_for(tmp_path / "mail.db")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(os.path.realpath("/tmp")) / f"amd-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# --- round trips and error mapping ------------------------------------------------------------


async def test_ping_round_trip_and_socket_removed_on_exit(sock: Path) -> None:
    async with running(sock):
        assert await call(sock, "ping") == {"pong": True, "pid": os.getpid()}
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert not await anyio.Path(sock).exists()


async def test_args_reach_the_handler(sock: Path) -> None:
    async with running(sock):
        assert await call(sock, "retry", {"id": 7}) == {"cmd": "retry", "args": {"id": 7}}


@pytest.mark.parametrize(
    ("cmd", "code", "fragment"),
    [
        ("status", "not_found", "no agent named 'bob'"),
        ("pause", "invalid", "args.agent is required"),
        ("agents", "internal", "internal error"),
        ("metrics", "internal", "internal error"),
        ("frobnicate", "unknown_command", "unknown command 'frobnicate'"),
    ],
)
async def test_errors_become_error_replies(sock: Path, cmd: str, code: str, fragment: str) -> None:
    with capture_logs() as logs:
        async with running(sock):
            with pytest.raises(ControlError, match=fragment) as caught:
                await call(sock, cmd)
            assert await call(sock, "ping")  # the server survived
    assert caught.value.code == code
    if code == "internal":
        assert any(e["log_level"] == "error" for e in logs)


async def test_not_json_gets_a_protocol_error(sock: Path) -> None:
    async with running(sock):
        reply = await anyio.to_thread.run_sync(raw_exchange, sock, b"hello there\n")
        assert await call(sock, "ping")
    assert error_of(reply)["code"] == "protocol"
    assert "not valid JSON" in error_of(reply)["message"]


async def test_wrong_version_gets_a_protocol_error(sock: Path) -> None:
    async with running(sock):
        payload = b'{"v": 2, "cmd": "ping"}\n'
        reply = await anyio.to_thread.run_sync(raw_exchange, sock, payload)
    assert "unsupported protocol version 2" in error_of(reply)["message"]


# --- limits -------------------------------------------------------------------------------------


def send_huge(path: Path, size: int) -> tuple[int, bytes]:
    """Push up to ``size`` bytes without a newline; return how many got in, and the reply."""
    sent = 0
    chunk = b"x" * 65536
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(BOUND)
        sock.connect(str(path))
        try:
            while sent < size:
                sent += sock.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return sent, recv_all(sock)


async def test_ten_megabyte_line_is_refused_without_buffering(sock: Path) -> None:
    size = 10 * 1024 * 1024
    async with running(sock):
        with anyio.fail_after(BOUND):
            sent, reply = await anyio.to_thread.run_sync(send_huge, sock, size)
        assert await call(sock, "ping")
    # The server stopped reading near the limit, so the kernel buffers filled and the peer closed.
    assert sent < size
    if reply:  # the reply can be lost to the reset; a closed connection is acceptable too
        assert "request too large" in error_of(reply)["message"]


async def test_slow_client_is_closed_while_others_are_served(sock: Path) -> None:
    async with running(sock, read_timeout_s=0.3):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
            slow.settimeout(BOUND)
            slow.connect(str(sock))
            slow.sendall(b'{"v": 1, "cmd": "pi')  # ... and stalls
            started = time.monotonic()
            assert await call(sock, "ping")  # served meanwhile
            with anyio.fail_after(BOUND):
                reply = await anyio.to_thread.run_sync(recv_all, slow)
            waited = time.monotonic() - started
    assert 0.1 < waited < BOUND
    assert b"pong" not in reply  # closed, at most with an error line


# --- socket file lifecycle -----------------------------------------------------------------------


async def test_stale_socket_file_is_replaced(sock: Path) -> None:
    sock.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock))
    dead.close()  # the file stays behind with nobody listening
    assert stat.S_ISSOCK(os.lstat(sock).st_mode)
    async with running(sock):
        assert await call(sock, "ping")


async def test_live_socket_is_refused_and_left_alone(sock: Path) -> None:
    async with running(sock):
        with anyio.fail_after(BOUND), pytest.raises(ControlError, match="already listening") as e:
            await ControlServer(sock, handle).serve()
        assert f"pid {os.getpid()}" in e.value.message
        assert await call(sock, "ping")  # the first daemon still owns its socket


async def test_non_socket_file_is_never_removed(tmp_path: Path, short_dir: Path) -> None:
    path = short_dir / "agentmaild.sock"
    path.write_text("precious")
    with anyio.fail_after(BOUND), pytest.raises(ControlError, match="not a socket"):
        await ControlServer(path, handle).serve()
    assert path.read_text() == "precious"


NOBODY = 65534


@pytest.fixture
def stranger_python() -> str:
    """A Python interpreter that uid 65534 can run (root's pyenv usually is not)."""
    assert os.geteuid() == 0, "connecting as another uid needs root (CI runs as root)"
    for python in ("/usr/bin/python3", sys.executable):
        try:
            subprocess.run([python, "-c", "pass"], user=NOBODY, check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        return python
    pytest.fail("no Python interpreter runnable as uid 65534 (install python3 system-wide)")


async def test_other_uid_is_rejected(short_dir: Path, stranger_python: str) -> None:
    path = short_dir / "agentmaild.sock"
    # The server may close before the stranger's write or read: either way it must learn nothing.
    script = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.settimeout(5)\n"
        "s.connect(sys.argv[1])\n"
        "try:\n"
        '    s.sendall(b\'{"v": 1, "cmd": "ping"}\\n\')\n'
        "    data = s.recv(4096)\n"
        "except (BrokenPipeError, ConnectionResetError):\n"
        "    data = b''\n"
        "sys.stdout.write(repr(data))\n"
    )
    os.chmod(short_dir, 0o755)
    with capture_logs() as logs:
        async with running(path):
            path.chmod(0o666)  # let the stranger reach the peer-credential check
            with anyio.fail_after(BOUND):
                done = await anyio.run_process(
                    [stranger_python, "-c", script, str(path)], user=NOBODY, check=False
                )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "b''"
    assert any(e["event"] == "control.rejected" and e.get("peer_uid") == NOBODY for e in logs)


# --- client -------------------------------------------------------------------------------------


def test_request_without_daemon_raises_daemon_not_running(sock: Path) -> None:
    with pytest.raises(DaemonNotRunning):
        client.request(sock, "ping")


def test_poke_without_daemon_is_false_and_does_not_hang(sock: Path) -> None:
    started = time.monotonic()
    assert client.poke(sock, ["alice"]) is False
    assert time.monotonic() - started < BOUND  # a missing socket fails at once; nothing retries


async def test_poke_wakes(sock: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def record(cmd: str, args: dict[str, Any]) -> dict[str, Any]:
        seen.append((cmd, args))
        return {}

    async with running(sock, record):
        assert await anyio.to_thread.run_sync(client.poke, sock, ["alice"]) is True
        assert await anyio.to_thread.run_sync(client.poke, sock) is True
    assert seen == [("wake", {"agents": ["alice"]}), ("wake", {})]


# --- socket paths -------------------------------------------------------------------------------


def test_short_store_path_puts_socket_beside_it(short_dir: Path) -> None:
    assert protocol.socket_path_for(short_dir / "mail.db") == short_dir / "agentmaild.sock"


def test_spellings_of_one_store_agree(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(short_dir)
    assert protocol.socket_path_for(Path("mail.db")) == protocol.socket_path_for(
        short_dir / "mail.db"
    )


def long_store(base: Path) -> Path:
    return base / ("d" * 60) / ("e" * 60) / "mail.db"


def test_long_store_path_falls_back_to_xdg_runtime_dir(
    tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_dir))
    path = protocol.socket_path_for(long_store(tmp_path))
    assert path.parent == short_dir
    assert path.name.startswith("agentmaild-")
    assert len(os.fsencode(path)) <= protocol.MAX_SOCKET_PATH_BYTES
    assert path != protocol.socket_path_for(long_store(tmp_path / "other"))


def test_the_control_socket_leaves_room_for_its_siblings(
    tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose socket would fit beside it only without ".wake"/".mcp" falls back: the
    daemon binds those suffixed siblings too (an MCP socket that did not fit stopped the daemon)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_dir))
    pad = protocol.MAX_SOCKET_PATH_BYTES - 2 - len(os.fsencode(tmp_path / protocol.SOCKET_NAME))
    store = tmp_path / ("p" * (pad - 1)) / "mail.db"  # its beside-socket: 2 bytes to spare
    beside = store.parent / protocol.SOCKET_NAME
    assert len(os.fsencode(beside)) == protocol.MAX_SOCKET_PATH_BYTES - 2
    path = protocol.socket_path_for(store)
    assert path.parent == short_dir
    for suffix in (".wake", ".mcp"):
        assert len(os.fsencode(f"{path}{suffix}")) <= protocol.MAX_SOCKET_PATH_BYTES


async def test_long_store_path_without_xdg_serves_from_private_tmp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    path = protocol.socket_path_for(long_store(tmp_path))
    assert path.parent == protocol.fallback_dir()
    async with running(path):
        assert await call(path, "ping")
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not await anyio.Path(path).exists()


def test_private_dir_is_created_tightened_and_owner_checked(short_dir: Path) -> None:
    private = short_dir / "sub"
    ensure_private_dir(private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    private.chmod(0o777)
    ensure_private_dir(private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    if os.geteuid() == 0:
        os.chown(private, 65534, 65534)
        with pytest.raises(ControlError, match="not a directory owned by"):
            ensure_private_dir(private)


# --- protocol -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (b"\xff\xfe\n", "not valid UTF-8"),
        (b"[1, 2]\n", "must be a JSON object, not an array"),
        (b'{"cmd": "ping"}\n', "missing protocol version"),
        (b'{"v": true, "cmd": "ping"}\n', "unsupported protocol version True"),
        (b'{"v": "1", "cmd": "ping"}\n', "unsupported protocol version '1'"),
        (b'{"v": 1}\n', "'cmd' must be a non-empty string"),
        (b'{"v": 1, "cmd": 3}\n', "'cmd' must be a non-empty string"),
        (b'{"v": 1, "cmd": "ping", "args": []}\n', "'args' must be an object, not an array"),
        (b'{"v": 1, "cmd": "ping", "id": 1}\n', "unknown request field"),
        (b'{"v": 1, "cmd": "ping", "args": {"x": NaN}}\n', "NaN is not valid JSON"),
        (b'{"v": 1, "cmd": "' + b"p" * protocol.MAX_REQUEST_BYTES + b'"}', "too large"),
    ],
)
def test_decode_request_rejects_with_a_clear_message(line: bytes, fragment: str) -> None:
    with pytest.raises(ProtocolError, match=fragment):
        protocol.decode_request(line)


def test_encode_request_refuses_oversize_and_unserializable() -> None:
    with pytest.raises(ProtocolError, match="too large"):
        protocol.encode_request("ping", {"x": "y" * protocol.MAX_REQUEST_BYTES})
    with pytest.raises(ProtocolError, match="not JSON-serializable"):
        protocol.encode_request("ping", {"x": {1, 2}})


def test_decode_response_maps_error_codes() -> None:
    with pytest.raises(ControlError) as caught:
        protocol.decode_response(protocol.encode_error("not_found", "no such agent"))
    assert (caught.value.code, caught.value.message) == ("not_found", "no such agent")
    with pytest.raises(ProtocolError, match="too large"):
        protocol.decode_response(protocol.encode_error("protocol", "request too large"))
    with pytest.raises(ProtocolError, match="'ok' must be true or false"):
        protocol.decode_response(b'{"v": 1, "ok": 1}')
    assert protocol.decode_response(protocol.encode_response({"a": [1]})) == {"a": [1]}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


# No deadline on the protocol fuzz: hypothesis' default 200 ms flakes on a loaded 2-core CI.
@settings(deadline=None)
@given(st.sampled_from(protocol.COMMANDS), st.dictionaries(st.text(), json_values, max_size=5))
def test_request_round_trips(cmd: str, args: dict[str, Any]) -> None:
    assert protocol.decode_request(protocol.encode_request(cmd, args)) == (cmd, args)


def check_decodes_or_protocol_error(line: bytes) -> None:
    try:
        request = protocol.decode_request(line)
    except ProtocolError:
        return
    assert isinstance(request.cmd, str)
    assert isinstance(request.args, dict)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=512))
def test_decode_request_fuzz_bytes(line: bytes) -> None:
    check_decodes_or_protocol_error(line)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["v", "cmd", "args", "x"]), json_values, max_size=4))
def test_decode_request_fuzz_objects(obj: dict[str, Any]) -> None:
    check_decodes_or_protocol_error(json.dumps(obj).encode())


def test_deep_nesting_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        protocol.decode_request(b"[" * 60000 + b"]" * 60000)
