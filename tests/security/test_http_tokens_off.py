"""``http.require_tokens = false`` on a real daemon: only the owner, on a loopback ``Host``, reaches
the HTTP face. A DNS-rebinding page (a foreign ``Host``) and another local user (a real process
running as ``nobody``) get 403 on ``/v1``, the dashboard and its files, and nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.daemon import DaemonProc
from tests.support.http_api import base_url, error_of, http_env

FOREIGN = Path(__file__).resolve().parent.parent / "support" / "foreign_http.py"
TOKENS_OFF = {"AGENTMAILD_HTTP_REQUIRE_TOKENS": "false"}
SEND = {"to": "bob", "subject": "forged", "body": "as lead", "from": "lead"}


def _seeded(daemons: Callable[..., DaemonProc]) -> DaemonProc:
    """A tokens-off daemon; bob (a pull agent) holds one message, "secret"."""
    d = daemons(http_env(TOKENS_OFF))
    for name in ("bob", "lead"):
        added = d.cli("agents", "add", name, "-c", "builder", "--channel", "pull")
        assert added.returncode == 0, added.stderr
    assert d.cli("send", "--from", "lead", "--to", "bob", "-s", "secret", "-b", "x").returncode == 0
    return d


def _subjects(d: DaemonProc) -> list[str]:
    listed = d.cli("--json", "list", "--to", "bob")
    assert listed.returncode == 0, listed.stderr
    return [m["subject"] for m in json.loads(listed.stdout)["messages"]]


def _as_nobody(url: str, method: str, path: str, body: object = None) -> tuple[int, str]:
    argv = [sys.executable, str(FOREIGN), url, method, path]
    if body is not None:
        argv.append(json.dumps(body))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    return int(answer["status"]), str(answer["body"])


def test_a_foreign_host_name_is_refused_on_every_route(daemons: Callable[..., DaemonProc]) -> None:
    d = _seeded(daemons)
    url = base_url(d)
    port = url.rpartition(":")[2]
    rebound = {"host": f"evil.example:{port}"}
    inbox = httpx.get(url + "/v1/inbox", params={"agent": "bob"}, headers=rebound)
    assert error_of(inbox) == (403, "forbidden") and "secret" not in inbox.text
    assert "loopback Host" in inbox.json()["error"]["message"]
    assert error_of(httpx.post(url + "/v1/messages", json=SEND, headers=rebound)) == (
        403, "forbidden")  # fmt: skip
    for path in ("/", "/events?topic=team", "/static/htmx.min.js", "/v1/openapi.json"):
        assert httpx.get(url + path, headers=rebound).status_code == 403, path
    assert httpx.get(url + "/v1/inbox", params={"agent": "bob"},
                     headers={"host": "127.0.0.1.evil.example"}).status_code == 403  # fmt: skip
    assert _subjects(d) == ["secret"]  # nothing was sent
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        own = httpx.get(url + "/v1/inbox", params={"agent": "bob"}, headers={"host": host})
        assert own.status_code == 200 and own.json()["messages"][0]["subject"] == "secret", host
    assert d.events("http.refused")


def test_another_local_user_is_refused_and_the_owner_is_served(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = _seeded(daemons)
    url = base_url(d)
    for method, path, body in (("GET", "/v1/inbox?agent=bob", None),
                               ("POST", "/v1/messages", SEND), ("GET", "/", None),
                               ("GET", "/mail?q=secret", None)):  # fmt: skip
        status, text = _as_nobody(url, method, path, body)
        assert status == 403, (method, path, text)
        assert "own user" in text and "secret" not in text, text
    assert _subjects(d) == ["secret"]
    sent = httpx.post(url + "/v1/messages", json={**SEND, "subject": "by the owner"})
    assert sent.status_code == 201, sent.text
    assert sorted(_subjects(d)) == ["by the owner", "secret"]
    refused = [e for e in d.events("http.refused") if "own user" in e["reason"]]
    assert len(refused) == 4
