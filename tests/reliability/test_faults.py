"""The agent fault matrix: every way a turn can fail → retries → dead letter + NDR; no loss, no
stuck loop (a healthy agent in the same daemon keeps receiving throughout)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmaild.mail.mailer import DAEMON_SENDER, Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import (
    DaemonProc,
    add_spawn,
    agent_cmd,
    assert_sound,
    read_jsonl,
    wait_for,
)

MAX_ATTEMPTS = 3  # conftest.FAST
# A healthy round trip is ~0.1 s; the bound only catches a loop stuck behind a failing agent (a
# hang would stall it for good), never a slow one on a loaded machine.
PING_S = 20.0
# mode -> (agent settings, what the last error must mention)
FAULTS: dict[str, tuple[dict[str, Any], str]] = {
    "exit": ({}, "exit"),
    "hang": ({}, "stalled"),
    "crash": ({}, "SIGKILL"),
    "garbage": ({"success": "result"}, "result"),
}


class Pinger:
    """Sends the healthy agent one message at a time and waits for it: proof the daemon keeps
    delivering while the others fail. Records each round trip."""

    def __init__(self, store: SqliteMailStore) -> None:
        self.store = store
        self.mailer = Mailer(store)
        self.latencies: list[float] = []

    def ping(self) -> None:
        started = time.monotonic()
        mid = self.mailer.send(sender="bob", to="healthy", subject="ping", body="alive?").ids[0]
        wait_for(lambda: self.store.get_message(mid).read, PING_S,  # type: ignore[union-attr]
                 "the healthy agent to get its mail while others fail")
        self.latencies.append(time.monotonic() - started)

    def until(self, done: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while not (result := done()):
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
            self.ping()
        return result


def _status(d: DaemonProc) -> dict[str, dict[str, Any]]:
    result = d.cli("status", "--json")
    assert result.returncode == 0, result.stderr
    return {r["agent"]: r for r in json.loads(result.stdout)["agents"]}


def test_fault_matrix_retries_then_dead_letters_without_loss(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    add_spawn(store, "healthy", agent_cmd("ledger_agent.py", str(tmp_path / "healthy.jsonl")))
    for mode, (settings, _) in FAULTS.items():
        add_spawn(store, f"f-{mode}", agent_cmd("fault_agent.py", mode, str(tmp_path / mode)),
                  settings=settings)
    d = daemons()
    mailer, pinger = Mailer(store), Pinger(store)
    sent = {mode: mailer.send(sender="bob", to=f"f-{mode}", subject=f"to {mode}",
                              body="please fail").ids[0] for mode in FAULTS}
    pinger.until(lambda: all(store.dead_letters(f"f-{m}") for m in FAULTS), 60,
                 "every faulty agent's mail to become a dead letter")
    rows = _status(d)
    ndrs = {m.body: m for m in store.inbox("bob") if m.from_agent == DAEMON_SENDER}
    for mode, (_, reason) in FAULTS.items():
        name, mid = f"f-{mode}", sent[mode]
        [dead] = store.dead_letters(name)
        turns = read_jsonl(tmp_path / mode)
        assert dead.message_ids == (mid,) and dead.attempts == MAX_ATTEMPTS, mode
        assert len(turns) == MAX_ATTEMPTS and {t["uuid"] for t in turns} == {dead.delivery_id}
        row = rows[name]  # retries are visible in `status --json`
        assert row["failed_total"] == MAX_ATTEMPTS and row["dead_letters"] == 1, row
        assert reason in (row["last_error"] or ""), (mode, row["last_error"])
        assert [b for b in ndrs if mid in b], f"no non-delivery report for {mode}"
        assert not store.get_message(mid).read  # type: ignore[union-attr]  # never a loss
    assert all(m.type == "error" for m in ndrs.values()) and len(ndrs) == len(FAULTS)
    assert len(pinger.latencies) >= 3, pinger.latencies  # it kept delivering during the faults
    _retry_after_the_fix(d, store, tmp_path, sent)
    assert d.stop() == 0
    assert_sound(db)
    print(f"fault matrix: {len(pinger.latencies)} healthy round trips during the faults, "
          f"max {max(pinger.latencies) * 1000:.0f} ms")


def _retry_after_the_fix(
    d: DaemonProc, store: SqliteMailStore, tmp_path: Path, sent: dict[str, str]
) -> None:
    """`retry` re-queues every dead letter; once the agents work, each arrives, same id."""
    fixed = tmp_path / "fixed.jsonl"
    dead = {mode: store.dead_letters(f"f-{mode}")[0].delivery_id for mode in FAULTS}
    for mode in FAULTS:
        store.update_agent(f"f-{mode}", {"command": list(agent_cmd("ledger_agent.py", str(fixed))),
                                         "settings": {}})
    result = d.cli("retry", "--json")
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(result.stdout)["requeued"]) == sorted(dead.values())
    wait_for(lambda: all(store.get_message(m).read for m in sent.values()), 30,  # type: ignore[union-attr]
             "the retried dead letters to be delivered")
    seen = {mid: r["uuid"] for r in read_jsonl(fixed) for mid in r["message_ids"]}
    assert seen == {sent[mode]: dead[mode] for mode in FAULTS}  # the first delivery id, kept


# -- a tmux pane that vanished --------------------------------------------------------------



def _vanished_pane_agent(store: SqliteMailStore, tmp_path: Path) -> None:
    from tests.support.claude_env import TmuxServer

    server = TmuxServer(dict(__import__("os").environ))
    target = server.new_session("gone", ["sleep", "600"], cwd=tmp_path)
    store.add_agent(Agent(name="pane", capability="builder", channel="tmux",
                          tmux_target=target, tmux_socket=server.name))
    server.run("kill-server", check=False)  # the pane (and its server) vanish


@pytest.mark.tmux
def test_vanished_pane_retries_without_loss_or_stuck_loop(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    add_spawn(store, "healthy", agent_cmd("ledger_agent.py", str(tmp_path / "healthy.jsonl")))
    _vanished_pane_agent(store, tmp_path)
    d = daemons()
    pinger = Pinger(store)
    mid = Mailer(store).send(sender="bob", to="pane", subject="hello", body="anyone?").ids[0]
    row = pinger.until(lambda: (r := _status(d)["pane"])["failed_total"] >= MAX_ATTEMPTS and r,
                       40, "repeated failed attempts on the vanished pane")
    assert "not found" in row["last_error"] or "no server" in row["last_error"], row
    pinger.ping()  # still delivering to the healthy agent after the pane's failures
    assert not store.get_message(mid).read  # type: ignore[union-attr]
    pulled = d.cli("check", "--agent", "pane", "--json")  # never a loss: the pull side has it
    assert pulled.returncode == 0 and mid in pulled.stdout.decode(), pulled.stderr
    assert d.stop() == 0
    assert_sound(db)


@pytest.mark.tmux
def test_vanished_pane_mail_becomes_a_dead_letter_with_an_ndr(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    _vanished_pane_agent(store, tmp_path)
    d = daemons()
    mid = Mailer(store).send(sender="bob", to="pane", subject="hello", body="anyone?").ids[0]
    try:
        wait_for(lambda: store.dead_letters("pane"), 20, "a dead letter for the vanished pane")
        # The report is its own transaction, right after the one that made the dead letter.
        wait_for(lambda: [m for m in store.inbox("bob") if m.type == "error" and mid in m.body],
                 20, "the non-delivery report")
    finally:
        d.stop()
        assert_sound(db)
