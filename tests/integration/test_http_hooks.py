"""``agentmaild hook EVENT`` in URL mode against a live daemon: every event prints what the local
hook prints and leaves the agent in the same state; bad input and an unreachable daemon leave
the session alone exactly as a local hook does. A daemon on either store (SQLite, PostgreSQL)
serves tokens, inject takes and a remote agent's hooks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.http_cli import Both, make_both, normalised, stamps
from tests.support.net import daemon_answers, free_port
from tests.support.store_targets import StoreTarget, ok
from tests.support.waiting import wait_for

HOOK_ENV = {"AGENTMAILD_HOOKS_STOP_BLOCK_MAX": "1",
            "AGENTMAILD_HOOKS_POST_TOOL_USE_DEBOUNCE_S": "0"}  # fmt: skip


@pytest.fixture
def both(store: SqliteMailStore, daemons: Callable[..., DaemonProc]) -> Both:
    # The daemon's hook settings apply to a remote hook, the environment's to a local one: both.
    return make_both(store, daemons, HOOK_ENV)


def _hook(both: Both, agent: str, remote: bool, payload: dict[str, Any]) -> str:
    run = both.remote if remote else both.local
    done = run("hook", "user-prompt-submit", "--agent", agent, stdin=json.dumps(payload))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_hook_over_http_prints_what_the_local_hook_prints(
    both: Both, store: SqliteMailStore, db: Path
) -> None:
    for agent in ("alice", "carol"):
        both.local("send", "--to", agent, "--subject", "urgent thing", "--body", "do it",
                   "--from", "bob", "--priority", "urgent")  # fmt: skip
    payload = {"session_id": "sess-1", "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    here = _hook(both, "carol", False, payload)
    there = _hook(both, "alice", True, payload)
    assert "do it" in there and "PRIORITY" in there
    assert stamps(normalised(there, "alice")) == stamps(normalised(here, "carol"))
    alice = store.get_agent("alice")
    assert alice is not None and alice.turn_state == "busy" and alice.session_id == "sess-1"
    assert store.inbox("alice", unread_only=True) == []
    assert _hook(both, "alice", True, payload) == ""  # nothing left
    state = db.parent.parent / "state"
    wrong = {"AGENTMAIL_TOKEN": "amt_wrong", "XDG_STATE_HOME": str(state)}
    bad = both.remote("hook", "user-prompt-submit", "--agent", "alice", stdin=json.dumps(payload),
                      env=wrong)  # fmt: skip
    assert (bad.returncode, bad.stdout) == (0, "")  # a hook never breaks the session
    logged = (state / "agentmaild" / "hooks.log").read_text()
    assert "hook.failed" in logged and "AccessError: unknown token" in logged
    assert "amt_wrong" not in logged



def test_a_codex_hook_over_http_gets_additional_context_json(
    both: Both, store: SqliteMailStore
) -> None:
    mid = both.local("send", "--to", "alice", "--subject", "s", "--body", "for codex",
                     "--from", "bob").stdout.strip()  # fmt: skip
    done = both.remote("hook", "session-start", "--agent", "alice", "--vendor", "codex",
                       stdin='{"source": "startup"}')  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert mid in out["additionalContext"] and "for codex" in out["additionalContext"]
    assert store.inbox("alice", unread_only=True) == []


def test_a_gemini_hook_over_http_acks_only_after_the_turn(
    both: Both, store: SqliteMailStore
) -> None:
    mid = both.local("send", "--to", "alice", "--subject", "s", "--body", "for gemini",
                     "--from", "bob").stdout.strip()  # fmt: skip
    payload = json.dumps({"session_id": "g-1", "prompt": "go"})

    def hook(event: str) -> str:
        done = both.remote("hook", event, "--agent", "alice", "--vendor", "gemini", stdin=payload)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = json.loads(hook("user-prompt-submit"))["hookSpecificOutput"]
    assert out["hookEventName"] == "BeforeAgent" and mid in out["additionalContext"]
    assert [m.id for m in store.inbox("alice", unread_only=True)] == [mid]  # the turn runs
    assert hook("stop") == ""  # AfterAgent: the model answered
    assert store.inbox("alice", unread_only=True) == []


EVENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("session-start", {"source": "startup"}),
    ("user-prompt-submit", {"prompt": "go"}),
    ("pre-tool-use", {"tool_name": "Bash", "tool_input": {"command": "agentmaild check"}}),
    ("post-tool-use", {"tool_name": "Bash", "tool_input": {"command": "ls"}, "agent_id": None}),
    ("stop", {"stop_hook_active": False}),
    ("permission-request", {"tool_name": "Bash"}),
    ("notification", {"message": "waiting"}),
    ("session-end", {"reason": "exit"}),
)  # fmt: skip


DELIVERING = {"session-start", "user-prompt-submit", "post-tool-use", "stop"}


@pytest.mark.timeout(600)  # about 40 CLI processes
def test_every_hook_event_prints_and_records_what_the_local_hook_does(
    both: Both, store: SqliteMailStore
) -> None:
    """Each event, with mail waiting: carol's local hook and alice's hook over HTTP print the
    same (names and ids aside), exit alike, take the same mail and leave the same turn state."""
    for event, fields in EVENTS:
        for agent in ("alice", "carol"):
            # mid-turn (post-tool-use) takes only high and urgent mail by default
            both.local("send", "--to", agent, "--subject", f"during {event}", "--body", "news",
                       "--from", "bob", "--priority", "high")  # fmt: skip
        payload = json.dumps({"session_id": "sess-1", "hook_event_name": event, **fields})
        here = both.local("hook", event, "--agent", "carol", stdin=payload)
        there = both.remote("hook", event, "--agent", "alice", stdin=payload)
        assert (there.returncode, there.stderr) == (here.returncode, here.stderr), event
        assert stamps(normalised(there.stdout, "alice")) == stamps(
            normalised(here.stdout, "carol")), event  # fmt: skip
        if event in DELIVERING:
            assert f"during {event}" in there.stdout, (event, there.stdout)
        alice, carol = store.get_agent("alice"), store.get_agent("carol")
        assert alice is not None and carol is not None
        assert (alice.turn_state, alice.session_id) == (carol.turn_state, carol.session_id), event
        unread = [len(store.inbox(a, unread_only=True)) for a in ("alice", "carol")]
        assert unread[0] == unread[1], (event, unread)
    assert store.get_agent("alice").turn_state == "gone"  # type: ignore[union-attr]


BAD_HOOKS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("hook", "no-such-event", "--agent", "AGENT"), "{}"),
    (("hook", "user-prompt-submit", "--agent", "AGENT"), "not json"),
    (("hook", "user-prompt-submit", "--agent", "AGENT"), '{"prompt": ' * 5000),
    (("hook", "session-start", "--agent", "AGENT"), "[1, 2]"),
    (("hook", "session-start", "--agent", "../etc/passwd"), "{}"),
    (("hook", "session-start", "--agent", "ghost"), "{}"),
    (("hook", "stop"), "{}"),  # no agent
)  # fmt: skip


@pytest.mark.timeout(300)
def test_bad_hook_input_and_an_unreachable_daemon_never_break_the_session(
    both: Both, store: SqliteMailStore
) -> None:
    """Bad input: exit 0 and the same output as a local hook (mail still delivered when the agent
    is known: a hook's stdin is only context); a daemon that does not answer: a silent hook,
    and ``check --inject`` one error line (or the --json error), the mail left unread."""
    for args, stdin in BAD_HOOKS:
        for agent in ("alice", "carol"):
            both.local("send", "--to", agent, "--subject", "kept", "--from", "bob")
        here = both.local(*(a.replace("AGENT", "carol") for a in args), stdin=stdin)
        there = both.remote(*(a.replace("AGENT", "alice") for a in args), stdin=stdin)
        assert there.returncode == here.returncode == 0, args
        assert stamps(normalised(there.stdout, "alice")) == stamps(
            normalised(here.stdout, "carol")), args  # fmt: skip
        assert "Traceback" not in here.stderr + there.stderr, args
        unread = [len(store.inbox(a, unread_only=True)) for a in ("alice", "carol")]
        assert unread[0] == unread[1], (args, unread)
    gone = {"AGENTMAIL_URL": f"http://127.0.0.1:{free_port()}"}
    both.local("send", "--to", "alice", "--subject", "waits", "--from", "bob")
    left = len(store.inbox("alice", unread_only=True))
    assert left == 1
    hook = both.remote("hook", "user-prompt-submit", "--agent", "alice", stdin="{}", env=gone)
    assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
    check = both.remote("check", "--inject", "--agent", "alice", env=gone)
    assert check.returncode == 1 and check.stdout == ""
    assert check.stderr.startswith("error: cannot reach agentmaild at http://127.0.0.1:")
    assert check.stderr.count("\n") == 1
    as_json = both.remote("check", "--inject", "--agent", "alice", "--json", env=gone)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "daemon_not_running"
    assert len(store.inbox("alice", unread_only=True)) == left


@pytest.mark.timeout(120)
def test_a_daemon_on_a_store_target_serves_tokens_inject_takes_and_hooks(
    tmp_path: Path, store_target: StoreTarget
) -> None:
    """The HTTP face over either store: tokens, ``/v1/inbox/take`` with inject, the hooks of a
    remote agent, the dashboard's door."""
    port = free_port()
    env = store_target.with_env(AGENTMAILD_HTTP_LISTEN=f"127.0.0.1:{port}")
    ok(env, "agents", "add", "alice", "--capability", "builder")
    token = ok(env, "tokens", "create", "operator")["token"]
    assert [t["agent"] for t in ok(env, "tokens", "list")["tokens"]] == ["operator"]
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    headers = {"authorization": f"Bearer {token}"}
    try:
        wait_for(lambda: daemon.poll() is not None or daemon_answers(store_target.socket), 30,
                 "the daemon's socket")  # fmt: skip
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=20) as c:
            wait_for(lambda: _health(c), 30, "the HTTP API")
            sent = c.post("/v1/messages", json={"to": "alice", "from": "bob", "subject": "hi",
                                                 "body": "for the hook"})  # fmt: skip
            assert sent.status_code == 201, sent.text
            took = c.post("/v1/inbox/take", json={"agent": "alice", "inject": True}).json()
            assert "for the hook" in took["text"] and took["acked"] == sent.json()["ids"]
            again = c.post("/v1/messages", json={"to": "alice", "from": "bob", "subject": "yo",
                                                  "body": "by the remote hook"})  # fmt: skip
            hook = c.post("/v1/hooks/user-prompt-submit",
                          json={"agent": "alice", "input": '{"prompt": "go"}'})  # fmt: skip
            assert hook.status_code == 200, hook.text
            answer = hook.json()
            assert answer["exit"] == 0 and "by the remote hook" in answer["stdout"]
            assert again.json()["ids"][0] in answer["stdout"]
            assert _turn(store_target, "alice") == "busy"
            stop = c.post("/v1/hooks/stop", json={"agent": "alice", "input": "{}"}).json()
            assert (stop["exit"], stop["stdout"]) == (0, "")
            assert _turn(store_target, "alice") == "idle"
            taken = c.post("/v1/inbox/take", json={"agent": "alice", "inject": True}).json()
            assert taken["acked"] == []  # the hook acked what it printed
            page = c.get("/mail")  # the dashboard's door: a session is needed
            assert page.status_code == 401 and "agentmaild dashboard" in page.text
            assert c.get("/v1/health").status_code == 200  # the daemon carries on
    finally:
        daemon.send_signal(2)
        daemon.wait(timeout=30)
        log.close()


def _turn(target: StoreTarget, agent: str) -> str | None:
    store = target.open()
    try:
        found = store.get_agent(agent)
        assert found is not None
        return found.turn_state
    finally:
        store.close()


def _health(c: httpx.Client) -> bool:
    try:
        return c.get("/v1/health").status_code == 200
    except httpx.TransportError:
        return False
