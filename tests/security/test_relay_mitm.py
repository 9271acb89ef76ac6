"""A man in the middle of the relay (issue 33 item 4): the plain-HTTP path between two domains
runs through a real proxy that rewrites what A's real ``relay`` posts to B's real daemon.

Every field B stores or keys on is signed, the message id included: a changed id is refused and
nothing is stored; A's honest retry of a message B already took (its answer lost on the way) is
delivered once; an envelope of an older version is refused by name.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.trust import envelope
from tests.support.tamper_proxy import tamper_proxy
from tests.support.trust_domains import Domains, two_domains
from tests.support.waiting import wait_for

FORGED_ID = "msg-forged0000000001"


@pytest.fixture
def domains(tmp_path: Path) -> Iterator[Domains]:
    with two_domains(tmp_path) as d:
        yield d


def _forge_id(data: dict[str, Any]) -> dict[str, Any]:
    """What the attacker changes: the sender's message id, wherever the wire form carries it."""
    if "message_id" in data.get("envelope", {}):
        return {**data, "envelope": {**data["envelope"], "message_id": FORGED_ID}}
    return {**data, "message_id": FORGED_ID}  # version 2 sent it beside the envelope


def _origins(d: Domains) -> list[str]:
    store = SqliteMailStore(d.b.db)
    try:
        found = [store.peer_origin(str(m["id"])) for m in d.b_mail()]
    finally:
        store.close()
    return [o.origin_id for o in found if o is not None]


def test_a_changed_message_id_is_refused_and_nothing_is_stored(domains: Domains) -> None:
    a_id = domains.send_a("through the proxy")
    with tamper_proxy(domains.b_url) as proxy:
        proxy.rewrite = _forge_id
        done = domains.a.cli("relay", "--to", proxy.url, "--once", "--json")
    assert done.returncode == 1, done.stdout
    [(status, answer)] = proxy.answers
    assert status == 403 and "bad signature" in answer["error"]["message"], answer
    assert json.loads(done.stdout)["failed"][0]["id"] == a_id
    assert domains.b_mail() == [] and _origins(domains) == []
    wait_for(lambda: domains.b.events("relay.refused"), 10, "the refusal logged")
    # The honest path still delivers it, under A's own id.
    assert domains.relay("--once").returncode == 0
    assert [m["subject"] for m in domains.b_mail()] == ["through the proxy"]
    assert _origins(domains) == [a_id]


def test_an_honest_retry_after_a_lost_answer_is_delivered_once(domains: Domains) -> None:
    a_id = domains.send_a("once only")
    with tamper_proxy(domains.b_url) as proxy:
        proxy.lose_answer = True  # B takes it; A is told 502 and keeps it pending
        lost = domains.a.cli("relay", "--to", proxy.url, "--once", "--json")
        assert lost.returncode == 1 and [s for s, _ in proxy.answers] == [200]
        proxy.lose_answer = False
        retried = domains.a.cli("relay", "--to", proxy.url, "--once", "--json")
    assert retried.returncode == 0, retried.stdout
    assert json.loads(retried.stdout)["relayed"] == [a_id]
    first, again = (answer for _, answer in proxy.answers)
    assert (first["duplicate"], again["duplicate"]) == (False, True)
    assert again["ids"] == first["ids"]  # a fresh envelope (new nonce), the first delivery
    assert [m["subject"] for m in domains.b_mail()] == ["once only"]
    assert _origins(domains) == [a_id]


def test_a_version_2_envelope_is_refused_with_a_clear_message(domains: Domains) -> None:
    """Version 2's form (the id unsigned beside the envelope), validly signed the version 2 way."""
    env = envelope.seal(from_agent="bob", to_agent="peer:b/alice", subject="old", body="hello",
                        payload=None, created_at=time.time(), domain="a",
                        message_id="msg-abc1234567")  # fmt: skip
    v2_env = {k: v for k, v in env.to_dict().items() if k != "message_id"}
    canonical = json.dumps(v2_env, sort_keys=True, separators=(",", ":")).encode()
    sig = base64.b64encode(domains.a_key.key.sign(b"agentmaild/envelope/v2\x00" + canonical))
    old = {"version": 2, "envelope": v2_env, "signature": sig.decode(), "body": "hello",
           "key_id": domains.a_key.key_id, "message_id": "msg-abc1234567"}  # fmt: skip
    for data in (old, _forge_id(old)):
        r = domains.post(data)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"] == (
            "envelope version 2 is refused (it did not sign the message id): this domain takes "
            "version 3; upgrade agentmaild on the sending domain"
        )
    assert domains.b_mail() == []
