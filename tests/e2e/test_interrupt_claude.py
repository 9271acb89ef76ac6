"""Interrupts with the REAL Claude Code CLI, headless (spawn) and long-lived (stdin), through a
real `agentmaild serve`, against the loopback Messages API stand-in: a turn held at the model for
as long as the test wants is stopped within seconds; the next turn resumes the same session and
opens with the interrupt's mail, the interrupted batch redelivered under its id; nothing of the
stopped turn is left running."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.procs.groups import group_alive
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import claude_binary, claude_env, isolated_home
from tests.support.daemon import FAST, DaemonProc, daemon_factory
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.claude, pytest.mark.timeout(240)]


@pytest.fixture
def stub() -> Iterator[AnthropicStub]:
    with AnthropicStub("done") as s:
        yield s


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    fast = {**FAST, "AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "3",
            "AGENTMAILD_CHANNELS_STDIN_RESTART_BACKOFF_INITIAL_S": "0.1"}  # fmt: skip
    with daemon_factory(tmp_path / "store" / "mail.db", tmp_path, defaults=fast, text=True) as m:
        yield m


@pytest.mark.parametrize("channel", ["spawn", "stdin"])
def test_claude_turn_is_interrupted_and_the_session_resumes(
    channel: str, tmp_path: Path, stub: AnthropicStub, daemons: Callable[..., DaemonProc]
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    env = claude_env(isolated_home(tmp_path, project), stub.base_url)
    store = SqliteMailStore(tmp_path / "store" / "mail.db")
    store.add_agent(Agent(name="boss", capability="coordinator"))
    store.add_agent(Agent(name="alice", capability="builder", channel=channel, preset="claude",
                          command=(claude_binary(),), cwd=str(project), parent="boss",
                          settings={"env": env}))  # fmt: skip
    d = daemons()
    stub.hold("LONGTASK")  # the model never answers this turn: it would run for 5 minutes
    first = Mailer(store).send(sender="boss", to="alice", subject="task", body="LONGTASK").ids[0]
    held = stub.wait_for("LONGTASK", timeout=90)
    dlv = wait_for(lambda: d.status_row("alice")["in_flight_delivery"], 10, "the delivery")
    session = wait_for(lambda: store.get_agent("alice").session_id, 30, "the session id")  # type: ignore[union-attr]
    pid = d.status_row("alice").get("pid")
    asked = time.monotonic()
    done = d.cli("interrupt", "alice", "--from", "boss", "--reason", "WRONGBRANCH", "--json",
                 timeout=60)  # fmt: skip
    stop_s = time.monotonic() - asked
    stub.release()  # the stopped turn's request, answered to nobody; later turns go through
    answer = json.loads(done.stdout)
    assert done.returncode == 0 and answer["interrupted"] is True, (answer, d.tail())
    assert stop_s < 15, stop_s
    if channel == "stdin":  # the protocol's own interrupt did it: the process stays
        assert answer["detail"].startswith("control_request interrupt"), answer
    nxt = stub.wait_for(f"REDELIVERY (attempt 2) of delivery {dlv}", timeout=90)
    assert nxt.seq > held.seq
    # (stdin: the stopped turn's user message may share the CLI's last user message)
    batch = nxt.last_user_text().split("[agentmail] REDELIVERY")[-1]
    assert batch.index(answer["id"]) < batch.index(first)  # the interrupt's mail first
    assert "WRONGBRANCH" in batch
    wait_for(lambda: store.get_message(first).read and store.get_message(answer["id"]).read,  # type: ignore[union-attr]
             90, "the redelivery acked")  # fmt: skip
    assert store.get_agent("alice").session_id == session  # type: ignore[union-attr]
    assert nxt.all_text().count("LONGTASK") >= 2  # the session's history came along too
    outcomes = [(a.attempt, a.outcome) for a in reversed(store.list_attempts(agent="alice"))]
    assert outcomes == [(1, "interrupted"), (2, "acked")]
    if channel == "spawn" and isinstance(pid, int):
        assert not group_alive(pid)
    store.close()
