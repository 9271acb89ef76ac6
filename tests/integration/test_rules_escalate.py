"""Long-unread escalation by the real daemon: one escalation per late message, to the sender and
the recipient's parent; mail read in time and priorities that are off are left alone."""

from __future__ import annotations

import json
from collections.abc import Callable

from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.waiting import wait_for

FAST_ESCALATION = {
    "AGENTMAILD_LIMITS_UNREAD_ESCALATE_AFTER_URGENT_S": "2",
    "AGENTMAILD_LIMITS_UNREAD_ESCALATE_INTERVAL_S": "0.2",
}


def mail_of(d: DaemonProc, agent: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = json.loads(d.cli("--json", "list", "--to", agent).stdout)[
        "messages"
    ]
    return found


def test_late_urgent_mail_is_escalated_once_to_its_sender_and_the_parent(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = daemons(FAST_ESCALATION)
    for args in (["lead", "-c", "lead"], ["boss", "-c", "coordinator"],
                 ["worker", "-c", "builder", "--parent", "lead"]):  # fmt: skip
        assert d.cli("agents", "add", *args).returncode == 0
    late = d.cli(
        "send", "--from", "boss", "--to", "worker", "-s", "fire", "-b", "now", "-p", "urgent"
    )
    normal = d.cli("send", "--from", "boss", "--to", "worker", "-s", "fyi", "-b", "whenever")
    # Read at once (in this process: a CLI start can take longer than the limit on a busy box).
    store = SqliteMailStore(d.db)
    try:
        quick = Mailer(store).send(sender="lead", to="worker", subject="quick", body="x",
                                   priority="urgent").ids[0]  # fmt: skip
        assert store.ack([quick]) == [quick]
    finally:
        store.close()
    late_id = late.stdout.strip()
    wait_for(lambda: mail_of(d, "boss") and mail_of(d, "lead"), 30, "the escalations")
    for target in ("boss", "lead"):
        got = mail_of(d, target)
        assert len(got) == 1 and got[0]["type"] == "escalation", got
        body = json.loads(d.cli("--json", "read", str(got[0]["id"])).stdout)["message"]["body"]
        assert late_id in body and "unread for" in body
        assert normal.stdout.strip() not in body and quick not in body
    # A second late message, escalated after many more intervals: the first is not named again.
    second = d.cli("send", "--from", "boss", "--to", "worker", "-s", "fire 2", "-b", "now",
                   "-p", "urgent").stdout.strip()  # fmt: skip
    wait_for(lambda: len(mail_of(d, "boss")) == 2, 30, "the second escalation")
    bodies = [
        json.loads(d.cli("--json", "read", str(m["id"])).stdout)["message"]["body"]
        for m in mail_of(d, "boss")
    ]
    assert sum(late_id in b for b in bodies) == 1 and sum(second in b for b in bodies) == 1
    status = json.loads(d.cli("--json", "status").stdout)
    assert status["rules"]["counters"]["unread_escalated"] == 2
    assert len(d.events("rules.unread_escalated")) == 2
