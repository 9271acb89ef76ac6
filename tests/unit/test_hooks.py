"""``agentmaild hook EVENT``: a real SQLite store, the hook run as a real child process.

Also the settings installer (``install_hooks``/``uninstall_hooks``) and the typer commands.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agentmaild.channels.tmux_signals import open_store_port
from agentmaild.cli import hooks as cli_hooks
from agentmaild.errors import ConfigError
from agentmaild.hooks import install as hooks_install
from agentmaild.hooks import run as hooks
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.render.framing import render_batch
from agentmaild.store.location import StoreLocation
from agentmaild.store.sqlite import SqliteMailStore

REASON = "mail is delivered to you; end your turn instead of polling"
SESSION = "5b0c7d1e-0000-4000-8000-000000000001"


class Store:
    """A store on disk plus the helpers the tests need to set it up and inspect it."""

    def __init__(self, root: Path) -> None:
        self.db = root / "store" / "mail.db"
        self.db.parent.mkdir(parents=True)
        self.store = SqliteMailStore(self.db)
        self.mailer = Mailer(self.store)
        self.store.add_agent(Agent(name="bob", capability="builder", channel="tmux",
                                   tmux_target="s:0.0"))
        self.store.add_agent(Agent(name="sam", capability="builder", channel="spawn",
                                   command=("claude",), session_id="daemon-chosen"))
        self.store.add_agent(Agent(name="alice", capability="lead"))

    def send(self, to: str = "bob", subject: str = "hi", body: str = "hello", **kw: Any) -> str:
        sent = self.mailer.send(sender="alice", to=to, subject=subject, body=body, **kw)
        return sent.ids[0]

    def agent(self, name: str = "bob") -> Agent:
        agent = self.store.get_agent(name)
        assert agent is not None
        return agent

    def unread(self, name: str = "bob") -> list[str]:
        return [m.id for m in self.store.inbox(name, unread_only=True)]

    def acked_by(self, message_id: str) -> str | None:
        with sqlite3.connect(self.db) as conn:
            row = conn.execute("SELECT acked_by FROM messages WHERE id = ?", (message_id,))
            value: str | None = row.fetchone()[0]
            return value


@pytest.fixture
def st(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path)
    yield s
    s.store.close()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("AGENTMAIL", "CLAUDE")) and k != "PYTHONDONTWRITEBYTECODE"}
    clean["XDG_STATE_HOME"] = str(tmp_path / "state")
    clean["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return clean


def hook(
    event: str,
    payload: dict[str, Any] | None = None,
    *,
    db: Path,
    env: dict[str, str],
    agent: str | None = "bob",
    raw: bytes | None = None,
    extra: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agentmaild", "hook", event, "--db", str(db)]
    if agent is not None:
        argv += ["--agent", agent]
    data = raw if raw is not None else json.dumps(payload or {}).encode()
    proc = subprocess.run(argv, input=data, capture_output=True, env={**env, **(extra or {})},
                          timeout=60, check=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def ups(prompt: str = "go on", session: str = SESSION) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
            "hook_event_name": "UserPromptSubmit", "prompt": prompt}


# -- turn state ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("event", "payload", "state"),
    [
        ("user-prompt-submit", ups(), "busy"),
        ("UserPromptSubmit", ups(), "busy"),
        ("stop", {"session_id": SESSION, "stop_hook_active": False}, "idle"),
        ("Stop", {"session_id": SESSION}, "idle"),
        ("permission-request", {"session_id": SESSION, "tool_name": "Bash"}, "waiting"),
        ("notification", {"session_id": SESSION, "notification_type": "permission_prompt",
                          "message": "Claude needs your permission to use Bash"}, "waiting"),
        ("Notification", {"session_id": SESSION, "notification_type": "elicitation_dialog"},
         "waiting"),
        ("notification", {"session_id": SESSION, "message": "Claude needs your permission"},
         "waiting"),
        ("session-end", {"session_id": SESSION, "reason": "prompt_input_exit"}, "gone"),
        ("session-start", {"session_id": SESSION, "source": "startup"}, "idle"),
    ],
)
def test_turn_state_is_recorded_with_the_session_id(
    st: Store, env: dict[str, str], event: str, payload: dict[str, Any], state: str
) -> None:
    done = hook(event, payload, db=st.db, env=env)
    assert done.returncode == 0, done.stderr
    agent = st.agent()
    assert agent.turn_state == state
    assert agent.turn_state_at is not None
    assert agent.session_id == SESSION


def test_other_notifications_leave_the_state_alone(st: Store, env: dict[str, str]) -> None:
    hook("stop", {"session_id": SESSION}, db=st.db, env=env)
    done = hook("notification", {"session_id": SESSION, "notification_type": "idle_prompt",
                                 "message": "Claude is waiting for your input"},
                db=st.db, env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert st.agent().turn_state == "idle"


def test_a_state_change_sequence_and_waiting_back_to_busy(st: Store, env: dict[str, str]) -> None:
    seen = []
    for event, payload in [
        ("session-start", {"source": "startup"}),
        ("user-prompt-submit", ups()),
        ("permission-request", {"tool_name": "Bash"}),
        ("post-tool-use", {"tool_name": "Bash"}),
        ("stop", {}),
        ("session-end", {}),
    ]:
        assert hook(event, payload, db=st.db, env=env).returncode == 0
        seen.append(st.agent().turn_state)
    assert seen == ["idle", "busy", "waiting", "busy", "idle", "gone"]


def test_a_compaction_session_start_is_not_idle(st: Store, env: dict[str, str]) -> None:
    hook("user-prompt-submit", ups(), db=st.db, env=env)
    hook("session-start", {"session_id": SESSION, "source": "compact"}, db=st.db, env=env)
    assert st.agent().turn_state == "busy"


def test_session_id_follows_interactive_agents_but_never_replaces_a_daemon_session(
    st: Store, env: dict[str, str]
) -> None:
    hook("user-prompt-submit", ups(session="first"), db=st.db, env=env)
    hook("user-prompt-submit", ups(session="after-clear"), db=st.db, env=env)
    assert st.agent("bob").session_id == "after-clear"
    hook("user-prompt-submit", ups(session="other"), db=st.db, env=env, agent="sam")
    assert st.agent("sam").session_id == "daemon-chosen"
    assert st.agent("sam").turn_state == "busy"
    hook("stop", {"session_id": "../../etc;rm -rf"}, db=st.db, env=env)
    assert st.agent("bob").session_id == "after-clear"  # not an id: ignored


def test_agent_comes_from_the_environment(st: Store, env: dict[str, str]) -> None:
    done = hook("stop", {}, db=st.db, env=env, agent=None, extra={"AGENTMAIL_AGENT": "bob"})
    assert done.returncode == 0
    assert st.agent().turn_state == "idle"


# -- delivery ----------------------------------------------------------------------------------
def test_user_prompt_submit_prints_mail_banner_first_and_acks_it(
    st: Store, env: dict[str, str]
) -> None:
    plain = st.send(subject="plain", body="normal body")
    urgent = st.send(subject="fire", body="urgent body", priority="urgent")
    done = hook("user-prompt-submit", ups(), db=st.db, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("PRIORITY: 1 message(s)")
    assert '"fire"' in lines[0]
    assert lines[1] == "[agentmail] 2 new messages for bob"
    assert done.stdout.index(urgent) < done.stdout.index(plain)
    assert lines[-1].startswith("[agentmail] end of 2 messages")
    assert st.unread() == []
    assert st.acked_by(plain) == "hook"
    again = hook("user-prompt-submit", ups(), db=st.db, env=env)
    assert again.returncode == 0 and again.stdout == ""


def test_session_start_delivers_too(st: Store, env: dict[str, str]) -> None:
    mid = st.send(body="waiting for you")
    done = hook("session-start", {"session_id": SESSION, "source": "resume"}, db=st.db, env=env)
    assert mid in done.stdout and "waiting for you" in done.stdout
    assert st.unread() == []


def test_a_daemon_started_turn_gets_no_mail_but_state_is_recorded(
    st: Store, env: dict[str, str]
) -> None:
    mid = st.send()
    quiet = {"AGENTMAIL_DELIVERY": "dlv-0000000000000abcdef"}
    for event, payload in [("session-start", {"source": "startup"}),
                           ("user-prompt-submit", ups()), ("post-tool-use", {})]:
        done = hook(event, payload, db=st.db, env=env, extra=quiet)
        assert done.returncode == 0 and done.stdout == "", event
    assert st.agent().turn_state == "busy"
    assert st.unread() == [mid]


def _context(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    return str(out["hookSpecificOutput"]["additionalContext"])


def _history(db: Path, agent: str = "bob") -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT delivery_id, outcome, message_ids FROM am_attempts "
                            "WHERE agent = ? ORDER BY id", (agent,)).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def test_post_tool_use_by_default_hands_urgent_and_high_mail_to_the_turn_under_a_delivery(
    st: Store, env: dict[str, str]
) -> None:
    normal = st.send(subject="can wait", body="NORMAL-BODY")
    urgent = st.send(subject="stop", body="URGENT-BODY", priority="urgent")
    high = st.send(subject="soon", body="HIGH-BODY", priority="high")
    done = hook("post-tool-use", {"session_id": SESSION, "tool_name": "Read"}, db=st.db, env=env)
    text = _context(done)
    assert "URGENT-BODY" in text and "HIGH-BODY" in text and "NORMAL-BODY" not in text
    assert text.index("URGENT-BODY") < text.index("HIGH-BODY")
    # the same framing as any delivery: its header names the delivery id, acked under it
    ((delivery_id, outcome, ids),) = _history(st.db)
    assert f"(delivery {delivery_id})" in text and outcome == "mid-turn"
    assert sorted(json.loads(ids)) == sorted([urgent, high])
    assert st.acked_by(urgent) == st.acked_by(high) == delivery_id
    assert st.unread() == [normal]  # normal mail waits for the turn's end
    again = hook("post-tool-use", {"tool_name": "Read"}, db=st.db, env=env)
    assert again.returncode == 0 and again.stdout == ""
    # a second urgent message goes at the very next tool call: no debounce for urgent mail
    later = st.send(subject="also", body="URGENT-2", priority="urgent")
    assert "URGENT-2" in _context(hook("post-tool-use", {}, db=st.db, env=env))
    assert later not in st.unread() and len(_history(st.db)) == 2


def test_post_tool_use_policy_none_all_and_the_agents_own_setting(
    st: Store, env: dict[str, str]
) -> None:
    urgent = st.send(subject="stop", body="URGENT-BODY", priority="urgent")
    off = {"AGENTMAILD_DELIVERY_MID_TURN_PRIORITY": "none"}
    done = hook("post-tool-use", {}, db=st.db, env=env, extra=off)
    assert done.returncode == 0 and done.stdout == "" and st.unread() == [urgent]
    # the agent's setting wins over the environment's
    st.store.update_agent("bob", {"settings": {"mid_turn_priority": "all"}})
    st.send(subject="fyi", body="NORMAL-BODY")
    text = _context(hook("post-tool-use", {}, db=st.db, env=env, extra=off))
    assert "URGENT-BODY" in text and "NORMAL-BODY" in text and st.unread() == []
    # normal mail mid-turn is debounced (AGENTMAILD_HOOKS_POST_TOOL_USE_DEBOUNCE_S) ...
    marker = st.db.parent / "hooks" / "bob.mid-turn"
    assert marker.exists()
    second = st.send(subject="too soon")
    done = hook("post-tool-use", {}, db=st.db, env=env)
    assert done.returncode == 0 and done.stdout == "" and st.unread() == [second]
    # ... urgent mail never is, and the normal one stays for later
    third = st.send(subject="now", body="URGENT-3", priority="urgent")
    text = _context(hook("post-tool-use", {}, db=st.db, env=env))
    assert "URGENT-3" in text and second not in text and st.unread() == [second]
    past = time.time() - 31
    os.utime(marker, (past, past))
    assert second in _context(hook("post-tool-use", {}, db=st.db, env=env))
    assert third not in st.unread() and st.unread() == []
    st.store.update_agent("bob", {"settings": {"mid_turn_priority": "none"}})
    st.send(subject="stop", priority="urgent")
    assert hook("post-tool-use", {}, db=st.db, env=env).stdout == ""


def test_post_tool_use_in_a_daemon_turn_skips_mail_in_flight_and_delivers_the_rest(
    st: Store, env: dict[str, str]
) -> None:
    """AGENTMAIL_DELIVERY set: the turn's own batch is the daemon's; urgent mail sent since
    goes in mid-turn, and the daemon's claim never takes it again."""
    carried = st.send(to="sam", subject="the job", priority="urgent")
    batch = st.store.claim("sam", max_messages=10, max_chars=10_000, lease_s=300,
                           now=time.time())
    assert batch is not None and batch.message_ids == (carried,)
    urgent = st.send(to="sam", subject="stop", body="URGENT-MID", priority="urgent")
    turn = {"AGENTMAIL_DELIVERY": batch.delivery_id}
    text = _context(hook("post-tool-use", {}, db=st.db, env=env, agent="sam", extra=turn))
    assert "URGENT-MID" in text and carried not in text
    st.store.ack_delivery(batch.delivery_id, now=time.time())
    assert st.store.claim("sam", max_messages=10, max_chars=10_000, lease_s=300,
                          now=time.time()) is None
    assert st.unread("sam") == [] and st.acked_by(urgent) != batch.delivery_id


def test_post_tool_use_without_mail_prints_nothing_and_keeps_no_marker(
    st: Store, env: dict[str, str]
) -> None:
    done = hook("post-tool-use", {"tool_name": "Read"}, db=st.db, env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert not (st.db.parent / "hooks" / "bob.mid-turn").exists()


def test_post_tool_use_in_a_subagent_delivers_nothing(st: Store, env: dict[str, str]) -> None:
    mid = st.send(priority="urgent")
    payload = {"session_id": SESSION, "agent_id": "a1b2", "agent_type": "Explore",
               "tool_name": "Read", "tool_response": {"content": "x" * 5000}}
    done = hook("post-tool-use", payload, db=st.db, env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert st.unread() == [mid]
    # The words "agent_id" inside a tool's output do not make it a subagent's call.
    payload = {"session_id": SESSION, "tool_name": "Read",
               "tool_response": {"content": 'the field "agent_id": is set by subagents'}}
    done = hook("post-tool-use", payload, db=st.db, env=env)
    assert mid in done.stdout


def _drain(st: Store, env: dict[str, str], event: str = "user-prompt-submit") -> list[str]:
    """Run the hook until the inbox is empty; returns every delivered output."""
    outputs: list[str] = []
    for _ in range(100):
        if not st.unread():
            return outputs
        if event == "post-tool-use":
            extra = {"AGENTMAILD_HOOKS_POST_TOOL_USE_DEBOUNCE_S": "0",
                     "AGENTMAILD_DELIVERY_MID_TURN_PRIORITY": "all"}
            done = hook(event, {}, db=st.db, env=env, extra=extra)
        else:
            done = hook(event, ups(), db=st.db, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout, "unread mail but nothing delivered"
        outputs.append(done.stdout)
    raise AssertionError("inbox never drained")


def test_output_stays_under_ten_thousand_characters_and_the_rest_waits(
    st: Store, env: dict[str, str]
) -> None:
    ids = [st.send(subject=f"m{i}", body=f"{i:03d} " + "x" * 996) for i in range(30)]
    first = hook("user-prompt-submit", ups(), db=st.db, env=env)
    assert 0 < len(first.stdout) < 10_000
    assert "more unread message(s) wait" in first.stdout
    left = st.unread()
    assert 0 < len(left) < 30
    outputs = [first.stdout, *_drain(st, env)]
    assert all(utf16_len(o) < 10_000 for o in outputs)
    delivered = [i for i in ids for o in outputs if "--- message" in o and f": {i} ---" in o]
    assert sorted(delivered) == sorted(ids)  # every message exactly once


def test_many_tiny_messages_fit_the_cap(st: Store, env: dict[str, str]) -> None:
    for i in range(150):
        st.send(subject=f"t{i}", body="y")
    outputs = _drain(st, env)
    assert len(outputs) > 1
    assert all(utf16_len(o) < 10_000 for o in outputs)


def test_the_cap_counts_json_escapes_and_utf16_units(st: Store, env: dict[str, str]) -> None:
    for i in range(6):
        st.send(subject=f"q{i}", body='"\\\n' * 600)
    for i in range(3):
        st.send(subject=f"e{i}", body="\U0001f600" * 3000)
    outputs = _drain(st, env, "post-tool-use")
    for out in outputs:
        assert utf16_len(out) < 10_000
        assert json.loads(out)["hookSpecificOutput"]["additionalContext"]


def test_one_oversized_message_is_cut_and_points_at_read(st: Store, env: dict[str, str]) -> None:
    payload = {"taskId": "t1", "branch": "b", "exitCode": 0,
               "filesModified": [f"src/module_{i:04d}/file.py" for i in range(550)]}
    mid = st.send(subject="done", body="z" * 20_000, type="worker_done",
                  payload=json.dumps(payload))
    done = hook("user-prompt-submit", ups(), db=st.db, env=env)
    assert 0 < utf16_len(done.stdout) < 10_000
    assert f"agentmaild read {mid}" in done.stdout
    assert st.unread() == []


def test_output_limit_env_lowers_the_cap(st: Store, env: dict[str, str]) -> None:
    for i in range(10):
        st.send(subject=f"m{i}", body="w" * 900)
    done = hook("user-prompt-submit", ups(), db=st.db, env=env,
                extra={"AGENTMAILD_HOOKS_OUTPUT_MAX_CHARS": "4000"})
    assert 0 < len(done.stdout) < 4000


# -- tmux delivery verification ------------------------------------------------------------------
def seen(db: Path, delivery_id: str) -> bool:
    """What the tmux channel asks the store's port: was this batch's header seen in a prompt?"""
    port = open_store_port(StoreLocation.of(db))
    try:
        return port.delivery_seen(delivery_id)
    finally:
        port.close()


def test_a_pasted_batch_is_recorded_as_seen_and_not_printed_again(
    st: Store, env: dict[str, str]
) -> None:
    st.send(subject="pasted", body="via tmux")
    batch = st.store.claim("bob", max_messages=10, max_chars=10_000, lease_s=60, now=time.time())
    assert batch is not None
    other = st.send(subject="arrived later")
    prompt = render_batch(batch.messages, agent="bob", delivery_id=batch.delivery_id)
    assert not seen(st.db, batch.delivery_id)
    done = hook("user-prompt-submit", ups(prompt=prompt), db=st.db, env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert seen(st.db, batch.delivery_id)
    with sqlite3.connect(st.db) as conn:
        row = conn.execute("SELECT agent, session_id FROM am_prompt_seen").fetchone()
    assert row == ("bob", SESSION)
    assert st.agent().turn_state == "busy"
    assert sorted(st.unread()) == sorted([*(m.id for m in batch.messages), other])
    # The next prompt gets the later mail, never the batch the daemon still has in flight.
    done = hook("user-prompt-submit", ups(), db=st.db, env=env)
    assert other in done.stdout
    assert all(m.id not in done.stdout for m in batch.messages)


def test_a_redelivery_header_is_recognised_too(st: Store, env: dict[str, str]) -> None:
    st.send()
    batch = st.store.claim("bob", max_messages=10, max_chars=10_000, lease_s=60, now=time.time())
    assert batch is not None
    prompt = render_batch(batch.messages, agent="bob", delivery_id=batch.delivery_id, attempt=2,
                          banner="PRIORITY: 1 message(s) need attention first: x")
    hook("user-prompt-submit", ups(prompt=prompt), db=st.db, env=env)
    assert seen(st.db, batch.delivery_id)


def test_a_store_from_before_the_table_is_upgraded_by_the_hook(
    st: Store, env: dict[str, str]
) -> None:
    with sqlite3.connect(st.db) as conn:
        conn.execute("DROP TABLE am_prompt_seen")
        conn.execute("PRAGMA user_version = 1")  # as a version-1 store was
        conn.commit()
    prompt = "[agentmail] 1 new message for bob (delivery dlv-0000000000000abcdef)\n..."
    assert hook("user-prompt-submit", ups(prompt=prompt), db=st.db, env=env).returncode == 0
    assert seen(st.db, "dlv-0000000000000abcdef")


# -- the poll-loop guard -------------------------------------------------------------------------
def _bash(command: str) -> dict[str, Any]:
    return {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command, "description": "x"}, "tool_use_id": "toolu_1"}


def test_poll_loop_is_blocked_with_the_reason(st: Store, env: dict[str, str]) -> None:
    loop = "while true; do agentmaild check --agent x; sleep 5; done"
    done = hook("pre-tool-use", _bash(loop), db=st.db, env=env)
    assert done.returncode == 2
    assert REASON in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    "command",
    ["agentmaild check --agent x", "agentmaild inbox --agent x --unread", "sleep 5 && ls"],
)
def test_single_commands_are_allowed(st: Store, env: dict[str, str], command: str) -> None:
    done = hook("pre-tool-use", _bash(command), db=st.db, env=env)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_the_guard_only_looks_at_bash(st: Store, env: dict[str, str]) -> None:
    payload = {**_bash("while true; do agentmaild check; sleep 1; done"), "tool_name": "Write"}
    assert hook("pre-tool-use", payload, db=st.db, env=env).returncode == 0


def test_the_guard_works_without_an_agent_or_a_store(tmp_path: Path, env: dict[str, str]) -> None:
    loop = "until agentmaild inbox | grep -q .; do sleep 2; done"
    done = hook("pre-tool-use", _bash(loop), db=tmp_path / "none.db", env=env, agent=None)
    assert done.returncode == 2 and REASON in done.stderr


# -- never breaking the session -----------------------------------------------------------------
@pytest.mark.parametrize("event", sorted(hooks.EVENTS))
@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe", b'"text"', b""])
def test_malformed_stdin_is_treated_as_empty(
    st: Store, env: dict[str, str], event: str, raw: bytes
) -> None:
    done = hook(event, raw=raw, db=st.db, env=env)
    assert done.returncode == 0
    assert done.stdout == "" and done.stderr == ""


def test_malformed_stdin_still_gets_the_mail(st: Store, env: dict[str, str]) -> None:
    mid = st.send()
    done = hook("user-prompt-submit", raw=b"{oops", db=st.db, env=env)
    assert done.returncode == 0 and mid in done.stdout
    assert st.agent().turn_state == "busy"


def test_a_directory_as_store_logs_and_exits_zero(tmp_path: Path, env: dict[str, str]) -> None:
    bad = tmp_path / "proj" / "mail.db"
    bad.mkdir(parents=True)
    done = hook("user-prompt-submit", ups(), db=bad, env=env)
    assert done.returncode == 0
    assert done.stdout == "" and done.stderr == ""
    log = (tmp_path / "proj" / "logs" / "hooks.log").read_text()
    assert "hook.failed" in log and "user-prompt-submit" in log
    assert len(log.splitlines()) == 1 and "StoreError" in log and "is a directory" in log


def test_a_corrupt_store_logs_and_exits_zero(tmp_path: Path, env: dict[str, str]) -> None:
    bad = tmp_path / "proj" / "mail.db"
    bad.parent.mkdir()
    bad.write_bytes(b"this is not a database" * 100)
    for event in ("stop", "user-prompt-submit", "post-tool-use"):
        done = hook(event, ups(), db=bad, env=env)
        assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    lines = (tmp_path / "proj" / "logs" / "hooks.log").read_text().splitlines()
    assert len(lines) == 3 and all("hook.failed" in line for line in lines)
    assert bad.read_bytes() == b"this is not a database" * 100


def test_an_unwritable_store_dir_logs_to_xdg_state(tmp_path: Path, env: dict[str, str]) -> None:
    bad = tmp_path / "proj" / "mail.db"
    bad.parent.mkdir()
    bad.write_bytes(b"garbage" * 100)
    (tmp_path / "proj" / "logs").write_text("a file where the log dir would go")
    done = hook("stop", {}, db=bad, env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert "hook.failed" in (tmp_path / "state" / "agentmaild" / "hooks.log").read_text()


def test_an_invalid_agent_name_is_an_internal_error(st: Store, env: dict[str, str]) -> None:
    done = hook("stop", {}, db=st.db, env=env, agent="../evil")
    assert done.returncode == 0 and done.stdout == ""
    assert "ValidationError" in (st.db.parent / "logs" / "hooks.log").read_text()


def test_unknown_event_and_missing_store_are_quiet(tmp_path: Path, env: dict[str, str]) -> None:
    done = hook("pre-compact", {}, db=tmp_path / "x.db", env=env)
    assert done.returncode == 0 and done.stdout == ""
    done = hook("user-prompt-submit", ups(), db=tmp_path / "absent" / "mail.db", env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert not (tmp_path / "absent").exists()


def test_stop_can_deliver_by_blocking_a_capped_number_of_times(
    st: Store, env: dict[str, str]
) -> None:
    capped = {"AGENTMAILD_HOOKS_STOP_BLOCK_MAX": "1"}
    hook("user-prompt-submit", ups(), db=st.db, env=env)
    first = st.send(subject="end of turn")
    done = hook("stop", {"stop_hook_active": False}, db=st.db, env=env, extra=capped)
    out = json.loads(done.stdout)
    assert out["decision"] == "block" and first in out["reason"]
    assert st.agent().turn_state == "busy"
    second = st.send(subject="again")
    done = hook("stop", {"stop_hook_active": True}, db=st.db, env=env, extra=capped)
    assert done.stdout == ""
    assert st.agent().turn_state == "idle"
    assert st.unread() == [second]
    # Default: Stop never blocks.
    done = hook("stop", {"stop_hook_active": False}, db=st.db, env=env)
    assert done.stdout == "" and st.unread() == [second]


def test_stop_goes_idle_when_all_mail_is_in_flight_to_the_daemon(
    st: Store, env: dict[str, str]
) -> None:
    st.send()
    assert st.store.claim("bob", max_messages=10, max_chars=10_000, lease_s=60, now=time.time())
    hook("user-prompt-submit", ups(), db=st.db, env=env)
    done = hook("stop", {"stop_hook_active": False}, db=st.db, env=env,
                extra={"AGENTMAILD_HOOKS_STOP_BLOCK_MAX": "3"})
    assert done.returncode == 0 and done.stdout == ""
    assert st.agent().turn_state == "idle"


def test_the_hook_path_imports_no_heavy_modules(st: Store, env: dict[str, str]) -> None:
    st.send()
    argv = [sys.executable, "-X", "importtime", "-m", "agentmaild", "hook", "user-prompt-submit",
            "--agent", "bob", "--db", str(st.db)]
    done = subprocess.run(argv, input=json.dumps(ups()).encode(), capture_output=True, env=env,
                          timeout=60, check=True)
    modules = {line.split("|")[-1].strip() for line in done.stderr.decode().splitlines()
               if line.startswith("import time:")}
    heavy = {"typer", "click", "structlog", "asyncio", "anyio", "dataclasses", "aiosqlite",
             "agentmaild.models", "agentmaild.config", "agentmaild.store.sqlite", "psycopg",
             "psycopg_pool", "agentmaild.store.postgres", "agentmaild.store.port_postgres"}
    assert not heavy & modules
    assert b"[agentmail] 1 new message for bob" in done.stdout


# -- install / uninstall -------------------------------------------------------------------------
EXE = "/opt/agent mail/bin/agentmaild"
USER_SETTINGS: dict[str, Any] = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "env": {"FOO": "1"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                      "command": "~/bin/audit.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": "save-state"}]}],
    },
}


def _settings(root: Path) -> Path:
    return root / ".claude" / "settings.local.json"


def _write(root: Path, data: Any) -> Path:
    path = _settings(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def _commands(settings: dict[str, Any]) -> dict[str, list[str]]:
    return {event: [h["command"] for g in groups for h in g["hooks"]]
            for event, groups in settings.get("hooks", {}).items()}


def test_install_merges_keeping_the_users_hooks_and_settings(tmp_path: Path) -> None:
    path = _write(tmp_path, USER_SETTINGS)
    result = hooks_install.install_hooks(tmp_path, "bob", tmp_path / "s" / "mail.db", EXE)
    assert result["changed"] and result["path"] == str(path)
    settings = json.loads(path.read_text())
    assert settings["permissions"] == USER_SETTINGS["permissions"]
    assert settings["env"] == USER_SETTINGS["env"]
    cmds = _commands(settings)
    assert cmds["PreToolUse"][0] == "~/bin/audit.sh"
    assert cmds["Stop"][0] == "notify-send done"
    assert cmds["PreCompact"] == ["save-state"]
    prefix = shlex.quote(EXE) + " hook "
    for event, _spelled, _matcher in hooks_install.HOOK_SPECS:
        ours = [c for c in cmds[event] if c.startswith(prefix)]
        assert len(ours) == 1, event
        assert shlex.split(ours[0])[1:] == ["hook", _spelled, "--agent", "bob",
                                             "--db", str(tmp_path / "s" / "mail.db")]
    bash = settings["hooks"]["PreToolUse"][-1]
    assert bash["matcher"] == "Bash|mcp__agentmail__.*"


def test_install_is_idempotent_and_reinstall_replaces_ours(tmp_path: Path) -> None:
    path = _write(tmp_path, USER_SETTINGS)
    hooks_install.install_hooks(tmp_path, "bob", None, EXE)
    once = path.read_bytes()
    assert not hooks_install.install_hooks(tmp_path, "bob", None, EXE)["changed"]
    assert path.read_bytes() == once
    hooks_install.install_hooks(tmp_path, "carol", None, EXE)
    cmds = [c for cs in _commands(json.loads(path.read_text())).values() for c in cs]
    assert not any("bob" in c for c in cmds)
    assert sum("carol" in c for c in cmds) == len(hooks_install.HOOK_SPECS)


def test_uninstall_removes_only_ours(tmp_path: Path) -> None:
    path = _write(tmp_path, USER_SETTINGS)
    hooks_install.install_hooks(tmp_path, "bob", None, EXE)
    result = hooks_install.uninstall_hooks(tmp_path, EXE)
    assert result["removed"] == len(hooks_install.HOOK_SPECS)
    assert json.loads(path.read_text()) == USER_SETTINGS
    assert hooks_install.uninstall_hooks(tmp_path, EXE)["removed"] == 0


def test_uninstall_finds_ours_after_the_executable_moved(tmp_path: Path) -> None:
    path = _write(tmp_path, USER_SETTINGS)
    hooks_install.install_hooks(tmp_path, "bob", None, "/old/venv/bin/agentmaild")
    hooks_install.uninstall_hooks(tmp_path)
    assert json.loads(path.read_text()) == USER_SETTINGS


def test_install_into_nothing_and_uninstall_leaves_nothing(tmp_path: Path) -> None:
    result = hooks_install.install_hooks(tmp_path, "bob", None, EXE)
    assert result["changed"]
    assert set(json.loads(_settings(tmp_path).read_text())["hooks"]) == {
        e for e, _, _ in hooks_install.HOOK_SPECS
    }
    hooks_install.uninstall_hooks(tmp_path, EXE)
    assert not _settings(tmp_path).exists()
    assert not (tmp_path / ".claude").exists()


def test_a_user_hook_sharing_our_group_is_kept(tmp_path: Path) -> None:
    hooks_install.install_hooks(tmp_path, "bob", None, EXE)
    path = _settings(tmp_path)
    settings = json.loads(path.read_text())
    settings["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "mine"})
    path.write_text(json.dumps(settings))
    hooks_install.uninstall_hooks(tmp_path, EXE)
    assert json.loads(path.read_text()) == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}
    }


@pytest.mark.parametrize(
    "text",
    ['{"hooks": {', "[]", '{"hooks": []}', '{"hooks": {"Stop": {"oops": 1}}}'],
)
def test_a_malformed_settings_file_is_an_error_and_left_untouched(
    tmp_path: Path, text: str
) -> None:
    path = _settings(tmp_path)
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"settings\.local\.json"):
        hooks_install.install_hooks(tmp_path, "bob", None, EXE)
    assert path.read_text() == text
    if text.startswith('{"hooks": {"Stop"') or text == '{"hooks": []}':
        hooks_install.uninstall_hooks(tmp_path, EXE)  # nothing of ours to remove: not an error
    else:
        with pytest.raises(ConfigError):
            hooks_install.uninstall_hooks(tmp_path, EXE)
    assert path.read_text() == text
    assert [p.name for p in path.parent.iterdir()] == ["settings.local.json"]


def test_the_installed_command_runs_through_a_shell(st: Store, env: dict[str, str],
                                                    tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "agentmaild"
    assert exe.exists(), "the console script is installed by `make test` (pip install -e)"
    hooks_install.install_hooks(tmp_path / "proj", "bob", st.db, str(exe))
    settings = json.loads(_settings(tmp_path / "proj").read_text())
    command = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    mid = st.send(body="through sh")
    done = subprocess.run(["sh", "-c", command], input=json.dumps(ups()).encode(),
                          capture_output=True, env=env, timeout=60, check=False)
    assert done.returncode == 0 and mid.encode() in done.stdout


def test_cli_install_and_uninstall(tmp_path: Path) -> None:
    app = typer.Typer()
    cli_hooks.register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["hooks", "install", "--agent", "bob", "--dir", str(tmp_path),
                                 "--exe", EXE, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["changed"] is True
    result = runner.invoke(app, ["hooks", "install", "--agent", "bob", "--dir", str(tmp_path),
                                 "--exe", EXE])
    assert "already installed" in result.output
    result = runner.invoke(app, ["hooks", "uninstall", "--dir", str(tmp_path), "--json"])
    assert json.loads(result.output)["removed"] == len(hooks_install.HOOK_SPECS)
    _settings(tmp_path).parent.mkdir(exist_ok=True)
    _settings(tmp_path).write_text("{broken")
    result = runner.invoke(app, ["hooks", "install", "--agent", "bob", "--dir", str(tmp_path),
                                 "--exe", EXE, "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["code"] == "config"
    assert _settings(tmp_path).read_text() == "{broken"


def test_cli_hook_command_runs_the_same_hook(st: Store) -> None:
    app = typer.Typer()
    cli_hooks.register(app)
    runner = CliRunner()
    loop = json.dumps(_bash("while true; do agentmaild check; sleep 5; done"))
    result = runner.invoke(app, ["hook", "pre-tool-use", "--db", str(st.db)], input=loop)
    assert result.exit_code == 2
    mid = st.send()
    result = runner.invoke(app, ["hook", "UserPromptSubmit", "--agent", "bob", "--db", str(st.db)],
                           input=json.dumps(ups()))
    assert result.exit_code == 0 and mid in result.output
    assert st.agent().turn_state == "busy"


# -- subagents and the MCP tools -----------------------------------------------------------------
def _mcp_call(**extra: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "hook_event_name": "PreToolUse",
            "tool_name": "mcp__agentmail__send", "tool_input": {"to": "x", "subject": "s"},
            "tool_use_id": "toolu_2", **extra}  # fmt: skip


def test_a_subagents_call_of_the_mail_tools_is_refused(st: Store, env: dict[str, str]) -> None:
    done = hook("pre-tool-use", _mcp_call(agent_id="a1b2c3", agent_type="general-purpose"),
                db=st.db, env=env)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert "refused to subagents" in done.stderr and "as bob," in done.stderr


def test_the_agents_own_call_and_other_subagent_tools_pass(st: Store, env: dict[str, str]) -> None:
    assert hook("pre-tool-use", _mcp_call(), db=st.db, env=env).returncode == 0
    other = _mcp_call(agent_id="a1b2c3", tool_name="mcp__github__create_issue")
    assert hook("pre-tool-use", other, db=st.db, env=env).returncode == 0
