"""The loop guard with the real daemon and real CLI processes: a reply loop between two scripted
agents is stopped and escalated once; identical mail sent concurrently is written once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support.daemon import DaemonProc, agent_cmd, base_env
from tests.support.waiting import wait_for

PINGPONG_MAX = 6


def records(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_two_agents_replying_forever_are_held_and_the_lead_hears_once(
    daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    d = daemons({"AGENTMAILD_LIMITS_PINGPONG_MAX": str(PINGPONG_MAX)})
    d.cli("agents", "add", "lead", "-c", "lead")
    for name in ("ping", "pong"):
        cmd = " ".join(agent_cmd("pingpong_agent.py", str(tmp_path / f"{name}.jsonl")))
        added = d.cli(
            "agents",
            "add",
            name,
            "-c",
            "builder",
            "--parent",
            "lead",
            "--channel",
            "spawn",
            "--command",
            cmd,
        )
        assert added.returncode == 0, added.stderr
    sent = d.cli("send", "--from", "pong", "--to", "ping", "-s", "serve", "-b", "your turn")
    assert sent.returncode == 0, sent.stderr
    root = sent.stdout.strip()

    def refused() -> list[dict[str, object]]:
        rows = records(tmp_path / "ping.jsonl") + records(tmp_path / "pong.jsonl")
        return [r for r in rows if r["rc"] != 0]

    wait_for(lambda: refused(), 90, "a reply refused by the loop guard")
    error = json.loads(str(refused()[0]["out"]))["error"]
    assert error["code"] == "loop_held" and "limits.pingpong_max" in error["message"]
    # The loop is dead: the refused reply was never written, so nobody has mail to answer.
    wait_for(
        lambda: d.status_row("ping")["unread"] == d.status_row("pong")["unread"] == 0,
        30,
        "both agents to have read everything",
    )
    thread = json.loads(d.cli("--json", "thread", root).stdout)["messages"]
    between = [m for m in thread if {m["from"], m["to"]} == {"ping", "pong"}]
    assert len(between) == 1 + PINGPONG_MAX  # the root (not counted) and the cap's worth
    lead = json.loads(d.cli("--json", "list", "--to", "lead").stdout)["messages"]
    assert [m["type"] for m in lead] == ["escalation"]
    assert "held thread" in lead[0]["subject"]
    # Released by hand, the pair may talk again.
    assert d.cli("limits", "reset", "--thread", root).returncode == 0
    again = d.cli("reply", root, "--from", "operator", "-b", "stop now")  # someone else: fine
    assert again.returncode == 0, again.stderr


def test_identical_mail_sent_at_once_by_eight_processes_is_written_once(
    daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    d = daemons()
    d.cli("agents", "add", "lead", "-c", "lead")
    d.cli("agents", "add", "worker", "-c", "builder")
    argv = [
        sys.executable,
        "-m",
        "agentmaild",
        "--json",
        "send",
        "--db",
        str(d.db),
        "--from",
        "lead",
        "--to",
        "worker",
        "-s",
        "task complete",
        "-b",
        "all done",
    ]
    procs = [
        subprocess.Popen(argv, env=base_env(tmp_path), stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert {tuple(o["ids"]) for o in outs} == {tuple(outs[0]["ids"])}  # one id for all eight
    assert sorted(o["duplicate"] for o in outs) == [False] + [True] * 7
    assert len(json.loads(d.cli("--json", "list", "--to", "worker").stdout)["messages"]) == 1
    status = json.loads(d.cli("--json", "status").stdout)
    assert status["rules"]["counters"]["collapsed"] == 7
    metrics = d.ctl("metrics")["text"]
    assert "agentmaild_collapsed_total 7" in metrics
    # A different body is new mail.
    other = d.cli(
        "--json",
        "send",
        "--from",
        "lead",
        "--to",
        "worker",
        "-s",
        "task complete",
        "-b",
        "all done, really",
    )
    assert json.loads(other.stdout)["duplicate"] is False
