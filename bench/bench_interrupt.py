"""Interrupt → next turn started, per channel (issue 30).

Spawn: a real ``agentmaild serve`` and a spawn agent (tests/agents/long_turn_agent.py: a turn
that says LONG holds for 5 minutes, as a real process group with a grandchild). Each round sends
a LONG mail, waits for its turn to start, then times ``agentmaild interrupt`` (the real CLI, a
process of its own, as the operator) from its start to the moment the next turn, the one that
opens with the interrupt's mail, has started (the stand-in stamps it). Baseline, measured in the
same run and the same way: a plain send to the idle agent → its turn started (the delivery the
interrupt adds its stop to). Target: the interrupt's next turn within 2 s.

The real CLIs (``interrupt_clis``): Claude Code headless (spawn) and long-lived (stdin), Codex's
app-server, Gemini CLI and OpenCode over ACP, OpenCode's server; there "next turn started" is the
stand-in receiving the next turn's model call. Informative (the CLIs' own start-up dominates).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import Figure

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agentmaild.models import Agent  # noqa: E402
from agentmaild.store.sqlite import SqliteMailStore  # noqa: E402
from tests.support.daemon import FAST, agent_cmd, daemon_factory  # noqa: E402
from tests.support.waiting import read_jsonl, wait_for  # noqa: E402

ROUNDS = (2, 8)  # quick, full


def _cli(db: Path, env: dict[str, str], *args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "agentmaild", *args, "--db", str(db), "--json"],
                          env=env, capture_output=True, timeout=60, check=True)  # fmt: skip
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def _spawn_round(db: Path, env: dict[str, str], rec: Path, i: int) -> tuple[float, float]:
    """(send → turn started, interrupt → next turn started) of one round, in seconds."""
    n = len(read_jsonl(rec))
    sent = time.time()
    _cli(db, env, "send", "--to", "worker", "--from", "operator", "-s", f"r{i}", "-b", f"LONG {i}")
    turn = wait_for(lambda: read_jsonl(rec)[n:], 20, "the long turn")[0]
    asked = time.time()
    answer = _cli(db, env, "interrupt", "worker", "--from", "operator", "--reason", f"stop {i}")
    if answer.get("interrupted") is not True:
        raise RuntimeError(f"not interrupted: {answer}")
    nxt = wait_for(lambda: read_jsonl(rec)[n + 1 :], 20, "the next turn")[0]
    if answer["id"] not in nxt["text"]:
        raise RuntimeError("the next turn does not carry the interrupt's mail")
    wait_for(lambda: SqliteMailStore(db).totals()["unread"] == 0, 20, "all acked")
    return turn["started"] - sent, nxt["started"] - asked


def _spawn(rounds: int) -> Figure:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        db, rec = tmp_path / "store" / "mail.db", tmp_path / "turns.jsonl"
        store = SqliteMailStore(db)
        store.add_agent(Agent(name="worker", capability="builder", channel="spawn",
                              command=agent_cmd("long_turn_agent.py", str(rec))))  # fmt: skip
        store.close()
        with daemon_factory(db, tmp_path, defaults=FAST) as make:
            d = make()
            pairs = [_spawn_round(db, d.env, rec, i) for i in range(rounds)]
    send_s = statistics.median(p[0] for p in pairs)
    stop_s = statistics.median(p[1] for p in pairs)
    return Figure(
        name="interrupt → next turn started (spawn, median)",
        ours=stop_s,
        unit="s",
        baseline=send_s,
        baseline_label="send → turn started, idle agent",
        target=("<=", 2.0),
        target_on="ours",
        notes=[f"{rounds} rounds; max {max(p[1] for p in pairs):.3f} s; SIGINT to the turn's "
               "process group ends the stand-in and its grandchild"],
    )


def _cli_figure(label: str, rounds: int) -> Figure:
    from interrupt_clis import measure

    pairs = measure(label, rounds)
    return Figure(
        name=f"interrupt → next turn's model call ({label}, median)",
        ours=statistics.median(p[1] for p in pairs),
        unit="s",
        baseline=statistics.median(p[0] for p in pairs),
        baseline_label="send → model call, idle agent",
        notes=[f"{rounds} rounds, the real pinned CLI; max {max(p[1] for p in pairs):.3f} s"],
    )


def run(quick: bool) -> list[Figure]:
    from interrupt_clis import CHANNELS

    cli_rounds = 1 if quick else 3
    return [_spawn(ROUNDS[0 if quick else 1]),
            *(_cli_figure(label, cli_rounds) for label in CHANNELS)]  # fmt: skip


if __name__ == "__main__":
    for figure in run(quick="--quick" in sys.argv):
        print(figure)
