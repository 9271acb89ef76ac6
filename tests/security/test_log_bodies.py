"""Message bodies are never logged at the default level: a real delivery by a real daemon.

A log is read by more people, kept longer and shipped further than the mail store; a body in it
leaks whatever agents wrote to each other. The body here is a random token, so finding it
anywhere in the daemon's log means a body (or the rendered batch holding it) was copied there.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import AGENTS, DaemonProc
from tests.support.waiting import read_jsonl, wait_for


def test_a_delivered_body_appears_nowhere_in_the_daemon_log(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    db.parent.mkdir()
    record = tmp_path / "record.jsonl"
    body = f"body-{secrets.token_hex(16)}"
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="bob", capability="lead"))
        store.add_agent(Agent(
            name="b1", capability="builder", channel="spawn",
            command=(sys.executable, "-S", str(AGENTS / "record_agent.py"), str(record)),
        ))
        d = daemons(start=False)
        d.env.pop("AGENTMAILD_LOG_LEVEL", None)  # the default level, info
        d.start()
        mid = Mailer(store).send(sender="bob", to="b1", subject="plans", body=body).ids[0]
        wait_for(lambda: store.get_message(mid).read, 30, "the delivery to be acked")  # type: ignore[union-attr]
    finally:
        store.close()
    assert d.stop() == 0  # every line is flushed
    [turn] = read_jsonl(record)
    assert body in turn["text"]  # the body did pass through the daemon
    acked = d.events("delivery.acked")
    assert [e["delivery_id"] for e in acked] == [turn["uuid"]]  # the log holds the delivery
    log = d.log.read_text(errors="replace")
    assert '"level": "debug"' not in log and '"level": "info"' in log
    assert body not in log
