"""Member and execution status through the real CLI and daemon: ``set-state`` takes both
vocabularies with the guard, and ``status`` (daemon or not) shows both columns."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.waiting import wait_for


def test_set_state_and_status_show_both_vocabularies(
    daemons: Callable[..., DaemonProc], tmp_path: object
) -> None:
    d = daemons(start=False)
    record = agent_cmd("record_agent.py", f"{tmp_path}/w.jsonl")
    assert d.cli("agents", "add", "w", "-c", "builder", "--channel", "spawn",
                 "--command", " ".join(record)).returncode == 0  # fmt: skip
    d.cli("agents", "add", "p", "-c", "builder")
    offline = {r["agent"]: r for r in json.loads(d.cli("--json", "status").stdout)["agents"]}
    assert (offline["p"]["member"], offline["p"]["exec"]) == ("ready", "unknown")
    d.start()
    wait_for(lambda: d.status_row("w")["loop"] == "idle", 30, "w's loop")
    assert (d.status_row("w")["member"], d.status_row("w")["exec"]) == ("ready", "idle")
    asked = d.cli("--json", "agents", "set-state", "w", "shutdown_requested")
    assert json.loads(asked.stdout)["member_status"] == "shutdown_requested"
    assert d.status_row("w")["member"] == "shutdown_requested"
    refused = d.cli("agents", "set-state", "w", "busy")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "error: agent w: cannot go from shutdown_requested to busy "
        "(allowed: error, ready, shutdown)"
    )
    done = d.cli("agents", "set-state", "w", "shutdown")
    assert done.stdout.strip() == "w: completed (member: shutdown)"
    human = d.cli("status").stdout.splitlines()
    header = next(line for line in human if line.startswith("AGENT"))
    row = next(line for line in human if line.startswith("w "))
    assert row[header.index("MEMBER") :].split()[0] == "shutdown"
    assert row[header.index("EXEC") :].split()[0] == "idle"
