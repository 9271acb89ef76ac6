"""The dashboard's tokens on a real daemon: each write checks its scope, the URL's token is no API
token, and a revoked or expired token closes the live streams it opened within 5 s."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable

import httpx

from tests.security.conftest import assert_one_line_error
from tests.support.browser import dashboard_url
from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.http_api import base_url, error_of, http_env, mint
from tests.support.waiting import wait_for

CLOSE_WITHIN_S = 5.0


def _daemon(daemons: Callable[..., DaemonProc]) -> DaemonProc:
    """A daemon serving HTTP with tokens; worker has a delivery loop (to pause), lead is pull."""
    d = daemons(http_env())
    worker = " ".join(agent_cmd("record_agent.py", "/dev/null"))
    for name, how in (("worker", ["spawn", "--command", worker]), ("lead", ["pull"])):
        added = d.cli("agents", "add", name, "-c", "builder", "--channel", *how)
        assert added.returncode == 0, added.stderr
    wait_for(lambda: "paused" in d.status_row("worker"), 20, "worker's delivery loop")
    return d


def _session(d: DaemonProc, url: str) -> tuple[httpx.Client, str]:
    """A browser-like client holding the session cookie of ``url``'s token, and its CSRF token."""
    client = httpx.Client(base_url=base_url(d), timeout=20)
    first = client.get(url.removeprefix(base_url(d)), follow_redirects=False)
    assert first.status_code == 303, first.text
    page = client.get("/")
    assert page.status_code == 200, page.text
    csrf = re.search(r'"X-CSRF-Token": "([0-9a-f]{64})"', page.text)
    assert csrf is not None
    return client, csrf.group(1)


def _act(d: DaemonProc, client: httpx.Client, csrf: str, action: str) -> httpx.Response:
    return client.post(f"/actions/{action}/worker",
                       headers={"origin": base_url(d), "x-csrf-token": csrf})  # fmt: skip


def test_a_read_scope_operator_token_can_look_but_not_pause(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = _daemon(daemons)
    reader, csrf = _session(d, f"{base_url(d)}/?token={mint(d, 'operator', '--scope', 'read')}")
    assert reader.get("/dead").status_code == 200  # it may look
    for action in ("pause", "resume", "retry"):
        refused = _act(d, reader, csrf, action)
        assert refused.status_code == 403 and "lacks the &#39;control&#39; scope" in refused.text
    assert d.status_row("worker")["paused"] is False
    no_view = httpx.get(f"{base_url(d)}/?token={mint(d, 'operator', '--scope', 'send')}")
    assert no_view.status_code == 403 and "dashboard" in no_view.text  # nor may this one look
    steerer, csrf3 = _session(d, dashboard_url(d))
    assert _act(d, steerer, csrf3, "pause").status_code == 200
    assert d.status_row("worker")["paused"] is True
    assert any(e.get("reason") == "no control scope" for e in d.events("dashboard.refused"))
    reader.close()
    steerer.close()


def test_the_dashboard_url_token_opens_no_api_route(daemons: Callable[..., DaemonProc]) -> None:
    d = _daemon(daemons)
    url = dashboard_url(d)
    secret = url.partition("token=")[2]
    [listed] = json.loads(d.cli("tokens", "list", "--json").stdout)["tokens"]
    assert listed["agent"] == "operator" and listed["scopes"] == ["dashboard", "control"]
    api = httpx.Client(base_url=base_url(d), headers={"authorization": f"Bearer {secret}"})
    sent = api.post("/v1/messages", json={"to": "worker", "subject": "s", "from": "lead"})
    assert error_of(sent) == (403, "forbidden") and "'send' scope" in sent.text
    assert error_of(api.get("/v1/inbox", params={"agent": "worker"})) == (403, "forbidden")
    assert error_of(api.post("/v1/ack", json={"ids": ["msg-x"]})) == (403, "forbidden")
    assert error_of(api.post("/v1/inbox/take", json={"agent": "worker"})) == (403, "forbidden")
    assert json.loads(d.cli("--json", "list", "--to", "worker").stdout)["messages"] == []
    browser, _ = _session(d, url)  # and it still opens the dashboard
    assert browser.get("/timeline").status_code == 200
    browser.close()
    api.close()
    for agent in ("worker", "lead"):  # the dashboard's scopes are an operator's only
        refused = d.cli("tokens", "create", agent, "--scope", "control")
        assert_one_line_error(refused, "'control' is for 'operator' tokens only")


class _Stream:
    """``/events?topic=team`` read on a thread: set ``opened`` at the first event, ``closed_at``
    when the server ends the response."""

    def __init__(self, client: httpx.Client) -> None:
        self.opened = threading.Event()
        self.closed_at: float | None = None
        self._client = client
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self._client.stream("GET", "/events", params={"topic": "team"},
                                 timeout=httpx.Timeout(20, read=60)) as stream:  # fmt: skip
            for line in stream.iter_lines():
                if line == "event: team":
                    self.opened.set()
        self.closed_at = time.time()

    def close(self) -> None:
        self._client.close()
        self._thread.join(10)


def test_revoking_the_token_closes_its_open_stream(daemons: Callable[..., DaemonProc]) -> None:
    d = _daemon(daemons)
    client, _ = _session(d, dashboard_url(d))
    stream = _Stream(client)
    try:
        assert stream.opened.wait(20), "the stream's first team event"
        [token] = json.loads(d.cli("tokens", "list", "--json").stdout)["tokens"]
        assert d.cli("tokens", "revoke", token["id"]).returncode == 0
        revoked_at = time.time()
        wait_for(lambda: stream.closed_at, 3 * CLOSE_WITHIN_S, "the stream to close")
        assert stream.closed_at is not None and stream.closed_at - revoked_at < CLOSE_WITHIN_S
        assert client.get("/events", params={"topic": "team"}).status_code == 401  # no reopening
    finally:
        stream.close()
    assert d.events("dashboard.stream_ended")


def test_an_expiring_token_closes_its_open_stream(daemons: Callable[..., DaemonProc]) -> None:
    d = _daemon(daemons)
    done = d.cli("dashboard", "--no-open", "--json", "--expires", "4s")
    assert done.returncode == 0, done.stderr
    client, _ = _session(d, json.loads(done.stdout)["url"])
    stream = _Stream(client)
    try:
        assert stream.opened.wait(20), "the stream's first team event"
        [token] = json.loads(d.cli("tokens", "list", "--json").stdout)["tokens"]
        wait_for(lambda: stream.closed_at, 4 + 3 * CLOSE_WITHIN_S, "the stream to close")
        assert stream.closed_at is not None
        assert token["expires_at"] <= stream.closed_at < token["expires_at"] + CLOSE_WITHIN_S
    finally:
        stream.close()
