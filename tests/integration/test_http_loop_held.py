"""A reply (or a group send) on a thread the loop guard holds, over real HTTP: 409 ``loop_held``
with the CLI's own words (never a 500 a client would retry), and the CLI over HTTP prints the line
it prints on the store file. The thread is held by the default ``limits.pingpong_max`` (40),
reached for real."""

from __future__ import annotations

import json
from collections.abc import Callable

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.http_api import Api, base_url, error_of, http_env, mint


def _hold(alice: Api, bob: Api) -> tuple[str, Api]:
    """alice and bob reply to each other until the guard holds the thread: (root, next sender)."""
    root = alice.post("/v1/messages", {"to": "bob", "subject": "ping", "body": "0"})
    assert root.status_code == 201, root.text
    [thread] = root.json()["ids"]
    turn = [bob, alice]
    for i in range(1, 60):
        sender = turn[i % 2]
        r = sender.post(f"/v1/messages/{thread}/reply", {"body": f"reply {i}"})
        if r.status_code != 201:
            return thread, sender if r.status_code >= 400 else turn[(i + 1) % 2]
    raise AssertionError("the loop guard never held the thread")


def test_a_reply_on_a_held_thread_is_409_with_the_cli_s_words(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))  # bob: the store's
    d = daemons(http_env())
    alice, bob = Api(d, mint(d, "alice")), Api(d, mint(d, "bob"))
    thread, sender = _hold(alice, bob)
    held = sender.post(f"/v1/messages/{thread}/reply", {"body": "one more"})
    assert error_of(held) == (409, "loop_held"), held.text
    words = held.json()["error"]["message"]
    assert "limits.pingpong_max" in words and f"limits reset --thread {thread}" in words
    local = d.cli("reply", thread, "--from", "alice", "-b", "from the store file")
    assert local.returncode == 1 and local.stderr == f"error: {words}\n"
    token = mint(d, "alice")
    remote = d.cli("--url", base_url(d), "--token", token, "reply", thread, "-b", "over http")
    assert (remote.returncode, remote.stderr) == (local.returncode, local.stderr)
    as_json = d.cli("--url", base_url(d), "--token", token, "--json", "reply", thread, "-b", "j")
    assert json.loads(as_json.stdout)["error"] == {"code": "loop_held", "message": words}
    # A group send on the held thread that reaches the other one of the pair: refused alike.
    group = bob.post("/v1/messages", {"to": "@builders", "subject": "all", "body": "hi",
                                      "thread_id": thread})  # fmt: skip
    assert error_of(group) == (409, "loop_held"), group.text
    assert group.json()["error"]["message"] == words
    assert not d.events("http.failed")  # no internal error was logged
    for client in (alice, bob):
        client.close()
