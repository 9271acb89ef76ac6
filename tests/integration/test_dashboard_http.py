"""The dashboard over real HTTP on a real daemon (httpx, no browser): sessions, the guards on
its writes, the Host check without tokens, escaped bodies, the SSE stream, and `dashboard`."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.web.dashboard import LIVE_EVERY_S
from tests.support.browser import dashboard_url
from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.http_api import base_url, http_env, mint
from tests.support.waiting import wait_for


def _logged_in(d: DaemonProc) -> tuple[httpx.Client, str]:
    """A client holding the session cookie, and the page's CSRF token."""
    url = dashboard_url(d)
    client = httpx.Client(base_url=base_url(d), timeout=20)
    first = client.get(url, follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    cookie = first.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "amt_" not in first.headers[
        "location"]  # fmt: skip
    page = client.get("/")
    assert page.status_code == 200
    token = re.search(r'"X-CSRF-Token": "([0-9a-f]{64})"', page.text)
    assert token is not None
    return client, token.group(1)


def test_tokens_on_pages_need_an_operator_session(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons(http_env())
    url = base_url(d)
    assert httpx.get(url + "/").status_code == 401
    assert httpx.get(url + "/events?topic=team").status_code == 401
    agent_token = mint(d, "bob")  # a real token, but an agent's, not the operator's
    assert httpx.get(url + f"/?token={agent_token}").status_code == 401
    assert httpx.get(url + "/?token=amt_made_up").status_code == 401
    client, _ = _logged_in(d)
    for path in ("/", "/timeline", "/mail", "/dead", "/mail?q=x", "/mail/search?q=x"):
        r = client.get(path)
        assert r.status_code == 200, path
        assert "default-src 'none'" in r.headers["content-security-policy"]
    assert client.get("/static/htmx.min.js").text.startswith("/*! htmx 2.0.11")
    assert client.get("/v1/health").json()["ok"] is True  # the API is still beside it


def test_writes_need_same_origin_and_the_csrf_token(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    store.add_agent(Agent(name="alice", capability="builder", channel="spawn",
                          command=agent_cmd("record_agent.py", "/dev/null")))  # fmt: skip
    d = daemons(http_env())
    client, csrf = _logged_in(d)
    own = base_url(d)
    cases = [
        ({}, 403),  # no Origin, no Referer
        ({"origin": "http://evil.example", "x-csrf-token": csrf}, 403),
        ({"origin": own}, 403),  # no CSRF token
        ({"origin": own, "x-csrf-token": "0" * 64}, 403),
    ]
    for headers, status in cases:
        r = client.post("/actions/pause/alice", headers=headers)
        assert r.status_code == status, (headers, r.text)
        assert d.status_row("alice")["paused"] is False
    assert httpx.post(own + "/actions/pause/alice",
                      headers={"origin": own, "x-csrf-token": csrf}).status_code == 401
    ok = client.post("/actions/pause/alice", headers={"origin": own, "x-csrf-token": csrf})
    assert ok.status_code == 200 and "paused alice" in ok.text
    assert d.status_row("alice")["paused"] is True
    by_referer = {"referer": own + "/dead", "x-csrf-token": csrf}
    assert client.post("/actions/resume/alice", headers=by_referer).status_code == 200
    assert d.status_row("alice")["paused"] is False
    missing = client.post("/actions/retry/dlv-nosuch000", headers={"origin": own,
                                                                   "x-csrf-token": csrf})
    assert missing.status_code == 404 and "no dead delivery" in missing.text
    assert d.events("dashboard.refused")  # every refusal is logged


def test_without_tokens_only_a_loopback_host_name_is_served(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons(http_env({"AGENTMAILD_HTTP_REQUIRE_TOKENS": "false"}))
    url = base_url(d)
    assert httpx.get(url + "/").status_code == 200
    rebound = httpx.get(url + "/", headers={"host": "attacker.example:80"})
    assert rebound.status_code == 403  # a DNS-rebinding page cannot read or act
    done = d.cli("dashboard", "--no-open", "--json")
    assert json.loads(done.stdout)["url"] == url + "/"  # no token needed, none minted
    assert json.loads(d.cli("tokens", "list", "--json").stdout)["tokens"] == []


def test_bodies_are_escaped_and_the_stream_sends_the_team(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons(http_env())
    sent = d.cli("send", "--from", "bob", "--to", "bob", "--subject", "<i>s</i>",
                 "--body", "<script>alert(1)</script>")  # fmt: skip
    mid = sent.stdout.strip()
    client, _ = _logged_in(d)
    page = client.get(f"/mail/thread/{mid}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "&lt;i&gt;s&lt;/i&gt;" in page
    assert client.get("/mail/thread/msg-nosuch").status_code == 404
    with client.stream("GET", "/events", params={"topic": "team"}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        got = wait_for(lambda: next(line for line in lines if line == "event: team"), 10,
                       "the first team event")  # fmt: skip
        assert got == "event: team"
        assert 'id="agent-bob"' in next(lines) + "".join(next(lines) for _ in range(12))
    assert client.get("/events").status_code == 400
    bad = client.get("/events", params={"topic": "timeline:../<x>"})
    assert bad.status_code == 400  # topics are checked: no unbounded set of rendered filters


def test_dashboard_command_needs_a_daemon_with_http(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons()  # no HTTP face
    done = d.cli("dashboard", "--no-open")
    assert done.returncode == 2 and done.stderr.startswith("error: the daemon does not serve HTTP")
    assert "Traceback" not in done.stderr
    d.stop()
    gone = d.cli("dashboard", "--json")
    assert gone.returncode == 1 and json.loads(gone.stdout)["error"]["code"] == "daemon_not_running"


class _TeamStream:
    """The team topic read on a thread of its own: (arrival time, fragment) per event."""

    def __init__(self, client: httpx.Client) -> None:
        self.events: list[tuple[float, str]] = []
        self._client = client
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            with self._client.stream("GET", "/events", params={"topic": "team"}) as stream:
                data: list[str] = []
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        data.append(line[6:])
                    elif not line and data:
                        self.events.append((time.time(), "\n".join(data)))
                        data = []
        except httpx.HTTPError:
            if not self._stop.is_set():
                raise  # closed under us only when the test is done

    def close(self) -> None:
        self._stop.set()
        self._client.close()  # ends the blocked read
        self._thread.join(10)


def test_a_burst_of_deliveries_gives_few_team_updates_and_the_last_shows_the_final_state(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    store.add_agent(Agent(name="alice", capability="builder", channel="spawn",
                          command=agent_cmd("record_agent.py", str(tmp_path / "a.jsonl"))))
    d = daemons(http_env({"AGENTMAILD_HTTP_REQUIRE_TOKENS": "false"}))
    client = httpx.Client(base_url=base_url(d), timeout=30)
    stream = _TeamStream(client)
    mailer = Mailer(store)
    try:
        wait_for(lambda: stream.events, 20, "the first team event")
        began = time.time()
        ids = []
        while time.time() - began < 3.0:  # 3 s of mail, each a delivery or a change of unread
            sent = mailer.send(sender="bob", to="alice", subject=f"burst {len(ids)}", body="x")
            ids.append(sent.messages[0].id)
            time.sleep(0.05)
        ended = time.time()
        last = wait_for(lambda: (m := store.get_message(ids[-1])) and m.read and m, 30,
                        "the last message to be acked")  # fmt: skip
        acked_at = next(a.at for a in store.list_attempts(agent="alice", limit=5)
                        if a.delivery_id == last.acked_by and a.outcome == "acked")  # fmt: skip
        shown = wait_for(lambda: next((t for t, html in stream.events if last.acked_by in html
                                       and '<td class="num unread">0<' in html), None),
                         10, "an update showing the last delivery")  # fmt: skip
    finally:
        stream.close()
    during = [t for t, _ in stream.events if began <= t <= ended]
    # ~60 sends in 3 s: at most one update per LIVE_EVERY_S (plus one at an edge).
    assert len(ids) >= 40 and len(during) <= 3.0 / LIVE_EVERY_S + 2, (len(ids), during)
    print(f"{len(ids)} sends, {len(during)} team updates in 3 s; final state "
          f"{shown - acked_at:.3f} s after the ack")  # fmt: skip
    assert shown - acked_at < 1.0, f"the final state went out {shown - acked_at:.2f}s late"
