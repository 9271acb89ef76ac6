"""Tokens on a real daemon: 401 without a valid one, 403 beyond its agent or scope, refusals
logged without the token, the loopback rule at start, and slow clients refused with 408."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc, agent_cmd, base_env
from tests.support.http_api import Api, base_url, error_of, http_env, mint
from tests.support.waiting import wait_for


def _setup(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], timeout_s: str = "10"
) -> DaemonProc:
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    return daemons(http_env({"AGENTMAILD_HTTP_REQUEST_TIMEOUT_S": timeout_s}))


def test_tokens_act_as_their_agent_within_their_scopes(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = _setup(store, daemons)
    bob = Api(d, mint(d, "bob"))
    alice_read = Api(d, mint(d, "alice", "--scope", "read"))
    op = Api(d, mint(d, "operator"))
    r = bob.post("/v1/messages", {"to": "alice", "subject": "s", "body": "b"})
    assert r.status_code == 201
    [mid] = r.json()["ids"]
    assert store.get_message(mid).from_agent == "bob"  # type: ignore[union-attr]  # set by the server
    assert alice_read.get("/v1/inbox", params={"agent": "alice"}).status_code == 200
    assert alice_read.get("/v1/inbox").json()["agent"] == "alice"  # the token's agent by default
    assert alice_read.get(f"/v1/messages/{mid}").json()["message"]["body"] == "b"
    refusals = [
        (alice_read.get("/v1/inbox", params={"agent": "bob"}), (403, "forbidden")),
        (alice_read.post("/v1/ack", {"ids": [mid]}), (403, "forbidden")),  # no ack scope
        (alice_read.post("/v1/messages", {"to": "bob", "subject": "s"}), (403, "forbidden")),
        (bob.post("/v1/messages", {"to": "alice", "subject": "s", "from": "alice"}),
         (403, "forbidden")),
        (bob.post("/v1/messages", {"to": "@all", "subject": "s"}), (403, "forbidden")),
        (bob.post("/v1/ack", {"ids": [mid]}), (403, "forbidden")),  # not addressed to bob
        (bob.post("/v1/inbox/take", {"agent": "alice"}), (403, "forbidden")),
        (bob.get("/v1/messages", params={"to": "alice"}), (403, "forbidden")),
    ]  # fmt: skip
    for response, expected in refusals:
        assert error_of(response) == expected, response.text
    outsider = Api(d, mint(d, "carol"))
    assert error_of(outsider.get(f"/v1/messages/{mid}")) == (404, "not_found")
    assert error_of(outsider.get(f"/v1/threads/{mid}")) == (404, "not_found")
    assert store.get_message(mid).read is False  # type: ignore[union-attr]  # nothing refused acked
    assert op.post("/v1/messages", {"to": "@all", "subject": "all"}).status_code == 201
    for client in (bob, alice_read, op, outsider):
        client.close()


SCOPE_SETS = (("read",), ("send",), ("ack",), ("read", "ack"), ("read", "send", "ack"))


def _scoped_requests(mid: str) -> list[tuple[str, str, dict[str, object] | None, set[str]]]:
    """Every route that needs a token: (method, path, body, the scopes it needs)."""
    return [
        ("GET", "/v1/inbox", None, {"read"}),
        ("GET", "/v1/messages?to=alice", None, {"read"}),
        ("GET", f"/v1/messages/{mid}", None, {"read"}),
        ("GET", f"/v1/threads/{mid}", None, {"read"}),
        ("POST", "/v1/messages", {"to": "bob", "subject": "scoped"}, {"send"}),
        ("POST", f"/v1/messages/{mid}/reply", {"body": "scoped reply"}, {"send"}),
        ("POST", "/v1/ack", {"ids": [mid]}, {"ack"}),
        ("POST", "/v1/inbox/take", {}, {"read", "ack"}),
        ("POST", "/v1/hooks/session-start", {"input": "{}"}, {"read", "ack"}),
    ]


def test_each_scope_is_enforced_on_every_route(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    """read, send and ack each open exactly the routes that need them; every other route answers
    403 naming a missing scope and changes nothing; each refusal is logged by the token's id,
    never the token."""
    d = _setup(store, daemons)
    bob = Api(d, mint(d, "bob"))
    [mid] = bob.post("/v1/messages", {"to": "alice", "subject": "s", "body": "b"}).json()["ids"]
    bob.close()
    refused = 0
    secrets = []
    for scopes in SCOPE_SETS:
        secret = mint(d, "alice", *(arg for s in scopes for arg in ("--scope", s)))
        secrets.append(secret)
        alice = Api(d, secret)
        for method, path, body, needs in _scoped_requests(mid):
            before = (len(store.list_messages(from_agent="alice")), store.get_message(mid))
            r = alice.client.request(method, path, json=body)
            if needs <= set(scopes):
                assert r.status_code in (200, 201), (scopes, method, path, r.text)
                continue
            refused += 1
            assert error_of(r) == (403, "forbidden"), (scopes, method, path, r.text)
            assert "scope" in r.json()["error"]["message"], r.text
            after = (len(store.list_messages(from_agent="alice")), store.get_message(mid))
            assert after == before, (scopes, method, path)  # a refusal changes nothing
        alice.close()
    assert store.get_message(mid).read is True  # type: ignore[union-attr]  # the ack scope did
    assert {m.subject for m in store.list_messages(from_agent="alice")} == {"scoped", "Re: s"}
    wait_for(lambda: len(d.events("http.refused")) >= refused, 10, "every refusal logged")
    events = d.events("http.refused")
    assert len(events) == refused and {e["status"] for e in events} == {403}
    assert all(e["token_id"].startswith("tok-") for e in events)
    log = d.log.read_text()
    assert not [s for s in secrets if s in log]


def test_missing_unknown_expired_and_revoked_tokens_are_401_and_logged_without_the_token(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = _setup(store, daemons)
    brief = mint(d, "bob", "--expires", "1s")
    revoked = mint(d, "bob")
    listed = json.loads(d.cli("tokens", "list", "--json").stdout)["tokens"]
    [revoked_id] = [t["id"] for t in listed if t["expires_at"] is None]
    assert d.cli("tokens", "revoke", revoked_id).returncode == 0
    anonymous = Api(d)
    no_token = anonymous.get("/v1/inbox", params={"agent": "bob"})
    assert error_of(no_token) == (401, "unauthorized")
    assert no_token.headers["www-authenticate"] == "Bearer"
    junk = anonymous.get("/v1/inbox", headers={"authorization": "Basic Ym9iOnB3"})
    assert error_of(junk) == (401, "unauthorized")
    assert error_of(Api(d, "amt_" + "x" * 43).get("/v1/inbox")) == (401, "unauthorized")
    gone = Api(d, revoked).get("/v1/inbox")
    assert error_of(gone) == (401, "unauthorized") and "revoked" in gone.json()["error"]["message"]
    time.sleep(1.1)  # the token's own lifetime: a clock must pass, no event marks it
    old = Api(d, brief).get("/v1/inbox")
    assert error_of(old) == (401, "unauthorized") and "expired" in old.json()["error"]["message"]
    wait_for(lambda: len(d.events("http.refused")) >= 5, 10, "five refusals logged")
    log = d.log.read_text()
    assert brief not in log and revoked not in log and "x" * 43 not in log
    assert revoked_id in log  # the token is named by its id
    states = {t["id"]: t["state"] for t in json.loads(d.cli("tokens", "list", "--json").stdout)[
        "tokens"]}  # fmt: skip
    assert states[revoked_id] == "revoked" and "expired" in states.values()
    human = d.cli("tokens", "list")
    assert brief not in human.stdout and revoked_id in human.stdout


def test_without_tokens_only_loopback_is_served(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], db: Path, tmp_path: Path
) -> None:
    env = base_env(tmp_path, {"AGENTMAILD_HTTP_REQUIRE_TOKENS": "false"})
    refused = subprocess.run(
        [sys.executable, "-m", "agentmaild", "serve", "--db", str(db), "--http", "0.0.0.0:0"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "not a loopback address" in refused.stderr and "Traceback" not in refused.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [sys.executable, "-m", "agentmaild", "serve", "--db", str(db),
             "--http", f"127.0.0.1:{port}"],
            env=base_env(tmp_path), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert busy.returncode == 1 and "Traceback" not in busy.stderr
    assert f"error: http.listen: cannot bind 127.0.0.1:{port}" in busy.stderr
    d = daemons(http_env({"AGENTMAILD_HTTP_REQUIRE_TOKENS": "false"}))
    r = Api(d).post("/v1/messages", {"to": "bob", "subject": "from the operator"})
    assert r.status_code == 201 and r.json()["recipients"] == ["bob"]
    assert store.inbox("bob")[0].from_agent == "operator"


def _raw(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=15)
    return s


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_slow_clients_get_408_and_others_are_served_meanwhile(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    """Two connections that never finish their request: other clients are served while they
    hang, a delivery loop goes on delivering, and each gets one JSON 408."""
    rec = tmp_path / "worker.jsonl"
    store.add_agent(Agent(name="worker", capability="builder", channel="spawn",
                          command=agent_cmd("record_agent.py", str(rec))))  # fmt: skip
    d = _setup(store, daemons, timeout_s="1")
    wait_for(lambda: "worker" in {a["name"] for a in d.ctl("agents")["agents"]}, 20, "the loop")
    url = base_url(d)
    token = mint(d, "operator")
    api = Api(d, token)
    headers_never_end = _raw(url)
    headers_never_end.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
    body_never_ends = _raw(url)
    body_never_ends.sendall(
        b"POST /v1/ack HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        + f"authorization: Bearer {token}\r\n".encode()
        + b"content-length: 100\r\n\r\n{\"ids\": ["
    )
    assert api.get("/v1/health").status_code == 200  # served while both wait
    assert api.post("/v1/messages", {"to": "alice", "subject": "s"}).status_code == 201
    sent = api.post("/v1/messages", {"to": "worker", "subject": "meanwhile", "body": "go on"})
    [mid] = sent.json()["ids"]
    wait_for(lambda: store.get_message(mid).read, 20, "the delivery")  # type: ignore[union-attr]
    assert "go on" in rec.read_text()
    for s in (headers_never_end, body_never_ends):
        answer = _read_all(s)  # the server closes after its answer
        s.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer[:200]
        assert json.loads(body)["error"]["code"] == "request_timeout"
    api.close()  # its keep-alive connection idled past request_timeout_s: the server closed it
    fresh = Api(d, token)
    assert fresh.get("/v1/health").status_code == 200
    assert d.alive()
    fresh.close()


def _closed_while_trickling(s: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """Send one body byte every 0.2 s until the server closes the connection (or ``limit_s``
    passes): everything it answered, and how long the trickle lasted."""
    start = time.monotonic()
    answer = b""
    s.settimeout(0.2)
    while time.monotonic() - start < limit_s:
        try:
            s.sendall(b"x")
            chunk = s.recv(65536)
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        answer += chunk
    return answer, time.monotonic() - start


def test_a_body_trickling_after_the_answer_is_cut_off_at_the_time_limit(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    """Answered without its body being read (a refusal, a GET) while the client keeps sending the
    body a byte at a time: the connection is closed at ``http.request_timeout_s``, not kept open
    for as long as the bytes keep coming; other clients and the delivery loops go on meanwhile."""
    d = _setup(store, daemons, timeout_s="1")
    url = base_url(d)
    token = mint(d, "operator")
    # A fresh client per call: the server closes a keep-alive connection idle for
    # request_timeout_s (1 s here), so a pooled one could be closed just as it is reused.
    api = lambda: Api(d, token)  # noqa: E731
    heads = [
        b"POST /v1/ack HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 1000000\r\n\r\n{",  # no token: 401 before the body is read
        b"GET /v1/health HTTP/1.1\r\nHost: x\r\ncontent-length: 1000000\r\n\r\n",
    ]
    for i, head in enumerate(heads):
        s = _raw(url)
        s.sendall(head)
        sent = api().post("/v1/messages", {"to": "alice", "subject": f"meanwhile {i}"})
        assert sent.status_code == 201, sent.text
        answer, lasted = _closed_while_trickling(s, limit_s=20)
        s.close()
        assert answer.startswith((b"HTTP/1.1 401", b"HTTP/1.1 200")), answer[:200]
        assert lasted < 20, f"still open after {lasted:.0f}s of trickling: {head[:30]!r}"
    assert api().get("/v1/health").status_code == 200 and d.alive()
    assert sorted(m.subject for m in store.inbox("alice")) == ["meanwhile 0", "meanwhile 1"]
