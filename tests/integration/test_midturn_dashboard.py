"""Mid-turn deliveries in the dashboard (real daemon, real HTTP): the timeline and the team page
show the batch a PostToolUse hook handed to a running turn, with its outcome ``mid-turn``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.integration.test_dashboard_http import _logged_in
from tests.support.daemon import DaemonProc
from tests.support.http_api import http_env


def test_the_timeline_and_the_team_show_mid_turn_deliveries(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    store.add_agent(Agent(name="amy", capability="builder", channel="pull"))
    Mailer(store).send(sender="operator", to="amy", subject="stop", body="now", priority="urgent")
    done = subprocess.run(
        [sys.executable, "-m", "agentmaild", "hook", "post-tool-use", "--agent", "amy",
         "--db", str(store.path)], input=b"{}", capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    (attempt,) = store.list_attempts(agent="amy")
    assert attempt.outcome == "mid-turn" and attempt.delivery_id in context
    client, _ = _logged_in(daemons(http_env()))
    timeline = client.get("/timeline").text
    assert '<span class="outcome mid-turn">mid-turn</span>' in timeline
    assert attempt.delivery_id in timeline
    assert '<span class="outcome mid-turn">mid-turn</span>' in client.get("/").text
