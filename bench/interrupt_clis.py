"""bench_interrupt's real-CLI channels: a real ``agentmaild serve``, the pinned CLI against its
loopback API stand-in, one agent per channel.

A round: a mail whose model call the stand-in holds (the turn would never end), then the real
``agentmaild interrupt`` CLI as the operator; timed from the CLI's start to the stand-in receiving
the next turn's model call (the redelivery, interrupt first). Baseline, the same way in the same
run: a plain send to the idle agent → its turn's model call.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import claude_binary, claude_env, isolated_home
from tests.support.daemon import FAST, daemon_factory
from tests.support.vendor_env import vendor_binary
from tests.support.vendor_world import vendor_world
from tests.support.waiting import wait_for

# channel label → (channel, protocol setting, vendor, arguments)
CHANNELS = {
    "claude spawn": ("spawn", None, "claude", []),
    "claude stdin": ("stdin", None, "claude", []),
    "codex-app": ("stdin", "codex-app", "codex", ["app-server"]),
    "acp (gemini)": ("stdin", "acp", "gemini", ["--acp", "--skip-trust"]),
    "acp (opencode)": ("stdin", "acp", "opencode", ["acp"]),
    "opencode-server": ("stdin", "opencode-server", "opencode", ["serve"]),
}
BOUND = 120.0


@contextmanager
def _world(label: str, tmp: Path) -> Iterator[tuple[Any, Path, Agent]]:
    """The stand-in, the store file and the agent ``worker`` of ``label``'s channel."""
    channel, protocol, vendor, args = CHANNELS[label]
    if vendor == "claude":
        project = tmp / "proj"
        project.mkdir()
        with AnthropicStub("done") as api:
            env = claude_env(isolated_home(tmp, project), api.base_url)
            yield api, tmp / "store" / "mail.db", Agent(
                name="worker", capability="builder", channel=channel, preset="claude",
                command=(claude_binary(),), cwd=str(project), settings={"env": env})  # fmt: skip
        return
    with vendor_world(vendor, tmp, [vendor_binary(vendor), *args]) as w:
        yield w.api, w.db, Agent(
            name="worker", capability="builder", channel="stdin", command=tuple(w.argv),
            cwd=str(w.project), settings={"env": w.env, "protocol": protocol})  # fmt: skip


def _cli(db: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "agentmaild", *args, "--db", str(db), "--json"],
                          env=env, capture_output=True, timeout=BOUND, check=True)  # fmt: skip
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _round(api: Any, db: Path, env: dict[str, str], i: int) -> tuple[float, float]:
    mark = f"LONGTASK-{i}-END"
    api.hold(mark)
    sent = time.monotonic()
    _cli(db, env, "send", "--to", "worker", "--from", "operator", "-s", f"r{i}", "-b", mark)
    first = api.wait_for(mark, timeout=BOUND)
    asked = time.monotonic()
    answer = _cli(db, env, "interrupt", "worker", "--from", "operator", "-r", f"stop {i}")
    api.release()
    if answer.get("interrupted") is not True or not answer.get("delivery_id"):
        raise RuntimeError(f"not interrupted: {answer}")
    nxt = api.wait_for(f"of delivery {answer['delivery_id']}", timeout=BOUND)
    wait_for(lambda: _all_read(db), BOUND, "the redelivery acked")
    return first.received_at - sent, nxt.received_at - asked


def _all_read(db: Path) -> bool:
    store = SqliteMailStore(db)
    try:
        return store.totals()["unread"] == 0
    finally:
        store.close()


def measure(label: str, rounds: int) -> list[tuple[float, float]]:
    """(send → model call, interrupt → next turn's model call) per round, in seconds."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        with _world(label, Path(tmp)) as (api, db, agent):
            store = SqliteMailStore(db)
            store.add_agent(agent)
            store.close()
            fast = {**FAST, "AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "5",
                    "AGENTMAILD_CHANNELS_STDIN_RESTART_BACKOFF_INITIAL_S": "0.1"}  # fmt: skip
            with daemon_factory(db, Path(tmp), defaults=fast) as make:
                d = make()
                try:
                    return [_round(api, db, d.env, i) for i in range(rounds)]
                finally:
                    d.stop()  # SIGTERM: the daemon stops the CLI's processes before it exits
