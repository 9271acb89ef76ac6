"""Gemini CLI's AfterTool mid-turn mail (``hooks.midturn`` + ``hooks.deferred``) on either store,
through the real hook entry point in a child process: the batch is printed once under its own
delivery, stays claimed and unread across later tool calls, and AfterAgent acks it (history
``mid-turn``) only when the main session's transcript holds its header. Printed into a
subagent's tool result (Gemini records that chat in a file of its own), or in a turn that never
reached AfterAgent, it is released: the next prompt prints it again, and only that prompt's
AfterAgent reads it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from tests.support.store_targets import StoreTarget

SESSION = "7d1c7f3e-2b1a-4c55-9d0e-5f6a7b8c9d0e"


def hook(target: StoreTarget, event: str, payload: dict[str, Any]) -> str:
    argv = [sys.executable, "-m", "agentmaild", "hook", event, "--db", target.target,
            "--agent", "gem", "--vendor", "gemini"]  # fmt: skip
    stdin = json.dumps({"session_id": SESSION, **payload}).encode()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=target.env, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    return done.stdout.decode()


AFTER_TOOL = {"hook_event_name": "AfterTool", "tool_name": "read_file", "tool_input": {},
              "tool_response": {"llmContent": "x"}}  # fmt: skip


def after_tool(target: StoreTarget) -> str:
    return hook(target, "post-tool-use", AFTER_TOOL)


def test_after_tool_mail_is_acked_at_after_agent_only_when_the_main_transcript_has_it(
    store_target: StoreTarget, tmp_path: Path
) -> None:
    store = store_target.open()
    try:
        store.add_agent(Agent(name="gem", capability="builder"))
        mailer = Mailer(store)
        normal = mailer.send(sender="lead", to="gem", subject="fyi", body="NORMAL").ids[0]
        urgent = mailer.send(sender="lead", to="gem", subject="stop", body="URGENT",
                             priority="urgent").ids[0]  # fmt: skip
        printed = json.loads(after_tool(store_target))["hookSpecificOutput"]
        assert printed["hookEventName"] == "AfterTool"
        text = printed["additionalContext"]
        assert "URGENT" in text and "NORMAL" not in text
        held = store.get_message(urgent)
        assert held is not None and not held.read and held.delivery_id is not None
        header = f"(delivery {held.delivery_id})"
        assert header in text
        assert after_tool(store_target) == ""  # a turn that goes on never gets it twice

        # A subagent's tool result took it: the main transcript lacks the header -> released
        main = tmp_path / "session.jsonl"
        main.write_text('{"type":"user","content":"LONGJOB"}\n')
        hook(store_target, "stop", {"hook_event_name": "AfterAgent", "transcript_path": str(main)})
        back = store.get_message(urgent)
        assert back is not None and not back.read
        assert store.list_attempts(agent="gem") == []
        # the next prompt prints it again (normal mail too: the turn has ended)
        again = hook(store_target, "user-prompt-submit", {"prompt": "NEXT"})
        assert "URGENT" in again and "NORMAL" in again
        hook(store_target, "stop", {"hook_event_name": "AfterAgent", "transcript_path": str(main)})
        read = [store.get_message(i) for i in (urgent, normal)]
        assert all(m is not None and m.read for m in read)

        # The main session's transcript holds the header: acked once, as mid-turn
        later = mailer.send(sender="lead", to="gem", subject="stop2", body="URGENT2",
                            priority="high").ids[0]  # fmt: skip
        text = json.loads(after_tool(store_target))["hookSpecificOutput"]["additionalContext"]
        second = store.get_message(later)
        assert second is not None and second.delivery_id is not None
        main.write_text(json.dumps({"type": "tool", "content": text}) + "\n")
        hook(store_target, "stop", {"hook_event_name": "AfterAgent", "transcript_path": str(main)})
        done = store.get_message(later)
        assert done is not None and done.read and done.acked_by == second.delivery_id
        history = [(a.outcome, a.message_ids) for a in store.list_attempts(agent="gem")]
        assert history == [("mid-turn", (later,))]
    finally:
        store.close()


def test_a_held_batch_the_daemon_took_over_is_never_released_by_the_hook(
    store_target: StoreTarget,
) -> None:
    """The held batch's lease ran out (a Gemini process killed mid-turn): the daemon redelivers
    it under its id; a later BeforeAgent of the hook leaves that redelivery alone."""
    store = store_target.open()
    try:
        store.add_agent(Agent(name="gem", capability="builder"))
        urgent = Mailer(store).send(sender="lead", to="gem", subject="stop", body="URGENT",
                                    priority="urgent").ids[0]  # fmt: skip
        assert "URGENT" in after_tool(store_target)
        held = store.get_message(urgent)
        assert held is not None and held.delivery_id is not None
        later = time.time() + 301.0
        assert store.reap_expired(now=later) == [(held.delivery_id, "gem")]
        batch = store.claim("gem", max_messages=10, max_chars=10_000, lease_s=300, now=later)
        assert batch is not None and batch.delivery_id == held.delivery_id and batch.attempt == 2
        printed = hook(store_target, "user-prompt-submit", {"prompt": "NEXT"})
        assert "URGENT" not in printed  # the daemon's batch in flight: not the hook's to print
        still = store.get_message(urgent)
        assert still is not None and still.delivery_id == held.delivery_id and not still.read
        state = store_target.query(
            f"SELECT state FROM am_deliveries WHERE id = '{held.delivery_id}'")  # fmt: skip
        assert state == [{"state": "claimed"}]
    finally:
        store.close()


def test_a_prompt_after_a_turn_without_after_agent_prints_the_held_batch_again(
    store_target: StoreTarget, tmp_path: Path
) -> None:
    """The turn that printed the batch failed (no AfterAgent): the next BeforeAgent releases it
    and prints it, held again until that turn's AfterAgent reads it (by the hook, once)."""
    store = store_target.open()
    try:
        store.add_agent(Agent(name="gem", capability="builder"))
        urgent = Mailer(store).send(sender="lead", to="gem", subject="stop", body="URGENT",
                                    priority="urgent").ids[0]  # fmt: skip
        assert "URGENT" in after_tool(store_target)
        again = hook(store_target, "user-prompt-submit", {"prompt": "RETRY"})
        assert json.loads(again)["hookSpecificOutput"]["additionalContext"].count("URGENT") == 1
        assert after_tool(store_target) == ""  # the retried turn goes on: not printed twice
        waiting = store.get_message(urgent)
        assert waiting is not None and not waiting.read
        main = tmp_path / "session.jsonl"
        main.write_text("{}\n")
        hook(store_target, "stop", {"hook_event_name": "AfterAgent", "transcript_path": str(main)})
        read = store.get_message(urgent)
        assert read is not None and read.read
        assert store.list_attempts(agent="gem") == []  # read by the prompt's hook, not mid-turn
    finally:
        store.close()
