"""Two trust domains, two stores, two real daemons on loopback: signed mail relayed from A to B.

A sends to ``peer:b/alice``; ``agentmaild relay`` signs each message with A's key and posts it
to B's ``/v1/relay``, which checks it against the key B pinned for A and delivers it from
``peer:a/bob``. Tampering, a wrong key, an old envelope and a replay are each refused. B's store
is a SQLite file or a PostgreSQL database (``store_target``) where the scenario names either.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.trust import envelope
from agentmaild.trust.receive import wire
from tests.support.daemon import FAST, base_env
from tests.support.http_api import base_url
from tests.support.net import daemon_answers, free_port
from tests.support.store_targets import StoreTarget, ok
from tests.support.trust_domains import Domains, two_domains
from tests.support.waiting import wait_for


@pytest.fixture
def domains(tmp_path: Path) -> Iterator[Domains]:
    with two_domains(tmp_path) as d:
        yield d


def test_relayed_mail_arrives_from_the_verified_peer_once(domains: Domains) -> None:
    ids = [domains.send_a(f"s{i}") for i in range(3)]
    done = domains.relay("--once", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["relayed"] == ids
    got = domains.b_mail()
    assert sorted(str(m["subject"]) for m in got) == ["s0", "s1", "s2"]
    assert {m["from"] for m in got} == {"peer:a/bob"}
    # B recorded where each came from: A's domain and key id, A's message id.
    store = SqliteMailStore(domains.b.db)
    origins = [store.peer_origin(str(m["id"])) for m in got]
    store.close()
    assert {(o.peer, o.key_id) for o in origins if o} == {("a", domains.a_key.key_id)}
    assert sorted(o.origin_id for o in origins if o) == sorted(ids)
    again = domains.relay("--once", "--json")  # nothing left to relay
    assert json.loads(again.stdout)["relayed"] == [] and len(domains.b_mail()) == 3


def test_the_verified_origin_and_the_payload_show_everywhere(domains: Domains) -> None:
    """The signed payload arrives with the message, and every reading path names the sender as
    ``peer:a/bob`` and shows the verified origin (peer domain, key id, A's message id): the CLI's
    read, inbox, list, thread and check in text and ``--json``, the HTTP API, and the CLI over
    the API printing exactly what it prints on the store file."""
    done = domains.a.cli("send", "--from", "bob", "--to", "peer:b/alice", "--subject", "pay",
                         "--body", "with payload", "--payload", '{"pr": 12}')  # fmt: skip
    assert done.returncode == 0, done.stderr
    a_id = done.stdout.strip()
    assert domains.relay("--once").returncode == 0
    [row] = domains.b_mail()
    mid = str(row["id"])
    origin = {"peer": "a", "key_id": domains.a_key.key_id, "origin_id": a_id}
    assert row["from"] == "peer:a/bob" and row["origin"] == origin
    b = domains.b
    local = b.cli("send", "--from", "carol", "--to", "alice", "--subject", "local")
    assert local.returncode == 0, local.stderr
    read = json.loads(b.cli("read", mid, "--json").stdout)["message"]
    assert read["payload"] == {"pr": 12} and read["origin"] == origin
    local_row = json.loads(b.cli("read", local.stdout.strip(), "--json").stdout)["message"]
    assert "origin" not in local_row  # only a verified envelope gives mail an origin
    shown_origin = f"verified: peer a, key {domains.a_key.key_id}, their id {a_id}"
    token = json.loads(b.cli("tokens", "create", "operator", "--json").stdout)["token"]
    url_env = {"AGENTMAIL_URL": domains.b_url, "AGENTMAIL_TOKEN": token,
               "AGENTMAIL_DB": "/nonexistent/mail.db"}  # fmt: skip
    for args in (("inbox", "--agent", "alice"), ("list", "--to", "alice"), ("read", mid),
                 ("thread", mid), ("inbox", "--agent", "alice", "--json"),
                 ("read", mid, "--json"), ("thread", mid, "--json"),
                 ("list", "--from", "peer:a/bob", "--json")):  # fmt: skip
        shown = b.cli(*args)
        assert shown.returncode == 0 and "peer:a/bob" in shown.stdout, (args, shown.stdout)
        if "--json" in args:
            rows = json.loads(shown.stdout)
            [peer_row] = [r for r in rows.get("messages", [rows.get("message")])
                          if r["from"] == "peer:a/bob"]  # fmt: skip
            assert peer_row["origin"] == origin, args
        else:
            [line] = [x for x in shown.stdout.splitlines() if shown_origin in x]
            assert line.startswith(("origin:   verified", "* ")), (args, shown.stdout)
        over_http = domains.b_over_http(*args, env=url_env)
        assert (over_http.returncode, over_http.stdout) == (0, shown.stdout), args
    with httpx.Client(base_url=domains.b_url, timeout=20,
                      headers={"authorization": f"Bearer {token}"}) as api:  # fmt: skip
        probe = api.get("/v1/inbox", params={"agent": "alice"}).json()["messages"]
        fetched = api.get(f"/v1/messages/{mid}").json()["message"]
        thread = api.get(f"/v1/threads/{mid}").json()["messages"]
        listed = api.get("/v1/messages", params={"to": "alice"}).json()["messages"]
        taken = api.post("/v1/inbox/take", json={"agent": "alice"}).json()["messages"]
    for rows in (probe, [fetched], thread, listed, taken):
        assert [r.get("origin") for r in rows if r["from"] == "peer:a/bob"] == [origin]
        assert [r for r in rows if r["from"] != "peer:a/bob" and "origin" in r] == []
    assert fetched["payload"] == {"pr": 12}
    checked = b.cli("check", "--agent", "alice", "--json")  # taken above: nothing left
    assert json.loads(checked.stdout)["messages"] == []


def test_check_shows_the_verified_origin_in_text_and_json(domains: Domains) -> None:
    a_id = domains.send_a("to check")
    assert domains.relay("--once").returncode == 0
    first = domains.b.cli("check", "--agent", "alice")
    assert first.returncode == 0, first.stderr
    key_id = domains.a_key.key_id
    assert f"origin:   verified: peer a, key {key_id}, their id {a_id}\n" in first.stdout
    domains.send_a("to check as json")
    assert domains.relay("--once").returncode == 0
    [taken] = json.loads(domains.b.cli("check", "--agent", "alice", "--json").stdout)["messages"]
    assert taken["origin"]["peer"] == "a" and taken["origin"]["key_id"] == key_id
    injected = domains.b.cli("check", "--agent", "alice", "--inject")
    assert injected.returncode == 0 and injected.stdout == ""


def _signed(d: Domains, **changes: object) -> dict[str, object]:
    env = envelope.seal(from_agent="bob", to_agent="peer:b/alice", subject="hi", body="hello",
                        payload=None, created_at=time.time(), domain="a",
                        message_id="msg-abc1234567")  # fmt: skip
    env = replace(env, **changes)  # type: ignore[arg-type]
    return wire(env, envelope.sign(d.a_key.key, env), d.a_key.key_id, "hello")


def test_tampered_wrong_key_old_and_replayed_envelopes_are_refused(domains: Domains) -> None:
    good = _signed(domains)
    tampered = {**good, "body": "hello!"}
    r = domains.post(tampered)
    assert r.status_code == 403 and "does not match its hash" in r.json()["error"]["message"]
    other = envelope.new_private_key()
    env = envelope.seal(from_agent="bob", to_agent="peer:b/alice", subject="hi", body="hello",
                        payload=None, created_at=time.time(), domain="a",
                        message_id="msg-abc1234568")  # fmt: skip
    wrong = wire(env, envelope.sign(other, env), domains.a_key.key_id, "hello")
    r = domains.post(wrong)
    assert r.status_code == 403 and "bad signature" in r.json()["error"]["message"]
    rekeyed = wire(env, envelope.sign(other, env), envelope.key_id(envelope.public_text(other)),
                   "hello")  # signed and named by a key B never pinned
    r = domains.post(rekeyed)
    assert r.status_code == 403 and f"the pinned key is {domains.a_key.key_id}" in r.json()[
        "error"]["message"]  # fmt: skip
    resubjected = {**good, "envelope": {**good["envelope"], "subject": "changed"}}  # type: ignore[dict-item]
    r = domains.post(resubjected)
    assert r.status_code == 403 and "bad signature" in r.json()["error"]["message"]
    ahead = _signed(domains, created_at=time.time() + 600)
    r = domains.post(ahead)
    assert r.status_code == 403 and "in the future" in r.json()["error"]["message"]
    old = _signed(domains, created_at=time.time() - 600)
    r = domains.post(old)
    assert r.status_code == 403 and "the window is 300s" in r.json()["error"]["message"]
    elsewhere = _signed(domains, to_agent="peer:c/alice")  # signed by A for a domain C
    r = domains.post(elsewhere)
    assert r.status_code == 403 and "addressed to domain 'c', this is 'b'" in r.json()["error"][
        "message"]  # fmt: skip
    stranger = _signed(domains, domain="zz")
    r = domains.post(stranger)
    assert r.status_code == 403 and "not a peer of this domain" in r.json()["error"]["message"]
    r = domains.post({"version": 3, "envelope": {"from_agent": "bob"}, "signature": "x"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid"
    v1 = {k: v for k, v in _signed(domains).items() if k != "version"}  # the v1 wire form
    r = domains.post(v1)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(
        "envelope version 1 is refused"
    )
    assert domains.b_mail() == []
    wait_for(lambda: len(domains.b.events("relay.refused")) >= 10, 10, "each refusal logged")
    refusals = domains.b.events("relay.refused")
    assert [e["code"] for e in refusals] == ["untrusted"] * 8 + ["invalid"] * 2
    assert "does not match its hash" in refusals[0]["reason"]
    first = domains.post(good)
    assert first.status_code == 200, first.text
    replay = domains.post(good)
    assert replay.status_code == 403 and "nonce already seen" in replay.json()["error"]["message"]
    # The nonce is in the store: a restarted daemon still refuses the replay.
    domains.b.stop()
    domains.b.start()
    domains.b_url = base_url(domains.b)
    again = domains.post(good)
    assert again.status_code == 403 and "nonce already seen" in again.json()["error"]["message"]
    assert [m["from"] for m in domains.b_mail()] == ["peer:a/bob"]


def test_a_killed_relay_restarted_delivers_everything_exactly_once(domains: Domains) -> None:
    ids = [domains.send_a(f"k{i}") for i in range(20)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentmaild", "relay", "--to", domains.b_url,
         "--db", str(domains.a.db)], env=domains.a.env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(lambda: len(domains.b_mail()) >= 1, 30, "the first relayed message")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert len(domains.b_mail()) >= 1
    # The worst moment to die: delivered by B, not yet marked by A. Make that true of every one.
    with sqlite3.connect(domains.a.db) as conn:
        conn.execute("DELETE FROM am_relayed")
    done = domains.relay("--once", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["relayed"]) == sorted(ids)
    got = domains.b_mail()
    assert sorted(str(m["subject"]) for m in got) == sorted(f"k{i}" for i in range(20))


def test_the_relay_loop_forwards_new_mail_and_stops_on_ctrl_c(domains: Domains) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentmaild", "relay", "--to", domains.b_url, "--interval", "0.2",
         "--db", str(domains.a.db)], env=domains.a.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for i in range(2):  # mail sent while the loop runs is forwarded by it
            domains.send_a(f"l{i}")
            wait_for(lambda i=i: len(domains.b_mail()) == i + 1, 30, f"relayed message {i}")
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    assert stdout.splitlines() == ["relayed 1", "relayed 1"]


def test_relay_finds_each_peer_by_its_pinned_url_and_can_take_one_peer(domains: Domains) -> None:
    a, b = domains.a, domains.b
    b_key = json.loads(b.cli("keys", "show", "--json").stdout)["public_key"]
    assert a.cli("peers", "add", "b", "--public-key", b_key, "--url", domains.b_url).returncode == 0
    to_b = domains.send_a("by url")
    done = a.cli("send", "--from", "bob", "--to", "peer:c/carol", "--subject", "nowhere")
    to_c = done.stdout.strip()
    only_b = a.cli("relay", "--once", "--peer", "b", "--json")  # no --to: the URL pinned for b
    assert only_b.returncode == 0, only_b.stderr
    assert json.loads(only_b.stdout) == {"ok": True, "relayed": [to_b], "failed": []}
    assert [m["subject"] for m in domains.b_mail()] == ["by url"]
    rest = a.cli("relay", "--once")
    assert (rest.returncode, rest.stdout) == (1, "relayed 0\n")
    assert rest.stderr == f"error: {to_c}: no URL for peer 'c' (peers add --url, or --to)\n"


def _healthy(c: httpx.Client) -> bool:
    try:
        return c.get("/v1/health").status_code == 200
    except httpx.TransportError:
        return False


def test_mail_relayed_into_a_store_target_is_verified_recorded_and_not_replayed(
    tmp_path: Path, store_target: StoreTarget
) -> None:
    """Domain A (SQLite) relays to B, a daemon on either store whose key file is named by
    ``$AGENTMAIL_KEY_FILE`` (a DSN has no directory to keep it beside): B pins A, verifies,
    records the origin and refuses the replay in its own tables."""
    (tmp_path / "a").mkdir()
    db_a = tmp_path / "a" / "mail.db"
    SqliteMailStore(db_a).close()
    env_a = base_env(tmp_path / "a", {"AGENTMAIL_DB": str(db_a)}, FAST)
    port = free_port()
    env_b = store_target.with_env(AGENTMAILD_HTTP_LISTEN=f"127.0.0.1:{port}",
                                  AGENTMAIL_KEY_FILE=str(tmp_path / "b.key"))
    ok(env_a, "agents", "add", "bob", "--capability", "builder", "--channel", "pull")
    ok(env_b, "agents", "add", "alice", "--capability", "builder", "--channel", "pull")
    a_key = ok(env_a, "keys", "create", "--domain", "a")
    assert ok(env_b, "keys", "create", "--domain", "b")["key_file"] == str(tmp_path / "b.key")
    ok(env_b, "peers", "add", "a", "--public-key", a_key["public_key"])
    token = ok(env_b, "tokens", "create", "alice")["token"]
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env_b,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: daemon.poll() is not None or daemon_answers(store_target.socket), 30,
                 "B's daemon")  # fmt: skip
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        with httpx.Client(base_url=url, timeout=20,
                          headers={"authorization": f"Bearer {token}"}) as c:  # fmt: skip
            wait_for(lambda: _healthy(c), 30, "B's HTTP API")
            sent = ok(env_a, "send", "--from", "bob", "--to", "peer:b/alice", "--subject",
                        "into postgres", "--body", "signed")  # fmt: skip
            [a_id] = sent["ids"]
            assert ok(env_a, "relay", "--to", url, "--once")["relayed"] == [a_id]
            [probe] = c.get("/v1/inbox").json()["messages"]
            assert probe["from"] == "peer:a/bob" and probe["subject"] == "into postgres"
            assert probe["origin"] == {"peer": "a", "key_id": a_key["key_id"], "origin_id": a_id}
            # A forgets it relayed (killed before marking): B returns the first delivery.
            with sqlite3.connect(db_a) as conn:
                conn.execute("DELETE FROM am_relayed")
            assert ok(env_a, "relay", "--to", url, "--once")["relayed"] == [a_id]
            assert len(c.get("/v1/inbox").json()["messages"]) == 1
            read = ok(env_b, "read", probe["id"])["message"]
            assert read["body"] == "signed" and read["origin"] == probe["origin"]
    finally:
        daemon.send_signal(2)
        daemon.wait(timeout=30)
        log.close()
