"""The spawn channel's overhead per batch over a bare ``claude -p`` (issue 4 item 6).

Ours: ``ClaudeSpawnChannel.deliver`` of a batch rendered from real messages in a real store
(argv, env, session id persisted on the first turn, ``--resume`` afterwards, the turn's MCP
server — the preset's relay to the daemon's MCP socket, served here as the daemon serves it —
the turn log, the stream-json parse and the ack decision), timed from the call to its return.
Baseline: the same pinned ``claude`` binary run directly with the same flags (no MCP server), the
same kind of input line and ``--resume`` of its own session, through ``subprocess.run``. Both talk
to the same loopback Messages API stand-in (tests/support/anthropic_stub.py) with an isolated
HOME. N rounds run both once each, in alternating order; the ratio is the median of the per-round
ratios. Target ≤ 1.2.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
from benchlib import Figure

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agentmaild.channels.claude import STREAM_JSON_FLAGS, ClaudeSpawnChannel  # noqa: E402
from agentmaild.channels.commands import user_line  # noqa: E402
from agentmaild.config import Config  # noqa: E402
from agentmaild.control.protocol import socket_path_for  # noqa: E402
from agentmaild.ids import iso_now, new_id  # noqa: E402
from agentmaild.mcpserver.hosted import McpSocket  # noqa: E402
from agentmaild.models import Agent, Batch, Message  # noqa: E402
from agentmaild.render.framing import render_batch  # noqa: E402
from agentmaild.store.location import StoreLocation  # noqa: E402
from agentmaild.store.records import InsertRequest  # noqa: E402
from agentmaild.store.sqlite import SqliteMailStore  # noqa: E402
from tests.support.anthropic_stub import AnthropicStub  # noqa: E402
from tests.support.claude_env import claude_binary, claude_env, isolated_home  # noqa: E402


def _bare(
    claude: str, env: dict[str, str], cwd: Path, session_args: list[str], line: bytes
) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [claude, *STREAM_JSON_FLAGS, *session_args],
        input=line,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"bare claude failed: {done.stderr[-300:]!r}")
    return elapsed


async def _timed(channel: ClaudeSpawnChannel, batch: Batch, text: str) -> float:
    started = time.perf_counter()
    await channel.deliver(batch, text)
    return time.perf_counter() - started


async def _measure(
    rounds: int, tmp: Path, claude: str, stub: AnthropicStub
) -> list[tuple[float, float]]:
    project = tmp / "proj"
    project.mkdir()
    env = claude_env(isolated_home(tmp, project), stub.base_url)
    db = tmp / "store" / "mail.db"
    store = SqliteMailStore(db)
    agent = store.add_agent(
        Agent(
            name="alice",
            capability="builder",
            channel="spawn",
            preset="claude",
            command=(claude,),
            cwd=str(project),
            settings={"env": env},
        )
    )
    bare_session = str(uuid.uuid4())
    pairs: list[tuple[float, float]] = []
    location = StoreLocation.of(str(db))
    hosted = McpSocket(socket_path_for(location), location)  # as the daemon serves its turns
    async with anyio.create_task_group() as tg, ClaudeSpawnChannel(agent, Config(), db) as channel:
        await tg.start(hosted.serve, True)
        for n in range(rounds + 1):  # round 0 warms both up (and creates both sessions)
            msg = Message(
                id=new_id("msg"),
                from_agent="bob",
                to_agent="alice",
                subject=f"round {n}",
                body=f"benchmark body {n}",
                created_at=iso_now(),
            )
            store.insert(InsertRequest(messages=(msg,), now=time.time()))
            batch = store.claim(
                "alice", max_messages=10, max_chars=10_000, lease_s=300, now=time.time()
            )
            assert batch is not None
            text = render_batch(batch.messages, agent="alice", delivery_id=batch.delivery_id)
            flag = "--session-id" if n == 0 else "--resume"
            line = user_line(text, str(uuid.uuid4()))

            if n % 2:
                base = _bare(claude, env, project, [flag, bare_session], line)
                mine = await _timed(channel, batch, text)
            else:
                mine = await _timed(channel, batch, text)
                base = _bare(claude, env, project, [flag, bare_session], line)
            store.ack_delivery(batch.delivery_id, now=time.time())
            if n:
                pairs.append((mine, base))
        tg.cancel_scope.cancel()
    store.close()
    return pairs


def run(quick: bool) -> list[Figure]:
    rounds = 4 if quick else 15
    claude = claude_binary()
    with tempfile.TemporaryDirectory() as tmp, AnthropicStub("ok") as stub:
        pairs = anyio.run(_measure, rounds, Path(tmp), claude, stub)
    ours = statistics.median(p[0] for p in pairs)
    base = statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[0] / p[1] for p in pairs)
    return [
        Figure(
            name="spawn channel: one batch, claude -p turn (median)",
            ours=ours * 1000,
            unit="ms",
            baseline=base * 1000,
            baseline_label="bare claude -p, same input",
            ratio=ratio,
            target=("<=", 1.2),
            notes=[f"{rounds} paired rounds against the loopback API stand-in, pinned CLI"],
        )
    ]


if __name__ == "__main__":
    for figure in run(quick="--quick" in sys.argv):
        print(figure)
