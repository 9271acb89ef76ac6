"""What the team costs, end to end: a real daemon, the Claude stand-in (tests/agents/fake_claude.py,
which reports usage and a price in its stream-json ``result`` as Claude Code does) run as a spawn
agent, and the real CLI. A turn's tokens and cost land in `deliveries --json` and `status`; an
agent over its daily budget gets no more mail (status says why), and `agents budget --raise` and
`--reset` let it go on."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmaild.control.client import poke
from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.browser import dashboard_url
from tests.support.daemon import DaemonProc, agent_cmd, daemon_factory
from tests.support.http_api import base_url, http_env
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

FAST = {"AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.2", "AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "0.05"}
CLAUDE_FLAGS = ("-p", "--input-format", "stream-json", "--output-format", "stream-json",
                "--verbose")  # fmt: skip


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    with daemon_factory(db, tmp_path, defaults=FAST, text=True) as make:
        yield make


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def add_claude(d: DaemonProc, name: str, *extra: str) -> None:
    """A spawn agent running the stand-in; its price per turn is the daemon's
    ``FAKE_CLAUDE_COST_USD`` (a spawn agent inherits the daemon's environment)."""
    command = " ".join(agent_cmd("fake_claude.py", *CLAUDE_FLAGS))
    ok_json(d.cli("agents", "add", name, "-c", "builder", "--channel", "spawn", "--command",
                  command, *extra, "--json"))  # fmt: skip


def deliver(d: DaemonProc, store: SqliteMailStore, to: str, subject: str) -> str:
    mid = Mailer(store).send(sender="bob", to=to, subject=subject, body="x").ids[0]
    poke(d.sock, [to])
    wait_for(lambda: store.get_message(mid).read, 20, f"delivery of {subject}")  # type: ignore[union-attr]
    return mid


def test_a_spawn_turns_tokens_and_cost_land_in_deliveries_and_status(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons(http_env())
    add_claude(d, "alice")  # the stand-in's default price: $0.0042 a turn
    mid = deliver(d, store, "alice", "first")
    thread = store.get_message(mid).thread_id or mid  # type: ignore[union-attr]

    def row() -> Any:
        shown = ok_json(d.cli("deliveries", "--json", "--agent", "alice"))
        return shown if shown["attempts"] and shown["attempts"][0]["usage"] else None

    shown = wait_for(row, 20, "the attempt with its usage")
    [attempt] = shown["attempts"]
    assert attempt["outcome"] == "acked" and attempt["message_ids"] == [mid]
    # The stand-in's result: 12 input + 3 cache-read tokens in, 7 out, $0.0042.
    assert attempt["usage"] == {"tokens_in": 15, "tokens_out": 7, "cost_usd": 0.0042,
                                "thread_id": thread}  # fmt: skip
    for window in ("hour", "day"):
        assert shown["cost"][window]["agents"] == [
            {"name": "alice", "turns": 1, "tokens_in": 15, "tokens_out": 7, "cost_usd": 0.0042}
        ]
        assert [t["name"] for t in shown["cost"][window]["threads"]] == [thread]
    status = ok_json(d.cli("status", "--json"))
    assert status["costs"]["day"]["agents"][0]["cost_usd"] == 0.0042
    text = d.cli("status")
    assert "cost, last day: alice $0.0042 (22 tokens)" in text.stdout
    # The dashboard: the team page's cost column, the mail page's per-thread cost.
    client = httpx.Client(base_url=base_url(d), timeout=20)
    assert client.get(dashboard_url(d), follow_redirects=False).status_code == 303
    team = client.get("/").text
    assert re.search(r'<td class="num cost">\$0\.0042</td>', team), team
    mail = client.get("/mail").text
    assert re.search(r'<td class="num cost">\$0\.0042</td>', mail), mail
    page = client.get("/agents/alice").text
    assert '<dd class="cost">$0.0042 · 15 tokens in, 7 out, 1 turns</dd>' in page, page


def test_an_agent_over_budget_is_paused_listed_then_raised_and_reset(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons(env={"FAKE_CLAUDE_COST_USD": "0.006"})
    add_claude(d, "alice", "--budget-usd", "0.01")
    deliver(d, store, "alice", "one")  # $0.006 of $0.01
    deliver(d, store, "alice", "two")  # $0.012: over
    held = Mailer(store).send(sender="bob", to="alice", subject="three", body="x").ids[0]
    poke(d.sock, ["alice"])

    def paused() -> Any:
        rows = ok_json(d.cli("status", "--json"))
        [agent] = [a for a in rows["agents"] if a["agent"] == "alice"]
        return rows if (agent.get("busy_reason") or "").startswith("over budget") else None

    status = wait_for(paused, 20, "alice paused over budget")
    [budget] = status["costs"]["budgets"]
    assert (budget["agent"], budget["over"], budget["limit_usd"]) == ("alice", True, 0.01)
    assert budget["spent_usd"] == pytest.approx(0.012)
    assert (
        "over budget: alice spent $0.0120 of $0.0100 today (UTC): paused" in d.cli("status").stdout
    )
    shown = ok_json(d.cli("agents", "budget", "alice", "--json"))["budget"]
    assert shown["over"] is True
    assert not store.get_message(held).read  # type: ignore[union-attr]
    raised = ok_json(d.cli("agents", "budget", "alice", "--raise", "0.01", "--json"))["budget"]
    assert (raised["limit_usd"], raised["over"]) == (0.02, False)
    wait_for(lambda: store.get_message(held).read, 20, "the held mail after the raise")  # type: ignore[union-attr]
    deliver(d, store, "alice", "four")  # $0.024 of $0.02: over again
    held = Mailer(store).send(sender="bob", to="alice", subject="five", body="x").ids[0]
    wait_for(paused, 20, "alice paused again")
    assert not store.get_message(held).read  # type: ignore[union-attr]
    reset = ok_json(d.cli("agents", "budget", "alice", "--reset", "--json"))["budget"]
    assert (reset["spent_usd"], reset["limit_usd"], reset["over"]) == (0.0, 0.01, False)
    wait_for(lambda: store.get_message(held).read, 20, "the held mail after the reset")  # type: ignore[union-attr]
    assert "alice: spent $0.0060 of $0.0100 today" in d.cli("agents", "budget", "alice").stdout
    ok_json(d.cli("agents", "update", "alice", "--budget-usd", "0", "--json"))  # no budget now
    assert ok_json(d.cli("agents", "budget", "alice", "--json"))["budget"]["budget_usd"] is None
    assert "alice: no budget; spent $0.0060 today" in d.cli("agents", "budget", "alice").stdout


def test_budget_bad_input_is_one_line(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    d = daemons(start=False)
    both = d.cli("agents", "budget", "bob", "--raise", "1", "--reset", "--json")
    assert both.returncode != 0 and json.loads(both.stdout)["ok"] is False
    assert "Traceback" not in both.stderr
    missing = d.cli("agents", "budget", "nobody")
    assert missing.returncode != 0 and missing.stderr.strip() == "error: no agent named 'nobody'"
    negative = d.cli("agents", "budget", "bob", "--raise", "-1")
    assert negative.returncode != 0 and "Traceback" not in negative.stderr


def test_status_takes_the_costs_from_the_daemon_and_opens_no_store(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    """With a daemon, ``status`` asks it for the operator's unread mail and the costs too
    (``status`` with ``costs``), so the CLI never loads the store; the figures are the store's."""
    import sys
    import time

    from agentmaild.control.client import request
    from agentmaild.rules.costs import figures

    d = daemons()
    add_claude(d, "alice")
    deliver(d, store, "alice", "first")
    Mailer(store).send(sender="bob", to="operator", subject="fyi", body="x")
    plain = request(d.sock, "status", None, 5)
    assert "costs" not in plain and "operator_unread" not in plain  # `ctl status` as before
    told = request(d.sock, "status", {"costs": True}, 5)
    assert told["operator_unread"] == 1
    assert told["costs"]["day"] == figures(store, time.time())["day"]
    assert told["costs"]["day"]["agents"][0]["cost_usd"] == 0.0042
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "agentmaild", "status", "--json",
                        "--db", str(d.db)], env=d.env, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    shown = json.loads(p.stdout)
    assert (shown["operator_unread"], shown["costs"]) == (1, told["costs"])
    loaded = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if "|" in line}
    assert "agentmaild.control.client" in loaded and "agentmaild.store.sqlite" not in loaded
