"""Fuzzing the HTTP API of a running daemon: random methods, paths, headers, tokens and bodies.

Every answer is JSON with a status from the API's own list (never 500); an error answer is
``{"ok": false, "error": {"code", "message"}}`` and leaves every row of the store as it was; a send
that succeeds stored exactly the ids it reports. Afterwards the daemon still answers, stops
cleanly, and the store passes ``integrity_check`` and the orphan check.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentmaild.mail import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.tokens import SCOPES, mint
from tests.reliability.conftest import DaemonProc, assert_sound
from tests.reliability.test_fuzz import FUZZ, JSONISH, NASTY_TEXT, snapshot
from tests.support.http_api import base_url, http_env

STATUSES = {200, 201, 400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429}
PATHS = ["/v1/inbox", "/v1/inbox/take", "/v1/messages", "/v1/ack", "/v1/health",
         "/v1/openapi.json", "/v1/messages/{id}", "/v1/messages/{id}/reply", "/v1/threads/{id}",
         "/v1/hooks/{id}", "/", "/v2/inbox", "/v1/../etc/passwd"]  # fmt: skip
ROUTES = [("GET", "/v1/inbox"), ("POST", "/v1/inbox/take"), ("GET", "/v1/messages"),
          ("POST", "/v1/messages"), ("POST", "/v1/ack"), ("GET", "/v1/messages/{id}"),
          ("POST", "/v1/messages/{id}/reply"), ("GET", "/v1/threads/{id}"),
          ("POST", "/v1/hooks/{id}"), ("GET", "/v1/health")]  # fmt: skip
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
# Mostly a real route with a real method (the handlers are what is fuzzed), sometimes anything.
TARGETS = st.one_of(
    st.sampled_from(ROUTES), st.sampled_from(ROUTES), st.sampled_from(ROUTES),
    st.tuples(st.sampled_from(METHODS), st.sampled_from(PATHS)),
)
SEND_KEYS = ["to", "subject", "body", "type", "priority", "thread_id", "payload", "payload_json",
             "idempotency_key", "from", "ids", "agent", "inject", "input", "quiet"]  # fmt: skip


def _store(db: Path) -> dict[str, str]:
    """Pull agents only (no loop writes behind the fuzz's back), mail in several states, and
    three tokens: {"sink": …, "operator": …, "reader": …}."""
    store = SqliteMailStore(db)
    tokens = {}
    try:
        for name, cap in (("bob", "lead"), ("sink", "builder"), ("other", "builder")):
            store.add_agent(Agent(name=name, capability=cap))
        mailer = Mailer(store)
        mailer.send(sender="bob", to="sink", subject="dead", body="d", idempotency_key="k1")
        dead = store.claim("sink", max_messages=5, max_chars=10_000, lease_s=60, now=time.time())
        assert dead is not None
        store.release(dead.delivery_id, error="boom", max_attempts=1, now=time.time())
        mailer.send(sender="bob", to="sink", subject="unread", body="u", priority="urgent")
        mailer.send(sender="bob", to="other", subject="not yours", body="o")
        for label, agent, scopes in (("sink", "sink", SCOPES), ("operator", "operator", SCOPES),
                                     ("reader", "sink", ("read",))):  # fmt: skip
            secret, record = mint(agent, scopes, now=time.time(), expires_in_s=None)
            store.add_token(record)
            tokens[label] = secret
    finally:
        store.close()
    return tokens


def _ids(db: Path) -> list[str]:
    return [r[0] for r in snapshot(db)["messages"]]


SEGMENT = NASTY_TEXT.map(lambda t: quote(t[:60], safe=""))
PLAUSIBLE = st.fixed_dictionaries(
    {"to": st.sampled_from(["bob", "sink", "other", "@all", "@builders", "operator", "ghost"]),
     "subject": NASTY_TEXT},
    optional={"body": NASTY_TEXT, "priority": st.sampled_from(["high", "urgent", "x"]),
              "idempotency_key": st.sampled_from(["k1", "k2", ""]), "from": NASTY_TEXT,
              "type": st.sampled_from(["status", "worker_done", "question"]), "payload": JSONISH,
              "ids": st.lists(st.sampled_from(["msg-x", "../x"]), max_size=2),
              "agent": st.sampled_from(["sink", "other", "../x"]), "inject": st.booleans()},
)  # fmt: skip
BODIES = st.one_of(
    PLAUSIBLE.map(lambda d: json.dumps(d).encode()),
    PLAUSIBLE.map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=200),
    JSONISH.map(lambda j: json.dumps(j).encode()),
    st.dictionaries(st.sampled_from(SEND_KEYS), JSONISH | NASTY_TEXT, max_size=6).map(
        lambda d: json.dumps(d).encode()
    ),
)
CONTENT_TYPES = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/plain", "", "APPLICATION/JSON",
     "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"]
)  # fmt: skip


def test_http_api_survives_garbage(db: Path, daemons: Callable[..., DaemonProc]) -> None:
    tokens = _store(db)
    d = daemons(http_env({"AGENTMAILD_HTTP_MAX_BODY_BYTES": "4096"}))
    client = httpx.Client(base_url=base_url(d), timeout=30)
    seen: dict[int, int] = {}
    ids = _ids(db)
    auth = st.sampled_from([*tokens, *tokens, "operator", "sink", None, "garbage", "basic"])
    json_type = st.sampled_from(["application/json"]) | CONTENT_TYPES

    @settings(FUZZ, max_examples=300)
    @given(target=TARGETS, seg=SEGMENT,
           real_id=st.sampled_from(ids), use_real=st.booleans(),
           query=st.dictionaries(st.sampled_from(["agent", "unread", "from", "to", "limit",
                                                  "type", "x"]) | NASTY_TEXT,
                                 NASTY_TEXT, max_size=3),
           who=auth, ctype=json_type, body=BODIES)  # fmt: skip
    @example(target=("POST", "/v1/messages"), seg="", real_id=ids[0], use_real=False, query={},
             who="sink", ctype="application/json",
             body=b'{"to": "bob", "subject": "hi", "body": "x"}')  # fmt: skip
    @example(target=("POST", "/v1/ack"), seg="", real_id=ids[0], use_real=False, query={},
             who="sink", ctype="application/json", body=json.dumps({"ids": ids}).encode())
    @example(target=("POST", "/v1/messages"), seg="", real_id=ids[0], use_real=False, query={},
             who="operator", ctype="application/json", body=b"{" * 10_000)  # fmt: skip
    @example(target=("POST", "/v1/hooks/{id}"), seg="stop", real_id=ids[0], use_real=False,
             query={}, who="operator", ctype="application/json",
             body=b'{"agent": "sink", "input": "{\\"stop_hook_active\\": true}"}')  # fmt: skip
    def one(target: tuple[str, str], seg: str, real_id: str, use_real: bool,
            query: dict[str, str], who: str | None, ctype: str, body: bytes) -> None:  # fmt: skip
        method, path = target
        url = path.replace("{id}", real_id if use_real else seg)
        headers = {"content-type": ctype} if ctype else {}
        if who in tokens:
            headers["authorization"] = f"Bearer {tokens[who]}"
        elif who == "garbage":
            headers["authorization"] = "Bearer amt_nope"
        elif who == "basic":
            headers["authorization"] = "Basic Ym9iOnB3"
        before = snapshot(db)
        r = client.request(method, url, params=query, headers=headers, content=body)
        seen[r.status_code] = seen.get(r.status_code, 0) + 1
        assert r.status_code in STATUSES, (method, url, r.status_code, r.text[:300])
        if method == "HEAD":
            return
        data: Any = r.json()
        if r.status_code >= 400:
            assert data["ok"] is False and data["error"]["code"] and data["error"]["message"]
            assert data["error"]["code"] != "internal"
            assert snapshot(db) == before, ("a refused request changed the store", data)
        elif method == "POST" and url == "/v1/messages":
            added = set(_ids(db)) - {row[0] for row in before["messages"]}
            assert added == set(data["ids"]) or data["duplicate"], data
        assert d.alive(), d.tail()

    try:
        one()
    finally:
        print(f"HTTP fuzz: answers by status {dict(sorted(seen.items()))}")
        client.close()
    assert {200, 201, 400, 401, 403, 404} <= set(seen), seen  # the handlers were reached
    assert httpx.get(base_url(d) + "/v1/health", timeout=10).status_code == 200
    assert d.stop() == 0
    assert_sound(db)
