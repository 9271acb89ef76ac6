"""Mid-turn delivery to the REAL Claude Code TUI in a tmux pane (channel tmux, agentmaild's hooks
installed in the project), fed by a real ``agentmaild serve``; the model stand-in holds one long
turn, started by a person's prompt, that calls a tool about every second.

Urgent mail sent mid-turn is in the model's next request of that same turn (the PostToolUse hook),
acked once as ``mid-turn``; normal mail sent at the same moment is typed in by the daemon only
once the turn has ended, and reaches the model as the next turn's prompt.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import (
    TmuxServer,
    claude_binary,
    claude_env,
    composer_idle,
    isolated_home,
)
from tests.support.daemon import FAST, DaemonProc
from tests.support.midturn_rig import AGENT, LongTurn, install_hooks
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.claude, pytest.mark.tmux, pytest.mark.timeout(240)]


def test_urgent_mail_enters_the_tuis_running_turn_and_normal_mail_is_typed_after(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / "notes.txt").write_text("nothing to see\n")
    home = isolated_home(tmp_path, project)
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="lead", capability="lead"))
    turn = LongTurn(project / "notes.txt")
    with AnthropicStub(turn) as stub:
        env = claude_env(home, stub.base_url, extra={"AGENTMAIL_DB": str(db)})
        tmux = TmuxServer(env)
        store.add_agent(Agent(name=AGENT, capability="builder", channel="tmux",
                              tmux_target="agent:0.0", tmux_socket=tmux.name,
                              settings={"home": str(home)}))  # fmt: skip
        tool_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL")}
        install_hooks(db, tool_env, project)
        daemon = DaemonProc(db, tmp_path, FAST)
        try:
            target = tmux.new_session("agent", [claude_binary()], cwd=project)
            daemon.start()
            wait_for(lambda: composer_idle(tmux.capture(target)), 30, "idle composer")
            tmux.paste(target, "LONG-JOB: work until told otherwise")
            wait_for(lambda: "LONG-JOB" in tmux.capture(target), 20, "typed prompt")
            tmux.send_keys(target, "Enter")
            stub.wait_for_count(lambda r: r.is_messages and "LONG-JOB" in r.all_text()
                                and json.dumps(r.body).count('"tool_result"') >= 2, 1,
                                timeout=90)  # fmt: skip
            mailer = Mailer(store)
            sent = time.monotonic()
            urgent = mailer.send(sender="lead", to=AGENT, subject="stop", body="URGENT-MID",
                                 priority="urgent").ids[0]  # fmt: skip
            normal = mailer.send(sender="lead", to=AGENT, subject="fyi",
                                 body="NORMAL-LATER").ids[0]  # fmt: skip
            seen = stub.wait_for("URGENT-MID", timeout=60)
            print(f"urgent mail in the TUI's turn {seen.received_at - sent:.2f}s after the send")
            assert "LONG-JOB" in seen.all_text() and "NORMAL-LATER" not in seen.all_text()
            attempts = [(a.outcome, a.message_ids) for a in store.list_attempts(agent=AGENT)]
            assert attempts == [("mid-turn", (urgent,))]
            # two more tool calls: the turn goes on, the normal mail still waits
            calls = max(json.dumps(r.body).count('"tool_result"')
                        for r in stub.messages_requests() if "URGENT-MID" in r.all_text())
            stub.wait_for_count(lambda r: r.is_messages and "URGENT-MID" in r.all_text()
                                and json.dumps(r.body).count('"tool_result"') >= calls + 2, 1,
                                timeout=60)  # fmt: skip
            assert not any("NORMAL-LATER" in r.all_text() for r in stub.messages_requests())
            assert not store.get_message(normal).read  # type: ignore[union-attr]
            turn.end()
            after = stub.wait_for("NORMAL-LATER", timeout=90, last_user=True)
            assert "LONG-JOB" not in after.last_user_text()  # typed in as the next prompt
            wait_for(lambda: store.get_message(normal).read, 30,  # type: ignore[union-attr]
                     "the daemon's ack")  # fmt: skip
            assert all(r.all_text().count(f"message 1/1: {urgent}") <= 1
                       for r in stub.messages_requests())  # fmt: skip
        finally:
            turn.end()
            if daemon.alive():
                daemon.stop()
            tmux.kill()
            store.close()
