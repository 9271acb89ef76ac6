"""Needs you over real HTTP on a real daemon: an agent stuck in a turn past busy_warn_after_s and a
thread the loop guard held are listed with their actions; releasing the thread from the page ends
the hold (the pair may talk again) and the graph marks the pair's traffic as looped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.security.test_dashboard_scopes import _session
from tests.support.browser import dashboard_url
from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.http_api import base_url, http_env
from tests.support.waiting import wait_for

PINGPONG_MAX = 3


def test_stuck_agents_and_held_threads_are_listed_and_resolved(
    daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    d = daemons(http_env({"AGENTMAILD_DAEMON_BUSY_WARN_AFTER_S": "0.5",
                          "AGENTMAILD_LIMITS_PINGPONG_MAX": str(PINGPONG_MAX)}))  # fmt: skip
    pid_file = tmp_path / "hang.pid"
    hang = " ".join(agent_cmd("hang_agent.py", str(pid_file)))
    for name, how in (("hang", ["stdin", "--command", hang]), ("a", ["pull"]), ("b", ["pull"])):
        added = d.cli("agents", "add", name, "-c", "builder", "--channel", *how)
        assert added.returncode == 0, added.stderr
    try:
        assert d.cli("send", "--from", "a", "--to", "hang", "-s", "long", "-b", "x").returncode == 0
        wait_for(pid_file.exists, 20, "the agent to take its batch")
        root = d.cli("send", "--from", "a", "--to", "b", "-s", "ping", "-b", "0").stdout.strip()
        sender, last = "b", None
        for n in range(PINGPONG_MAX + 1):
            last = d.cli("reply", root, "--from", sender, "-b", f"#{n}")
            sender = "a" if sender == "b" else "b"
        assert last is not None and last.returncode != 0 and "loop guard" in last.stderr
        client, csrf = _session(d, dashboard_url(d))
        page = wait_for(lambda: (p := client.get("/needs-you").text) and 'data-kind="stuck"' in p
                        and p, 20, "the stuck agent on Needs you")  # fmt: skip
        assert f'data-kind="loop" data-ref="{root}"' in page
        assert "a ⇄ b" in page and f"/actions/release/{root}" in page
        assert page.index('data-kind="stuck"') < page.index('data-kind="loop"')  # oldest first
        assert 'class="edge looped"' in client.get("/graph").text
        headers = {"origin": base_url(d), "x-csrf-token": csrf}
        released = client.post(f"/actions/release/{root}", headers=headers)
        assert released.status_code == 200 and f"released thread {root}" in released.text
        assert f'data-ref="{root}"' not in client.get("/needs-you").text
        assert client.post(f"/actions/release/{root}", headers=headers).status_code == 404
        again = d.cli("reply", root, "--from", sender, "-b", "talking again")
        assert again.returncode == 0, again.stdout + again.stderr
        paused = client.post("/actions/pause/hang", headers=headers)
        assert paused.status_code == 200 and d.status_row("hang")["paused"] is True
        client.close()
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(json.loads(pid_file.read_text())["pid"], signal.SIGKILL)
