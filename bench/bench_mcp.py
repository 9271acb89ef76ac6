"""Mail over MCP against the cold CLI (issue 29): one ``send`` as a ``tools/call`` round trip on an
open ``agentmaild mcp`` session (the SDK's stdio client) against one cold ``agentmaild send``
process, target ≤ 0.1x; and ``check`` (5 unread: take, frame, ack) over MCP against the hook's
cold ``check --inject``, informative.

Both run through the installed console script on one SQLite store, in the same run: each of N
rounds times each of the four once, in a shuffled order; the figure is the median, the ratio the
median of the per-round ratios. Every send is checked to have stored one message from ``x``;
every check to have printed all 5 and left none unread. The 5 messages are seeded through the
Python API outside the timing. One untimed round first writes the ``.pyc`` files.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import Figure, agentmaild_script, clean_env, fmt

AGENT, PEER, UNREAD = "x", "y", 5


def _store(db: Path) -> Any:
    from agentmaild.store.sqlite import SqliteMailStore

    return SqliteMailStore(db)


def _prepare(db: Path) -> None:
    from agentmaild.models import Agent

    store = _store(db)
    store.add_agent(Agent(name=AGENT, capability="builder"))
    store.add_agent(Agent(name=PEER, capability="lead"))
    store.close()


def _seed(db: Path, tag: str) -> None:
    from agentmaild.mail.mailer import Mailer

    store = _store(db)
    try:
        for i in range(UNREAD):
            Mailer(store).send(sender=PEER, to=AGENT, subject=f"{tag} step {i} done",
                               body=f"Step {i} finished; please review the diff. " * 3)
    finally:
        store.close()


def _unread(db: Path, agent: str) -> int:
    store = _store(db)
    try:
        return len(store.inbox(agent, unread_only=True))
    finally:
        store.close()


class _Rounds:
    def __init__(self, db: Path, env: dict[str, str], cwd: str) -> None:
        self.db, self.env, self.cwd = db, env, cwd
        self.script = str(agentmaild_script())
        self.times: dict[str, list[float]] = {k: [] for k in ("mcp_send", "cli_send",
                                                               "mcp_check", "cli_check")}
        self.sent = 0

    def _cold(self, argv: list[str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
        start = time.perf_counter()
        done = subprocess.run([self.script, *argv], capture_output=True, env=self.env,
                              cwd=self.cwd, check=False)  # fmt: skip
        return time.perf_counter() - start, done

    async def _one(self, session: Any, kind: str, i: int) -> float:
        if kind.endswith("check"):
            _seed(self.db, f"{kind} {i}")  # distinct: identical mail would collapse
        start = time.perf_counter()
        if kind == "mcp_send":
            result = await session.call_tool("send", {"to": PEER, "subject": f"mcp {i}"})
            ok = not result.is_error
        elif kind == "mcp_check":
            result = await session.call_tool("check", {})
            ok = len(result.structured_content["acked"]) == UNREAD
        else:
            argv = (["send", "--to", PEER, "--subject", f"cli {i}", "--from", AGENT]
                    if kind == "cli_send" else ["check", "--inject", "--agent", AGENT])  # fmt: skip
            _, done = self._cold([*argv, "--db", str(self.db)])
            ok = done.returncode == 0 and (
                kind == "cli_send" or done.stdout.count(b"--- message ") == UNREAD)
        elapsed = time.perf_counter() - start
        if not ok:
            raise RuntimeError(f"{kind} misbehaved in round {i}")
        if kind.endswith("check") and _unread(self.db, AGENT):
            raise RuntimeError(f"{kind} left mail unread")
        self.sent += kind.endswith("send")
        return elapsed

    async def run(self, n: int) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        args = ["mcp", "--agent", AGENT, "--db", str(self.db)]
        params = StdioServerParameters(command=self.script, args=args, env=self.env, cwd=self.cwd)
        kinds = list(self.times)
        rng = random.Random(29)
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            for i in range(n + 1):  # round 0 is untimed
                rng.shuffle(kinds)
                for kind in kinds:
                    t = await self._one(session, kind, i)
                    if i > 0:
                        self.times[kind].append(1000 * t)


def _stats(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f} / min {min(xs):.2f} ms"


def run(quick: bool) -> list[Figure]:
    import anyio

    n = 8 if quick else 30
    with tempfile.TemporaryDirectory(prefix="agentmaild-mcp-") as d:
        db = Path(d) / "mail.db"
        _prepare(db)
        rounds = _Rounds(db, clean_env(d), d)
        anyio.run(rounds.run, n)
        stored = len(_store(db).list_messages(from_agent=AGENT, limit=10_000))
    if stored != rounds.sent:
        raise RuntimeError(f"{rounds.sent} sends but {stored} messages from {AGENT}")
    t = rounds.times
    med = {k: statistics.median(v) for k, v in t.items()}

    def paired(ours: str, base: str) -> float:
        return statistics.median(o / b for o, b in zip(t[ours], t[base], strict=True))

    raw = (f"N={n} rounds after 1 untimed round, the 4 operations shuffled per round; MCP send "
           f"{_stats(t['mcp_send'])}, cold send {_stats(t['cli_send'])}; MCP check "
           f"{_stats(t['mcp_check'])}, cold check --inject {_stats(t['cli_check'])}; every send "
           f"stored one message from {AGENT}, every check took all {UNREAD}")
    return [
        Figure(name="send over MCP (tools/call, open session) vs cold `agentmaild send` (ms)",
               ours=med["mcp_send"], unit="ms", baseline=med["cli_send"],
               ratio=paired("mcp_send", "cli_send"), baseline_label="agentmaild send (cold)",
               target=("<=", 0.1), notes=[raw]),
        Figure(name="check over MCP (5 unread) vs cold `check --inject` (ms)",
               ours=med["mcp_check"], unit="ms", baseline=med["cli_check"],
               ratio=paired("mcp_check", "cli_check"),
               baseline_label="agentmaild check --inject (cold)"),
    ]


if __name__ == "__main__":
    for f in run(quick="--quick" in sys.argv):
        print(f.name, fmt(f.ours), fmt(f.baseline), f.verdict(), *f.notes, sep="\n  ")
