"""The HTTP API on a real daemon over loopback, with httpx: every endpoint, the CLI's rules,
errors as JSON, the OpenAPI document, and a send waking the delivery loop."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.http_api import Api, error_of, http_env, mint
from tests.support.waiting import wait_for


@pytest.fixture
def api(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> Iterator[Api]:
    """bob (lead) and alice (builder, pull) registered; an operator token."""
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    d = daemons(http_env())
    client = Api(d, mint(d, "operator"))
    yield client
    client.close()


def send(api: Api, **fields: object) -> dict[str, object]:
    body = {"to": "alice", "subject": "hello", "body": "the body", "from": "bob", **fields}
    r = api.post("/v1/messages", body)
    assert r.status_code == 201, r.text
    data: dict[str, object] = r.json()
    return data


def test_probe_fetch_ack_are_the_three_phases(api: Api, store: SqliteMailStore) -> None:
    mid = send(api)["ids"][0]  # type: ignore[index]
    probe = api.get("/v1/inbox", params={"agent": "alice", "unread": "1"}).json()
    [row] = probe["messages"]
    assert row["id"] == mid and row["from"] == "bob" and row["subject"] == "hello"
    assert row["body_length"] == len("the body") and "body" not in row
    assert {"type", "priority", "created_at"} <= set(row)
    fetched = api.get(f"/v1/messages/{mid}").json()["message"]
    assert fetched["body"] == "the body" and fetched["read"] is False
    assert store.get_message(mid).read is False  # type: ignore[union-attr]  # fetch changed nothing
    first = api.post("/v1/ack", {"ids": [mid]}).json()
    again = api.post("/v1/ack", {"ids": [mid]}).json()
    assert first == {"ok": True, "acked": [mid], "skipped": []}
    assert again == {"ok": True, "acked": [], "skipped": [mid]}  # idempotent
    assert store.get_message(mid).read is True  # type: ignore[union-attr]
    assert api.get("/v1/inbox", params={"agent": "alice", "unread": "1"}).json()["messages"] == []


def test_reply_thread_list_take_and_health(api: Api) -> None:
    mid = send(api, subject="question")["ids"][0]  # type: ignore[index]
    r = api.post(f"/v1/messages/{mid}/reply", {"body": "answer", "from": "alice"})
    assert r.status_code == 201, r.text
    [rid] = r.json()["ids"]
    thread = api.get(f"/v1/threads/{rid}").json()["messages"]
    assert [m["id"] for m in thread] == [mid, rid]
    assert thread[1]["subject"] == "Re: question" and thread[1]["to"] == "bob"
    listed = api.get("/v1/messages", params={"to": "bob"}).json()["messages"]
    assert [m["id"] for m in listed] == [rid]
    took = api.post("/v1/inbox/take", {"agent": "bob"}).json()
    assert [m["id"] for m in took["messages"]] == [rid] and took["messages"][0]["body"] == "answer"
    assert api.post("/v1/inbox/take", {"agent": "bob"}).json()["messages"] == []
    send(api, body="for the hook")
    injected = api.post("/v1/inbox/take", {"agent": "alice", "inject": True}).json()
    assert "for the hook" in injected["text"] and len(injected["acked"]) == 2
    health = api.as_(None).get("/v1/health")  # no token needed
    assert health.status_code == 200 and health.json()["ok"] is True


def test_send_follows_the_cli_rules_idempotency_and_errors(api: Api) -> None:
    first = send(api, idempotency_key="k1")
    again = api.post("/v1/messages", {"to": "alice", "subject": "hello", "body": "the body",
                                      "from": "bob", "idempotency_key": "k1"})  # fmt: skip
    assert again.status_code == 200
    assert again.json()["ids"] == first["ids"] and again.json()["duplicate"] is True
    other = api.post("/v1/messages", {"to": "alice", "subject": "changed", "from": "bob",
                                      "idempotency_key": "k1"})  # fmt: skip
    assert error_of(other) == (409, "conflict")
    unknown = api.post("/v1/messages", {"to": "nobody", "subject": "s", "from": "bob"})
    assert error_of(unknown) == (422, "recipient_refused")
    cli = api.d.cli("send", "--to", "nobody", "--subject", "s", "--from", "bob", "--json")
    assert json.loads(cli.stdout)["error"] == unknown.json()["error"]  # the same rule, same words
    big = api.post("/v1/messages", {"to": "alice", "subject": "s", "body": "x" * 70000})
    assert error_of(big) == (400, "invalid")
    assert "body: 70000 bytes" in big.json()["error"]["message"]
    bad_type = api.post("/v1/messages", {"to": "alice", "subject": "s", "type": "nonsense"})
    assert error_of(bad_type) == (400, "invalid")
    group = api.post("/v1/messages", {"to": "@builders", "subject": "all hands", "from": "bob"})
    assert group.status_code == 201 and group.json()["recipients"] == ["alice"]


JSON_TYPE = {"content-type": "application/json"}
BAD_REQUESTS: list[tuple[str, str, dict[str, object], tuple[int, str]]] = [
        ("GET", "/v1/nowhere", {}, (404, "not_found")),
        ("DELETE", "/v1/ack", {}, (405, "method_not_allowed")),
        ("GET", "/v1/messages/msg-a.b", {}, (400, "invalid")),
        ("GET", "/v1/messages/msg-..%2Fetc", {}, (404, "not_found")),
        ("GET", "/v1/threads/%2e%2e", {}, (400, "invalid")),
        ("GET", "/v1/messages/msg-doesnotexist", {}, (404, "not_found")),
        ("GET", "/v1/inbox?agent=../../etc/passwd", {}, (400, "invalid")),
        ("GET", "/v1/inbox?agent=ghost", {}, (404, "not_found")),
        ("GET", "/v1/inbox?agent=alice&unread=maybe", {}, (400, "invalid")),
        ("POST", "/v1/ack", {"content": b"{", "headers": JSON_TYPE},
         (400, "invalid")),
        ("POST", "/v1/ack", {"content": b"[1]", "headers": JSON_TYPE},
         (400, "invalid")),
        ("POST", "/v1/ack", {"content": b"\xff\xfe", "headers": JSON_TYPE},
         (400, "invalid")),
        ("POST", "/v1/ack", {"content": b"ids=1"}, (415, "unsupported_media_type")),
        ("POST", "/v1/ack", {"json": {"ids": ["msg-x"], "extra": 1}}, (400, "invalid")),
        ("POST", "/v1/ack", {"json": {"ids": "msg-x"}}, (400, "invalid")),
        ("POST", "/v1/messages", {"json": {"to": "alice"}}, (400, "invalid")),
        ("POST", "/v1/messages", {"json": {"to": 7, "subject": "s"}}, (400, "invalid")),
        ("POST", "/v1/messages", {"content": b"x" * 300_000,
                                  "headers": {"content-type": "application/json"}},
         (413, "payload_too_large")),
]  # fmt: skip


def test_bad_requests_are_one_json_error_each(api: Api, store: SqliteMailStore) -> None:
    mid = send(api)["ids"][0]  # type: ignore[index]
    for method, path, kwargs, expected in BAD_REQUESTS:
        r = api.client.request(method, path, **kwargs)  # type: ignore[arg-type]
        assert error_of(r) == expected, (method, path, r.text)
        assert api.get("/v1/health").status_code == 200  # the daemon is unaffected
    assert [m.id for m in store.inbox("alice")] == [mid]  # and the store too
    assert store.get_message(mid).read is False  # type: ignore[union-attr]
    host, port = api.url.removeprefix("http://").rsplit(":", 1)
    for garbage in (b"\x16\x03\x01\x00\xa5\x01\x00\x00\r\n\r\n",  # a TLS hello
                    b"GET /v1/health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"):  # fmt: skip
        with socket.create_connection((host, int(port)), timeout=15) as s:
            s.sendall(garbage)
            answer = b""
            while chunk := s.recv(65536):  # the server closes after its answer
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head, answer[:300]
        error = json.loads(body)["error"]
        assert error["code"] == "invalid" and error["message"].startswith("malformed HTTP")


def test_openapi_document_names_exactly_the_routes(api: Api) -> None:
    doc = api.get("/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    documented = {(path, m.upper()) for path, ops in doc["paths"].items() for m in ops}
    from starlette.routing import Route

    from agentmaild.http import hook_routes, mail_routes, meta_routes, relay_routes

    served = {
        (r.path, m)
        for r in [*mail_routes.routes(), *meta_routes.routes(), *hook_routes.routes(),
                  *relay_routes.routes()]
        if isinstance(r, Route)
        for m in (r.methods or ()) - {"HEAD"}
    }
    assert documented == served
    for path, ops in doc["paths"].items():  # every documented operation answers (not 404/405)
        for method in ops:
            url = path.replace("{id}", "msg-abc123").replace("{event}", "stop")
            r = api.client.request(method.upper(), url, json={})
            assert r.status_code not in (404, 405) or r.json()["error"]["code"] == "not_found"
            assert r.status_code != 405


def test_an_http_send_wakes_the_delivery_loop_at_once(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    rec = tmp_path / "w.jsonl"
    store.add_agent(Agent(name="worker", capability="builder", channel="spawn",
                          command=agent_cmd("record_agent.py", str(rec))))  # fmt: skip
    # A poll interval far beyond the wait: only the wake-up can deliver in time.
    d = daemons(http_env({"AGENTMAILD_DAEMON_POLL_INTERVAL_S": "600"}))
    wait_for(lambda: "worker" in {a["name"] for a in d.ctl("agents")["agents"]}, 20, "the loop")
    api = Api(d, mint(d, "bob"))
    r = api.post("/v1/messages", {"to": "worker", "subject": "wake", "body": "now"})
    assert r.status_code == 201, r.text
    [mid] = r.json()["ids"]
    wait_for(lambda: store.get_message(mid).read, 20, "delivery after the wake")  # type: ignore[union-attr]
    assert "now" in rec.read_text()
    api.close()
