"""Fuzzing the HTTP API of a running daemon: random methods, paths, headers, tokens and bodies.

Every answer is JSON with a status from the API's own list (never 500); an error answer is
``{"ok": false, "error": {"code", "message"}}`` and leaves every row of the store as it was; a send
that succeeds stored exactly the ids it reports. ``POST /v1/relay`` gets envelopes signed with the
key of the pinned peer ``a`` (fuzzed fields, then sometimes tampered) besides garbage: a refused
one may leave only its claimed nonce behind (claimed before delivery: fail closed). Afterwards
the daemon still answers, stops cleanly, and the store passes ``integrity_check`` and the orphan
check.
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

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.trust import envelope, keyfile
from agentmaild.trust.peers import Peer
from agentmaild.trust.receive import wire
from agentmaild.trust.tokens import SCOPES, mint
from tests.reliability.conftest import DaemonProc, assert_sound
from tests.reliability.test_fuzz import FUZZ, JSONISH, NASTY_TEXT, snapshot
from tests.support.http_api import base_url, http_env

STATUSES = {200, 201, 400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429}
PATHS = ["/v1/inbox", "/v1/inbox/take", "/v1/messages", "/v1/ack", "/v1/health",
         "/v1/openapi.json", "/v1/messages/{id}", "/v1/messages/{id}/reply", "/v1/threads/{id}",
         "/v1/hooks/{id}", "/v1/relay", "/", "/v2/inbox", "/v1/../etc/passwd"]  # fmt: skip
ROUTES = [("GET", "/v1/inbox"), ("POST", "/v1/inbox/take"), ("GET", "/v1/messages"),
          ("POST", "/v1/messages"), ("POST", "/v1/ack"), ("GET", "/v1/messages/{id}"),
          ("POST", "/v1/messages/{id}/reply"), ("GET", "/v1/threads/{id}"),
          ("POST", "/v1/hooks/{id}"), ("GET", "/v1/health"), ("POST", "/v1/relay"),
          ("POST", "/v1/relay")]  # fmt: skip
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
# Mostly a real route with a real method (the handlers are what is fuzzed), sometimes anything.
TARGETS = st.one_of(
    st.sampled_from(ROUTES), st.sampled_from(ROUTES), st.sampled_from(ROUTES),
    st.just(("POST", "/v1/relay")),
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
        keyfile.create(str(db.parent / keyfile.FILE_NAME), "here")  # the envelopes' "to"
        public = envelope.public_text(PEER_KEY)
        store.add_peer(Peer(name="a", public_key=public, key_id=envelope.key_id(public), url=None,
                            created_at=time.time()))  # fmt: skip
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
PEER_KEY = envelope.new_private_key()
PEER_KEY_ID = envelope.key_id(envelope.public_text(PEER_KEY))
TAMPER = st.sampled_from([None, None, None, "body", "surrogate", "v1", "version", "drop", "extra",
                          "key_id", "subject", "stale", "message_id"])  # fmt: skip


def _signed_relay(body: str = "b") -> bytes:
    """One envelope from the peer ``a`` to ``sink`` for the body "b", signed now, sent with
    ``body``."""
    env = envelope.seal(from_agent="bob", to_agent="peer:here/sink", subject="relayed", body="b",
                        payload='{"pr": 1}', created_at=time.time(), domain="a",
                        message_id="msg-abc1234567")  # fmt: skip
    data = wire(env, envelope.sign(PEER_KEY, env), PEER_KEY_ID, body)
    return json.dumps(data).encode()


@st.composite
def _relayed(draw: st.DrawFn) -> bytes:
    """A ``POST /v1/relay`` body signed by the peer ``a``, its fields fuzzed, maybe tampered."""
    body = draw(NASTY_TEXT)
    payload = draw(st.none() | JSONISH.map(json.dumps) | NASTY_TEXT)
    fresh = f"msg-{draw(st.integers(10**11, 10**12 - 1))}"  # the relay's idempotency key
    env = envelope.seal(
        from_agent=draw(st.sampled_from(["bob", "x" * 65]) | NASTY_TEXT),
        to_agent=draw(st.sampled_from(["peer:here/sink", "peer:here/sink", "peer:here/other",
                                       "peer:here/ghost", "peer:x/sink", "peer:here/@all", "sink"])
                      | NASTY_TEXT),
        subject=draw(NASTY_TEXT), body=body, payload=payload, created_at=time.time(),
        domain=draw(st.sampled_from(["a", "a", "a", "zz", ""])),
        message_id=draw(st.sampled_from([fresh, fresh, "msg-abc1234567", "../x", ""])),
    )  # fmt: skip
    data: dict[str, Any] = wire(env, envelope.sign(PEER_KEY, env), PEER_KEY_ID, body)
    tamper = draw(TAMPER)
    if tamper in ("body", "key_id", "version"):
        data[tamper] = draw(JSONISH)
    elif tamper == "message_id":
        data["envelope"]["message_id"] = draw(JSONISH)
    elif tamper == "surrogate":
        data["body"] = "\ud800"  # JSON's escape decodes to a lone surrogate
    elif tamper == "v1":
        del data["version"]
    elif tamper == "drop":
        del data[draw(st.sampled_from(sorted(data)))]
    elif tamper == "extra":
        data["envelope"]["extra"] = 1
    elif tamper == "subject":
        data["envelope"]["subject"] = draw(JSONISH)
    elif tamper == "stale":
        data["envelope"]["created_at"] = time.time() - 3600
    return json.dumps(data).encode()


BODIES = st.one_of(
    _relayed(),
    _relayed(),
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
    relayed: dict[str, int] = {}  # successful sends and relays
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
    @example(target=("POST", "/v1/relay"), seg="", real_id=ids[0], use_real=False, query={},
             who=None, ctype="application/json", body=_signed_relay())  # fmt: skip
    @example(target=("POST", "/v1/relay"), seg="", real_id=ids[0], use_real=False, query={},
             who=None, ctype="application/json", body=_signed_relay("\ud800"))  # fmt: skip
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
        if method == "HEAD" or not r.headers.get("content-type", "").startswith(
            "application/json"
        ):
            assert method == "HEAD" or not url.startswith("/v1/"), (url, r.text[:300])
            return  # the dashboard's pages at / are HTML
        data: Any = r.json()
        if r.status_code >= 400:
            assert data["ok"] is False and data["error"]["code"] and data["error"]["message"]
            assert data["error"]["code"] != "internal"
            after = snapshot(db)
            if url == "/v1/relay":  # a nonce claimed before the delivery failed stays claimed
                before.pop("am_nonces"), after.pop("am_nonces")
            assert after == before, ("a refused request changed the store", data)
        elif method == "POST" and url in ("/v1/messages", "/v1/relay"):
            added = set(_ids(db)) - {row[0] for row in before["messages"]}
            assert added == set(data["ids"]) or data["duplicate"], data
            relayed[url] = relayed.get(url, 0) + 1
        assert d.alive(), d.tail()

    try:
        one()
    finally:
        print(f"HTTP fuzz: answers by status {dict(sorted(seen.items()))}")
        client.close()
    assert {200, 201, 400, 401, 403, 404} <= set(seen), seen  # the handlers were reached
    assert relayed.get("/v1/relay"), relayed  # a signed envelope got through
    assert httpx.get(base_url(d) + "/v1/health", timeout=10).status_code == 200
    assert d.stop() == 0
    assert_sound(db)
