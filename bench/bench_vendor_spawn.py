"""The spawn channel's overhead per batch over a bare Codex, Gemini CLI and OpenCode turn.

Ours: ``VendorSpawnChannel.deliver`` of a batch rendered from real messages in a real store (the
preset's argv, env scrub, session id stored on the first turn and resumed afterwards, the turn's
MCP server where the preset wires one — the relay to the daemon's MCP socket, served here as the
daemon serves it — the turn log, the JSON event parse and the ack decision), timed from the call
to its return. Baseline: the
same pinned CLI run directly with the same argv (``VendorPreset.build_argv``), the same text on
stdin and a resume of its own session, through ``subprocess.run``. Both talk to the same loopback
stand-in of the vendor's API (tests/support) with an isolated HOME. N rounds run both once each,
in alternating order, after one untimed warm-up round that creates both sessions; the ratio is
the median of the per-round ratios. Target ≤ 1.2.
"""

from __future__ import annotations

import json
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

from agentmaild.channels.vendor_spawn import VendorSpawnChannel  # noqa: E402
from agentmaild.channels.vendors import PRESETS, VendorPreset  # noqa: E402
from agentmaild.config import Config  # noqa: E402
from agentmaild.control.protocol import socket_path_for  # noqa: E402
from agentmaild.ids import iso_now, new_id  # noqa: E402
from agentmaild.mcpserver.hosted import McpSocket  # noqa: E402
from agentmaild.models import Agent, Batch, Message  # noqa: E402
from agentmaild.render.framing import render_batch  # noqa: E402
from agentmaild.store.location import StoreLocation  # noqa: E402
from agentmaild.store.records import InsertRequest  # noqa: E402
from agentmaild.store.sqlite import SqliteMailStore  # noqa: E402
from tests.support.loopback_api import LoopbackApi  # noqa: E402
from tests.support.vendor_env import VENDORS, vendor_binary  # noqa: E402

ROUNDS = {"codex": (4, 12), "gemini": (3, 8), "opencode": (2, 5)}  # (quick, full)


class _Bare:
    """The baseline: the CLI run by hand, keeping its own session."""

    def __init__(self, preset: VendorPreset, binary: str, env: dict[str, str], cwd: Path) -> None:
        self.preset, self.binary, self.env, self.cwd = preset, binary, env, cwd
        self.session: str | None = str(uuid.uuid4()) if preset.chooses_id else None
        self.started = False

    def turn(self, text: str) -> float:
        argv = self.preset.build_argv((self.binary,), self.session, resume=self.started)
        env = {**self.env, "PWD": str(self.cwd)}
        began = time.perf_counter()
        done = subprocess.run(
            argv, input=text.encode(), capture_output=True, env=env, cwd=self.cwd, timeout=180
        )
        elapsed = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(f"bare {self.preset.name} failed: {done.stderr[-300:]!r}")
        for line in done.stdout.splitlines():
            if self.session is None and line.startswith(b"{"):
                self.session = self.preset.session_of(json.loads(line))
        self.started = True
        return elapsed


async def _measure(
    vendor: str, rounds: int, tmp: Path, api: LoopbackApi
) -> list[tuple[float, float]]:
    binary = vendor_binary(vendor)
    project = tmp / "proj"
    project.mkdir()
    _, env = VENDORS[vendor].setup(tmp, api)
    store = SqliteMailStore(tmp / "store" / "mail.db")
    agent = store.add_agent(
        Agent(name="alice", capability="builder", channel="spawn", preset=vendor,
              command=(binary,), cwd=str(project), settings={"env": env})
    )  # fmt: skip
    bare = _Bare(PRESETS[vendor], binary, env, project)
    pairs: list[tuple[float, float]] = []
    location = StoreLocation.of(str(tmp / "store" / "mail.db"))
    hosted = McpSocket(socket_path_for(location), location)  # as the daemon serves its turns
    async with anyio.create_task_group() as tg, VendorSpawnChannel(
        agent, Config(), tmp / "store" / "mail.db", preset=PRESETS[vendor]
    ) as channel:
        await tg.start(hosted.serve, True)
        for n in range(rounds + 1):  # round 0 warms both up (and creates both sessions)
            msg = Message(id=new_id("msg"), from_agent="bob", to_agent="alice",
                          subject=f"round {n}", body=f"body {n}", created_at=iso_now())  # fmt: skip
            store.insert(InsertRequest(messages=(msg,), now=time.time()))
            batch = store.claim("alice", max_messages=10, max_chars=10_000, lease_s=300,
                                now=time.time())  # fmt: skip
            assert batch is not None
            text = render_batch(batch.messages, agent="alice", delivery_id=batch.delivery_id)
            if n % 2:
                base = bare.turn(text)
                mine = await _timed(channel, batch, text)
            else:
                mine = await _timed(channel, batch, text)
                base = bare.turn(text)
            store.ack_delivery(batch.delivery_id, now=time.time())
            if n:
                pairs.append((mine, base))
        tg.cancel_scope.cancel()
    store.close()
    return pairs


async def _timed(channel: VendorSpawnChannel, batch: Batch, text: str) -> float:
    began = time.perf_counter()
    await channel.deliver(batch, text)
    return time.perf_counter() - began


def _figure(vendor: str, rounds: int, pairs: list[tuple[float, float]]) -> Figure:
    ratio = statistics.median(p[0] / p[1] for p in pairs)
    return Figure(
        name=f"spawn channel: one batch, {vendor} turn (median)",
        ours=statistics.median(p[0] for p in pairs) * 1000,
        unit="ms",
        baseline=statistics.median(p[1] for p in pairs) * 1000,
        baseline_label=f"bare {vendor}, same argv and input",
        ratio=ratio,
        target=("<=", 1.2),
        notes=[
            f"{rounds} paired rounds against the loopback stand-in, pinned CLI; per round "
            + ", ".join(f"{a * 1000:.0f}/{b * 1000:.0f}" for a, b in pairs)
            + " ms (ours/bare)"
        ],
    )


def run(quick: bool) -> list[Figure]:
    figures = []
    for vendor in ("codex", "gemini", "opencode"):
        rounds = ROUNDS[vendor][0 if quick else 1]
        with tempfile.TemporaryDirectory() as tmp, VENDORS[vendor].api("ok") as api:
            try:
                pairs = anyio.run(_measure, vendor, rounds, Path(tmp), api)
            except Exception:
                log = Path(tmp, "store", "logs", "alice.log")
                print(log.read_text()[-3000:] if log.exists() else "no agent log", file=sys.stderr)
                raise
        figures.append(_figure(vendor, rounds, pairs))
    return figures


if __name__ == "__main__":
    for figure in run(quick="--quick" in sys.argv):
        print(figure)
