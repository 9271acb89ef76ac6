"""The Claude Code hooks on either store (`agentmaild hook … --db PATH-or-DSN`): every event does
the same on a SQLite file and a PostgreSQL database — mail delivered once and marked read, turn
state and session id recorded, the tmux channel's batch headers recorded as seen, PostToolUse's
debounced mid-turn mail. On PostgreSQL only: Stop's bounded `decision: block` waking the daemon
by a NOTIFY. Real stores, the real hook entry point in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentmaild.channels.tmux_signals import open_store_port as port_at  # TmuxChannel._db's
from agentmaild.channels.tmux_signals import turn_state
from agentmaild.errors import StoreError
from agentmaild.models import Agent
from agentmaild.store.base import MailStore
from agentmaild.store.location import StoreLocation
from agentmaild.store.postgres import PostgresMailStore
from tests.support.daemon import FAST, base_env
from tests.support.store_targets import StoreTarget


def hook(
    env: dict[str, str], dsn: str, event: str, payload: dict[str, Any], **extra: str
) -> str:
    env = {**env, **extra}
    done = subprocess.run(
        [sys.executable, "-m", "agentmaild", "hook", event, "--db", dsn, "--agent", "bob"],
        input=json.dumps(payload).encode(), capture_output=True, env=env, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"", done.stderr
    return done.stdout.decode()


def send(env: dict[str, str], dsn: str, subject: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agentmaild", "send", "--db", dsn, "--to", "bob", "--subject",
         subject, "--body", "body of " + subject, "--json"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["ids"][0])


def test_prompt_and_session_hooks_deliver(store_target: StoreTarget) -> None:
    env, dsn = store_target.env, store_target.target
    store = store_target.open()
    try:
        store.add_agent(Agent(name="bob", capability="builder", channel="tmux",
                              tmux_target="w:0.0"))
        first, second = send(env, dsn, "first one"), send(env, dsn, "second one")
        out = hook(env, dsn, "UserPromptSubmit", {"prompt": "go on"})
        assert "first one" in out and "second one" in out and "body of second one" in out
        assert hook(env, dsn, "UserPromptSubmit", {"prompt": "again"}) == ""  # once only
        read = {m.id: m.read for m in store.list_messages(to_agent="bob")}
        assert read == {first: True, second: True}
        bob = store.get_agent("bob")
        assert bob is not None and bob.turn_state == "busy"

        third = send(env, dsn, "after a restart")
        out = hook(env, dsn, "SessionStart", {"source": "startup"})
        assert "after a restart" in out and "first one" not in out
        bob = store.get_agent("bob")
        assert bob is not None and bob.turn_state == "idle"
        assert {m.id: m.read for m in store.list_messages(to_agent="bob")}[third] is True
    finally:
        store.close()


def test_a_vendor_hook_gets_its_json_shape(store_target: StoreTarget) -> None:
    env, dsn = store_target.env, store_target.target
    store = store_target.open()
    try:
        store.add_agent(Agent(name="bob", capability="builder"))
        mid = send(env, dsn, "for gemini")
        done = subprocess.run(
            [sys.executable, "-m", "agentmaild", "hook", "user-prompt-submit", "--db", dsn,
             "--agent", "bob", "--vendor", "gemini"],
            input=b'{"prompt": "go on"}', capture_output=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "BeforeAgent"
        assert mid in out["additionalContext"] and "body of for gemini" in out["additionalContext"]
        assert unread(store) == {mid}  # Gemini's ack waits for AfterAgent (hooks.deferred)
        stop = subprocess.run(
            [sys.executable, "-m", "agentmaild", "hook", "stop", "--db", dsn, "--agent", "bob",
             "--vendor", "gemini"],
            input=b'{"prompt": "go on"}', capture_output=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert (stop.returncode, stop.stdout) == (0, b""), stop.stderr
        assert unread(store) == set()
    finally:
        store.close()


def turn(store: MailStore) -> tuple[str | None, str | None]:
    bob = store.get_agent("bob")
    assert bob is not None
    return bob.turn_state, bob.session_id


def unread(store: MailStore) -> set[str]:
    return {m.id for m in store.list_messages(to_agent="bob") if not m.read}


def test_every_event_keeps_the_turn_state(store_target: StoreTarget) -> None:
    env, dsn = store_target.env, store_target.target
    store = store_target.open()
    try:
        store.add_agent(Agent(name="bob", capability="builder", channel="tmux",
                              tmux_target="w:0.0"))
        sid = {"session_id": "sess-1"}
        assert hook(env, dsn, "UserPromptSubmit", {"prompt": "go", **sid}) == ""
        assert turn(store) == ("busy", "sess-1")
        hook(env, dsn, "PermissionRequest", sid)
        assert turn(store) == ("waiting", "sess-1")
        hook(env, dsn, "PostToolUse", {"tool_name": "Bash"})  # the dialog was answered
        assert turn(store)[0] == "busy"
        hook(env, dsn, "Notification", {"notification_type": "idle_prompt"})  # not a wait
        assert turn(store)[0] == "busy"
        hook(env, dsn, "Notification", {"notification_type": "permission_prompt"})
        assert turn(store)[0] == "waiting"
        hook(env, dsn, "SessionStart", {"source": "compact"})  # mid-turn: state unchanged
        assert turn(store)[0] == "waiting"
        hook(env, dsn, "Stop", {"session_id": "sess-2"})  # tmux: the latest id wins (/clear)
        assert turn(store) == ("idle", "sess-2")
        hook(env, dsn, "SessionEnd", {"reason": "exit"})
        assert turn(store)[0] == "gone"
    finally:
        store.close()


def test_a_pasted_batch_header_is_recorded_not_answered_with_mail(
    store_target: StoreTarget
) -> None:
    env, dsn = store_target.env, store_target.target
    store = store_target.open()
    try:
        store.add_agent(Agent(name="bob", capability="builder"))
        mid = send(env, dsn, "waits for the daemon")
        prompt = "[agentmail] 1 message for bob (delivery dlv-abc123def)\nhello"
        out = hook(env, dsn, "UserPromptSubmit", {"prompt": prompt, "session_id": "s-9"})
        assert out == "" and unread(store) == {mid}  # the daemon acks its own batch
        seen = store_target.query("SELECT * FROM am_prompt_seen")
        assert [(r["delivery_id"], r["agent"], r["session_id"]) for r in seen] == [
            ("dlv-abc123def", "bob", "s-9")
        ]
        hook(env, dsn, "UserPromptSubmit", {"prompt": prompt})  # seen twice: one row
        assert len(store_target.query("SELECT * FROM am_prompt_seen")) == 1
    finally:
        store.close()


def test_post_tool_use_delivers_mid_turn_once_per_debounce(
    store_target: StoreTarget
) -> None:
    # policy "all": normal mail too goes mid-turn, at most once per debounce
    env = {**store_target.env, "AGENTMAILD_DELIVERY_MID_TURN_PRIORITY": "all"}
    dsn = store_target.target
    store = store_target.open()
    try:
        store.add_agent(Agent(name="bob", capability="builder"))
        assert hook(env, dsn, "PostToolUse", {"tool_name": "Read"}) == ""  # no mail
        first = send(env, dsn, "mid-turn news")
        out = json.loads(hook(env, dsn, "PostToolUse", {"tool_name": "Read"}))
        context = out["hookSpecificOutput"]["additionalContext"]
        assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
        assert first in context and "body of mid-turn news" in context
        assert unread(store) == set()
        marker = store_target.location.local_path.parent / "hooks" / "bob.mid-turn"
        assert marker.is_file()  # the debounce stamp lives beside the DSN's local path
        second = send(env, dsn, "too soon")
        assert hook(env, dsn, "PostToolUse", {"tool_name": "Read"}) == ""  # debounced
        subagent = {"tool_name": "Read", "agent_id": "sub-1"}
        assert hook(env, dsn, "PostToolUse", subagent,
                    AGENTMAILD_HOOKS_POST_TOOL_USE_DEBOUNCE_S="0") == ""  # fmt: skip
        assert unread(store) == {second}  # a subagent's context would never reach bob
        out = hook(env, dsn, "PostToolUse", {"tool_name": "Read"},
                   AGENTMAILD_HOOKS_POST_TOOL_USE_DEBOUNCE_S="0")  # fmt: skip
        assert "too soon" in out and unread(store) == set()
        # each batch under a delivery of its own, in the history as mid-turn
        history = list(store.list_attempts(agent="bob"))
        assert sorted(a.outcome for a in history) == ["mid-turn", "mid-turn"]
        assert {a.delivery_id for a in history} == {
            m.acked_by for m in store.inbox("bob")}  # fmt: skip
    finally:
        store.close()


def test_the_tmux_channel_reads_the_hooks_records(
    store_target: StoreTarget
) -> None:
    env, dsn = store_target.env, store_target.target
    store = store_target.open()
    reader = port_at(store_target.location)
    try:
        store.add_agent(Agent(name="bob", capability="builder", channel="tmux",
                              tmux_target="w:0.0"))
        assert turn_state(reader, "bob") == (None, None)
        prompt = "[agentmail] 1 message for bob (delivery dlv-fromtmux1)\nhello"
        before = time.time()
        hook(env, dsn, "UserPromptSubmit", {"prompt": prompt})
        state, at = turn_state(reader, "bob")
        assert state == "busy" and at is not None and at >= before - 1
        assert reader.delivery_seen("dlv-fromtmux1") is True  # the paste was submitted
        assert reader.delivery_seen("dlv-other0001") is False
    finally:
        reader.close()
        store.close()


def test_the_tmux_channel_port_on_a_store_it_cannot_open_is_a_store_error(
    tmp_path: Path,
) -> None:
    unreachable = StoreLocation.of("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StoreError, match="cannot reach store"):  # the channel's "unknown"
        port_at(unreachable)
    with pytest.raises(StoreError, match="no store at"):  # a SQLite file nobody made yet
        port_at(StoreLocation.of(tmp_path / "mail.db"))


def test_stop_blocks_with_mail_a_bounded_number_of_times_and_wakes_the_daemon(
    tmp_path: Path, pg_dsn: str
) -> None:
    env = base_env(tmp_path, {"XDG_STATE_HOME": str(tmp_path / "state")}, FAST)
    store = PostgresMailStore(pg_dsn)
    listener = psycopg.connect(pg_dsn, autocommit=True)
    try:
        listener.execute("LISTEN agentmaild_mail")
        store.add_agent(Agent(name="bob", capability="builder"))
        hook(env, pg_dsn, "UserPromptSubmit", {"prompt": "go"})
        mid = send(env, pg_dsn, "before you stop")
        assert len(list(listener.notifies(timeout=10, stop_after=1))) == 1  # the send's own
        out = hook(env, pg_dsn, "Stop", {"stop_hook_active": False},
                   AGENTMAILD_HOOKS_STOP_BLOCK_MAX="1")  # fmt: skip
        decision = json.loads(out)
        assert decision["decision"] == "block" and mid in decision["reason"]
        assert turn(store)[0] == "busy" and unread(store) == set()  # the turn goes on
        again = send(env, pg_dsn, "one more")
        assert len(list(listener.notifies(timeout=10, stop_after=1))) == 1
        out = hook(env, pg_dsn, "Stop", {"stop_hook_active": True},
                   AGENTMAILD_HOOKS_STOP_BLOCK_MAX="1")  # fmt: skip
        assert out == "" and unread(store) == {again}  # the bound: this stop goes through
        assert turn(store)[0] == "idle"
        woke = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
        assert woke == ["bob"]  # the agent's daemon, on whichever host, rechecks the turn
    finally:
        listener.close()
        store.close()
