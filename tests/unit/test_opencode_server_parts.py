"""The opencode-server channel's parts without OpenCode: ``TurnWatch`` (which events end our turn
and how it failed), the stdlib HTTP/SSE client against a real loopback server (Content-Length,
chunked SSE split mid-line, a stream that ends), and the channel's one-line refusals (bad
settings, an attached server nobody listens on)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.channels.http_sse import Endpoint, HttpFailed, call, events
from agentmaild.channels.opencode_server import OpencodeServerChannel
from agentmaild.channels.opencode_turn import TurnWatch
from agentmaild.config import Config
from agentmaild.errors import AgentUnavailable
from agentmaild.models import Agent, Batch
from tests.support.net import free_port


def _ev(kind: str, session: str = "ses_a", **props: Any) -> dict[str, Any]:
    return {"type": kind, "properties": {"sessionID": session, **props}}


def test_turn_watch_ends_on_idle_after_busy_and_keeps_the_first_error() -> None:
    watch = TurnWatch("ses_a", max_retries=1)
    assert not watch.see(_ev("session.status", "ses_b", status={"type": "busy"}))
    watch.see(_ev("session.idle"))  # a stray idle of the turn before ours
    assert not watch.ended
    watch.see(_ev("session.status", status={"type": "busy"}))
    error = {"name": "APIError", "data": {"message": "bad", "statusCode": 400}}
    watch.see(_ev("session.error", error=error))
    watch.see(_ev("message.updated", info={"role": "assistant", "error": {"name": "Later"}}))
    watch.see(_ev("session.idle"))
    assert watch.ended and watch.error == "APIError: bad (HTTP 400)"
    assert watch.gave_up is None


def test_turn_watch_gives_up_past_max_retries() -> None:
    watch = TurnWatch("ses_a", max_retries=1)
    retry = {"type": "retry", "message": "stand-in error 500", "next": 0}
    watch.see(_ev("session.status", status={**retry, "attempt": 1}))
    assert watch.started and watch.gave_up is None
    watch.see(_ev("session.status", status={**retry, "attempt": 2}))
    assert watch.gave_up == "gave up after 1 API retries: stand-in error 500"
    assert not watch.ended


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        raw = json.dumps({"got": json.loads(body), "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        stream = b'data: {"type":"server.connected"}\n\ndata: {"type":"a",\ndata: "n":1}\n\n'
        for piece in (stream[:20], stream[20:47], stream[47:]):  # splits lines and events
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_client_posts_json_and_reads_a_chunked_event_stream(http_server: str) -> None:
    endpoint = Endpoint.parse(http_server)
    status, answer = await call(endpoint, "POST", "/x", {"k": "v"}, query={"directory": "/a b"})
    assert status == 200
    assert answer == {"got": {"k": "v"}, "path": "/x?directory=%2Fa%20b"}
    seen: list[dict[str, Any]] = []

    async def read_all() -> None:
        async with events(endpoint, "/event") as stream:
            async for event in stream:
                seen.append(event)  # noqa: PERF401 - kept as they come: the end raises

    with anyio.fail_after(10), pytest.raises(HttpFailed, match="ended"):
        await read_all()
    assert seen == [{"type": "server.connected"}, {"type": "a", "n": 1}]



def _agent(**settings: Any) -> Agent:
    return Agent(name="o", capability="builder", channel="stdin",
                 settings={"protocol": "opencode-server", **settings})  # fmt: skip


async def test_channel_refuses_bad_settings_and_an_unreachable_server(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    for settings, says in [
        ({"url": "ftp://x"}, "settings.url"),
        ({"url": "http://127.0.0.1:1", "max_retries": -1}, "settings.max_retries"),
        ({}, "needs settings.url or a command"),
    ]:
        with pytest.raises(AgentUnavailable, match=says):
            OpencodeServerChannel(_agent(**settings), Config(), db)
    channel = OpencodeServerChannel(_agent(url=f"http://127.0.0.1:{free_port()}"), Config(), db)
    batch = Batch(delivery_id="dlv-1", agent="o", messages=(), attempt=1, lease_until=0.0)
    async with channel:
        assert not await channel.is_busy()
        with anyio.fail_after(10), pytest.raises(AgentUnavailable, match="cannot be reached"):
            await channel.deliver(batch, "text")
