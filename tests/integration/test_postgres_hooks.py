"""The Claude Code hooks on a PostgreSQL store (`agentmaild hook … --db postgresql://…`): the
prompt and session-start hooks deliver the agent's unread mail once, mark it read and record the
turn state. Real server, the real hook entry point in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentmaild.models import Agent
from agentmaild.store.postgres import PostgresMailStore
from tests.support.daemon import FAST, base_env


def hook(env: dict[str, str], dsn: str, event: str, payload: dict[str, Any]) -> str:
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


def test_prompt_and_session_hooks_deliver_on_postgres(tmp_path: Path, pg_dsn: str) -> None:
    env = base_env(tmp_path, {"XDG_STATE_HOME": str(tmp_path / "state")}, FAST)
    store = PostgresMailStore(pg_dsn)
    try:
        store.add_agent(Agent(name="bob", capability="builder", channel="tmux",
                              tmux_target="w:0.0"))
        first, second = send(env, pg_dsn, "first one"), send(env, pg_dsn, "second one")
        out = hook(env, pg_dsn, "UserPromptSubmit", {"prompt": "go on"})
        assert "first one" in out and "second one" in out and "body of second one" in out
        assert hook(env, pg_dsn, "UserPromptSubmit", {"prompt": "again"}) == ""  # once only
        read = {m.id: m.read for m in store.list_messages(to_agent="bob")}
        assert read == {first: True, second: True}
        bob = store.get_agent("bob")
        assert bob is not None and bob.turn_state == "busy"

        third = send(env, pg_dsn, "after a restart")
        out = hook(env, pg_dsn, "SessionStart", {"source": "startup"})
        assert "after a restart" in out and "first one" not in out
        bob = store.get_agent("bob")
        assert bob is not None and bob.turn_state == "idle"
        assert {m.id: m.read for m in store.list_messages(to_agent="bob")}[third] is True
    finally:
        store.close()


def test_a_vendor_hook_gets_its_json_shape_on_postgres(tmp_path: Path, pg_dsn: str) -> None:
    env = base_env(tmp_path, {"XDG_STATE_HOME": str(tmp_path / "state")}, FAST)
    store = PostgresMailStore(pg_dsn)
    try:
        store.add_agent(Agent(name="bob", capability="builder"))
        mid = send(env, pg_dsn, "for gemini")
        done = subprocess.run(
            [sys.executable, "-m", "agentmaild", "hook", "user-prompt-submit", "--db", pg_dsn,
             "--agent", "bob", "--vendor", "gemini"],
            input=b'{"prompt": "go on"}', capture_output=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "BeforeAgent"
        assert mid in out["additionalContext"] and "body of for gemini" in out["additionalContext"]
    finally:
        store.close()
