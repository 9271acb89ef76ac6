"""Mail written from the dashboard on a real daemon: refused without the CSRF token, from a foreign
Origin, with a read-only or an agent's token (nothing stored, nobody woken); accepted with all of
them as the operator; untrusted text shown as text on the new pages (thread, Needs you, the
graph's labels, the log tail)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import httpx

from agentmaild.store.sqlite import SqliteMailStore
from tests.security.test_dashboard_scopes import _session
from tests.support.browser import dashboard_url
from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.http_api import base_url, http_env, mint
from tests.support.waiting import wait_for

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'
FORM = {"to": "worker", "subject": "from the page", "body": HOSTILE, "priority": "normal"}


def _daemon(daemons: Callable[..., DaemonProc]) -> DaemonProc:
    d = daemons(http_env())
    worker = " ".join(agent_cmd("log_agent.py"))
    for name, how in (("worker", ["spawn", "--command", worker, "--queue", "jobs"]),
                      ("lead", ["pull"])):  # fmt: skip
        added = d.cli("agents", "add", name, "-c", "builder", "--channel", *how)
        assert added.returncode == 0, added.stderr
    return d


def _stored(d: DaemonProc) -> list[dict[str, object]]:
    listed = d.cli("--json", "list", "--to", "worker")
    assert listed.returncode == 0, listed.stderr
    messages: list[dict[str, object]] = json.loads(listed.stdout)["messages"]
    return messages


def test_compose_is_refused_without_csrf_from_a_foreign_origin_and_without_control(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = _daemon(daemons)
    own = base_url(d)
    steerer, csrf = _session(d, dashboard_url(d))
    tries = {
        "no csrf token": steerer.post("/mail/send", data=FORM, headers={"origin": own}),
        "a stale csrf token": steerer.post("/mail/send", data=FORM,
                                           headers={"origin": own, "x-csrf-token": "0" * 64}),
        "a foreign origin": steerer.post("/mail/send", data=FORM, headers={
            "origin": "http://evil.example", "x-csrf-token": csrf}),
        "no origin at all": steerer.post("/mail/send", data=FORM,
                                         headers={"x-csrf-token": csrf}),
    }  # fmt: skip
    reader, csrf_r = _session(d, f"{own}/?token={mint(d, 'operator', '--scope', 'read')}")
    tries["a read-only token"] = reader.post("/mail/send", data=FORM,
                                             headers={"origin": own, "x-csrf-token": csrf_r})
    tries["a read-only token's reply"] = reader.post(
        "/mail/reply/msg-0000000000000000000000", data={"body": "x"},
        headers={"origin": own, "x-csrf-token": csrf_r})  # fmt: skip
    for why, refused in tries.items():
        assert refused.status_code == 403, (why, refused.status_code, refused.text)
    # An agent's token never opens a session (401), so it cannot write either.
    agent = httpx.Client(base_url=own, cookies={"am_dashboard": mint(d, "lead")})
    assert agent.post("/mail/send", data=FORM, headers={
        "origin": own, "x-csrf-token": csrf}).status_code == 401  # fmt: skip
    assert _stored(d) == []  # nothing was written by any of them
    done = steerer.post("/mail/send", data=FORM, headers={"origin": own, "x-csrf-token": csrf})
    assert done.status_code == 200 and "sent msg-" in done.text, done.text
    [stored] = _stored(d)  # (the worker reads its mail: listed whether read or not)
    store = SqliteMailStore(d.db)
    try:
        message = store.get_message(str(stored["id"]))
    finally:
        store.close()
    assert message is not None and message.from_agent == "operator" and message.body == HOSTILE
    # A group and a work queue, as `agentmaild send --to` takes them.
    group = steerer.post("/mail/send", data={**FORM, "to": "@builders", "subject": "all hands"},
                         headers={"origin": own, "x-csrf-token": csrf})  # fmt: skip
    assert group.status_code == 200 and "to lead, worker" in group.text, group.text
    queued = steerer.post("/mail/send", data={**FORM, "to": "queue:jobs", "subject": "a job"},
                          headers={"origin": own, "x-csrf-token": csrf})  # fmt: skip
    assert queued.status_code == 200 and "to queue:jobs" in queued.text, queued.text
    # The rules are the CLI's: an unknown recipient is refused with its one-line reason.
    unknown = steerer.post("/mail/send", data={**FORM, "to": "nobody"},
                           headers={"origin": own, "x-csrf-token": csrf})  # fmt: skip
    assert unknown.status_code == 400 and "nobody" in unknown.text
    for client in (steerer, reader, agent):
        client.close()


def test_untrusted_text_is_escaped_on_the_operator_pages(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = _daemon(daemons)
    asked = d.cli("send", "--from", "lead", "--to", "operator", "--type", "question",
                  "-s", "<b>which</b>", "-b", HOSTILE)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    sent = d.cli("send", "--from", "lead", "--to", "worker", "-s", "<i>echo</i>", "-b", HOSTILE)
    assert sent.returncode == 0, sent.stderr
    mid = sent.stdout.decode().strip() if isinstance(sent.stdout, bytes) else sent.stdout.strip()
    client, _ = _session(d, dashboard_url(d))
    log_page = wait_for(lambda: (p := client.get("/agents/worker").text) and "wrote-at" in p
                        and p, 30, "the worker's log on its page")  # fmt: skip
    pages = {
        "thread": client.get(f"/mail/thread/{mid}").text,
        "needs you": client.get("/needs-you").text,
        "graph": client.get("/graph").text,
        "agent log": log_page,
    }
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&#34;alert(2)&#34;&gt;"
    for name, text in pages.items():
        assert "<script>alert" not in text and "<img src=x" not in text, name
        assert re.search(r"<(b|i)>(which|echo)", text) is None, name
    for name in ("thread", "needs you", "agent log"):
        assert escaped in pages[name], name
    assert "&lt;b&gt;which&lt;/b&gt;" in pages["needs you"]
    assert 'data-from="lead" data-to="worker"' in pages["graph"]
    client.close()
