"""The operator's seat acts through the same rules as the CLI, over real HTTP on a real daemon: an
interrupt from the compose form (``send --interrupt``) or from a stuck agent's row in Needs you
stops a spawn turn, whose next turn opens with the interrupt's mail; an agent over its daily
budget is listed in Needs you and raised or reset from there (``agents budget``); bad amounts
and unknown agents are one-line refusals, and nothing is changed without the CSRF token."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore
from tests.integration.test_costs import add_claude, deliver
from tests.integration.test_interrupt import long_turn, team
from tests.security.test_dashboard_scopes import _session
from tests.support.browser import dashboard_url
from tests.support.daemon import DaemonProc
from tests.support.http_api import base_url, http_env
from tests.support.waiting import read_jsonl as records
from tests.support.waiting import wait_for


def _turns_with(rec: Path, text: str) -> list[dict[str, object]]:
    return [r for r in records(rec) if text in str(r.get("text", ""))]


def test_an_interrupt_from_the_page_stops_the_turn_and_opens_the_next(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "turns.jsonl"
    team(store, rec)
    d = daemons(http_env({"AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "2",
                          "AGENTMAILD_DAEMON_BUSY_WARN_AFTER_S": "0.5"}))  # fmt: skip
    long_turn(store, rec)
    client, csrf = _session(d, dashboard_url(d))
    headers = {"origin": base_url(d), "x-csrf-token": csrf}
    page = wait_for(lambda: (p := client.get("/needs-you").text) and 'data-kind="stuck"' in p
                    and p, 20, "the worker stuck in its turn on Needs you")  # fmt: skip
    assert "/actions/interrupt/worker" in page
    assert client.post("/actions/interrupt/worker", data={"reason": "x"}).status_code == 403
    done = client.post("/actions/interrupt/worker", data={"reason": "stop: wrong branch"},
                       headers=headers)  # fmt: skip
    assert done.status_code == 200 and "worker: interrupted" in done.text, done.text
    nxt = wait_for(lambda: _turns_with(rec, "stop: wrong branch"), 20, "the next turn")[0]
    assert str(nxt["text"]).index("stop: wrong branch") < str(nxt["text"]).index("LONG task")
    # The redelivered turn ends at once (the stand-in holds only a first delivery): a new long one.
    Mailer(store).send(sender="boss", to="worker", subject="more", body="LONG second task")
    wait_for(lambda: _turns_with(rec, "LONG second task"), 20, "the second long turn to start")
    sent = client.post("/mail/send", headers=headers, data={
        "to": "worker", "subject": "halt now", "body": "from the form", "interrupt": "1"})
    assert sent.status_code == 200 and "worker: interrupted" in sent.text, sent.text
    wait_for(lambda: _turns_with(rec, "from the form"), 20, "the turn the form's mail opens")
    refused = client.post("/mail/send", headers=headers, data={
        "to": "@builders", "subject": "s", "body": "b", "interrupt": "1"})  # fmt: skip
    assert refused.status_code == 400 and "Traceback" not in refused.text
    client.close()


def test_an_agent_over_budget_is_listed_and_raised_or_reset_from_the_page(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons(http_env({"FAKE_CLAUDE_COST_USD": "0.006"}))
    add_claude(d, "alice", "--budget-usd", "0.01")
    deliver(d, store, "alice", "one")
    deliver(d, store, "alice", "two")  # $0.012 of $0.01: over
    client, csrf = _session(d, dashboard_url(d))
    headers = {"origin": base_url(d), "x-csrf-token": csrf}
    page = wait_for(lambda: (p := client.get("/needs-you").text) and 'data-kind="budget"' in p
                    and p, 20, "alice over budget on Needs you")  # fmt: skip
    assert "alice is over its daily budget" in page and "/actions/budget/alice" in page
    assert client.post("/actions/budget/alice", data={"raise": "1"}).status_code == 403
    for bad in ("0", "-1", "nan", "lots"):
        answer = client.post("/actions/budget/alice", data={"raise": bad}, headers=headers)
        assert answer.status_code == 400 and "raise: an amount of USD" in answer.text, bad
    unknown = client.post("/actions/budget/nobody", data={"raise": "1"}, headers=headers)
    assert unknown.status_code == 404
    raised = client.post("/actions/budget/alice", data={"raise": "0.01"}, headers=headers)
    assert raised.status_code == 200 and "alice: $0.0120 spent today of $0.02" in raised.text
    assert 'data-kind="budget"' not in client.get("/needs-you").text
    deliver(d, store, "alice", "three")  # $0.018 of $0.02: delivered again
    deliver(d, store, "alice", "four")  # $0.024: over again
    wait_for(lambda: 'data-kind="budget"' in client.get("/needs-you").text, 20, "over again")
    reset = client.post("/actions/budget/alice", data={"reset": "1"}, headers=headers)
    assert reset.status_code == 200 and "alice: $0.0000 spent today" in reset.text
    assert 'data-kind="budget"' not in client.get("/needs-you").text
    client.close()
