"""Two hosts on one PostgreSQL store: `serve --host host-a` and `serve --host host-b` as separate
processes (each with its own state directory, as on two machines), agents split between them,
several sender processes. Every message reaches its agent through its own host's daemon, is
acked once; host-a is SIGKILLed and restarted: nothing is lost, a redelivery keeps its delivery
id, and host-b's claims are left alone by host-a's recovery. Sized for test time: 6 agents,
120 messages from 3 senders, 2 kills."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmaild.store.postgres import PostgresMailStore
from tests.support.daemon import FAST, base_env
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

AGENTS = {"a1": "host-a", "a2": "host-a", "a3": "host-a",
          "b1": "host-b", "b2": "host-b", "b3": "host-b"}
SENDERS, PER_SENDER, KILLS = 3, 40, 2


def ok(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "agentmaild", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def daemon(env: dict[str, str], host: str, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    env = {**env, "XDG_STATE_HOME": str(log.parent / f"state-{host}"), "AM_TEST_HOST": host}
    return subprocess.Popen([sys.executable, "-m", "agentmaild", "serve", "--host", host],
                            env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)


def beats(env: dict[str, str]) -> dict[str, str]:
    return {h["host"]: h["state"] for h in ok(env, "status").get("hosts") or ()}


def test_two_host_daemons_deliver_each_to_its_own_agents(tmp_path: Path, pg_dsn: str) -> None:
    env = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn,
                              "XDG_STATE_HOME": str(tmp_path / "cli")}, FAST)
    for name, host in AGENTS.items():
        inbox = tmp_path / f"{name}.txt"
        script = f'{{ echo "HOST $AM_TEST_HOST"; cat; }} >> "{inbox}"'
        added = ok(env, "agents", "add", name, "--capability", "builder", "--channel", "spawn",
                   "--host", host, "--command", f"sh -c '{script}'")
        assert added["agent"]["host"] == host
    daemons = {h: daemon(env, h, tmp_path / f"{h}.log") for h in ("host-a", "host-b")}
    try:
        wait_for(lambda: beats(env) == {"host-a": "up", "host-b": "up"}, 60, "two heartbeats")
        script = (
            "import subprocess, sys\n"
            "for i in range(int(sys.argv[2])):\n"
            "    to = sys.argv[3:][i % len(sys.argv[3:])]\n"
            "    subprocess.run([sys.executable, '-m', 'agentmaild', 'send', '--to', to,\n"
            "                    '--subject', f's{sys.argv[1]}-{i}', '--body', 'b'], check=True,\n"
            "                   capture_output=True)\n"
        )
        senders = [subprocess.Popen([sys.executable, "-c", script, str(s), str(PER_SENDER),
                                     *AGENTS], env=env) for s in range(SENDERS)]
        for kill in range(KILLS):  # host-a dies mid-run and comes back
            wait_for(lambda k=kill: (tmp_path / "a1.txt").exists()
                     and (tmp_path / "a1.txt").read_text().count("HOST") > k, 60,
                     "host-a to deliver")
            daemons["host-a"].send_signal(signal.SIGKILL)
            daemons["host-a"].wait(30)
            daemons["host-a"] = daemon(env, "host-a", tmp_path / "host-a.log")
        for s in senders:
            assert s.wait(240) == 0
        store = PostgresMailStore(pg_dsn)

        def ours() -> list[Any]:  # the restart reports go to the operator, not to the agents
            return [m for m in store.list_messages(limit=10_000) if m.to_agent in AGENTS]

        try:
            wait_for(lambda: all(m.acked_at for m in ours()), 180, "every message acked")
            messages = ours()
        finally:
            store.close()
        assert len(messages) == SENDERS * PER_SENDER
        for name, host in AGENTS.items():
            text = (tmp_path / f"{name}.txt").read_text()
            assert set(re.findall(r"^HOST (.*)$", text, re.M)) == {host}, name  # never the other
            mine = [m for m in messages if m.to_agent == name]
            assert all(m.id in text for m in mine), name
            # Acked once, by the delivery that carried it (a repeat keeps its delivery id).
            assert all(m.acked_by == m.delivery_id and m.acked_at for m in mine), name
        assert beats(env) == {"host-a": "up", "host-b": "up"}
        assert daemons["host-b"].poll() is None  # host-a's restarts never touched it
    finally:
        for proc in daemons.values():
            proc.send_signal(signal.SIGTERM)
        for proc in daemons.values():
            proc.wait(30)
