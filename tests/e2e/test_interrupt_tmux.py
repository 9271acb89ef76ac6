"""An interrupt on the tmux channel with the REAL Claude Code TUI in a tmux pane, fed by a real
``agentmaild serve`` (the rig of test_claude_tmux): a turn held at the model is stopped by the
TUI's interrupt key, verified on the screen; the interrupt's mail opens the next turn, in the same
conversation. (The tmux channel acks a batch once the TUI took it, so no batch is in flight to
redeliver: the interrupted prompt is the TUI's, in its conversation or, unanswered, its history.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.e2e.test_claude_tmux import AGENT, Rig, claude_bin, rig  # noqa: F401 - fixtures
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.claude, pytest.mark.tmux, pytest.mark.timeout(180)]


def one_tool_call(body: dict[str, Any]) -> Any:
    """A long job: one Bash call first (its follow-up request is the one held), then "ok"."""
    text = json.dumps(body["messages"])
    if "MARKER-LONG" in text and '"tool_result"' not in text:
        return [{"type": "tool_use", "name": "Bash",
                 "input": {"command": "echo step-one", "description": "first step"}}]  # fmt: skip
    return "ok"


def interrupt(rig: Rig) -> tuple[dict[str, Any], float]:  # noqa: F811 - the fixture
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL")}
    asked = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agentmaild", "--db", str(rig.db), "interrupt", AGENT,
         "--from", "lead", "--reason", "STOPNOW", "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    answer = json.loads(done.stdout)
    assert done.returncode == 0 and answer["interrupted"] is True, (answer, rig.screen())
    return answer, time.monotonic() - asked


@pytest.mark.parametrize("held", ["after-a-tool-call", "before-any-answer"])
def test_the_tui_turn_is_interrupted_and_the_mail_opens_the_next(
    rig: Rig,  # noqa: F811 - the fixture
    held: str,
) -> None:
    rig.stub.reply = one_tool_call
    rig.stub.hold("step-one" if held == "after-a-tool-call" else "MARKER-LONG")
    rig.human_prompt("a long job MARKER-LONG")
    first = rig.stub.wait_for("step-one" if held == "after-a-tool-call" else "MARKER-LONG",
                              timeout=60)  # fmt: skip
    wait_for(lambda: "esc to interrupt" in rig.screen(), 20, "busy footer")
    answer, stop_s = interrupt(rig)
    rig.stub.release()  # the stopped turn's request, answered to nobody
    assert answer["detail"].startswith("Escape"), answer
    assert stop_s < 15
    assert "esc to interrupt" not in rig.screen()  # verified on the screen
    if held == "before-any-answer":  # Claude put the prompt back: cleared, or nothing is typed
        assert "cleared" in answer["detail"], answer
    nxt = rig.stub.wait_for(answer["id"], timeout=60)
    assert nxt.seq > first.seq and "STOPNOW" in nxt.last_user_text()
    if held == "after-a-tool-call":
        assert "MARKER-LONG" in nxt.all_text() and "step-one" in nxt.all_text()  # same session
    wait_for(lambda: rig.store.get_message(answer["id"]).read, 30, "the interrupt's mail acked")  # type: ignore[union-attr]
