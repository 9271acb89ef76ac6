"""Ask-and-wait benchmark (issue 14): how soon ``agentmaild ask`` answers once the reply is sent.

The daemon is bench_daemon's harness (the real ``Daemon`` in a child process, an in-process
channel that confirms at once). Each round starts a real ``agentmaild ask`` process (asker
``asker``, a pull agent; the question goes to ``agent-0``, which the harness acks at once), waits
until the question is in the store and ``ask`` has had time to hold its ``await_reply`` request
(untimed), then replies as the CLI does — ``Mailer.reply`` on its own store, then
``control.client.poke`` of the asker — and times from the reply's COMMIT to the moment ``ask``'s
output line arrives on its stdout pipe (CLOCK_MONOTONIC in this process). The baseline is the
woken send→ack latency of bench_daemon, measured in the same harness, in the same run.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_daemon import _woken
from benchlib import Figure, clean_env
from daemon_parts import Floor, Harness
from daemon_parts import pct as _pct


def _question(store: object, asker: str) -> str | None:
    found = store.list_messages(from_agent=asker, type="question", unread=None, limit=1)  # type: ignore[attr-defined]
    return found[0].id if found else None


def _ask_rounds(h: Harness, tmp: Path, n: int) -> list[float]:
    from agentmaild.control.client import poke
    from agentmaild.mail.mailer import Mailer
    from agentmaild.models import Agent
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(h.db)
    store.add_agent(Agent(name="asker", capability="lead"))
    mailer = Mailer(store)
    out: list[float] = []
    try:
        for i in range(n + 2):  # the first two warm up; dropped
            seen = _question(store, "asker")
            ask = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agentmaild",
                    "ask",
                    "--db",
                    str(h.db),
                    "--from",
                    "asker",
                    "--to",
                    "agent-0",
                    "-s",
                    f"question {i}",
                    "-b",
                    "which port?",
                    "--timeout",
                    "60",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=clean_env(str(tmp)),
                cwd=str(tmp),
            )
            deadline = time.monotonic() + 30
            while (qid := _question(store, "asker")) in (None, seen):
                if time.monotonic() > deadline or ask.poll() is not None:
                    raise RuntimeError(f"ask {i} did not send its question")
                time.sleep(0.01)
            time.sleep(0.3)  # ask is holding its await_reply by now (untimed)
            assert qid is not None
            mailer.reply(qid, sender="agent-0", body=f"8080 ({i})")
            t0 = time.monotonic()
            poke(h.sock, ["asker"])
            assert ask.stdout is not None
            line = ask.stdout.readline()
            t1 = time.monotonic()
            ask.wait(30)
            if not line.startswith("8080"):
                raise RuntimeError(f"ask {i} printed {line!r}; stderr {ask.stderr.read()!r}")  # type: ignore[union-attr]
            if i >= 2:
                out.append(t1 - t0)
    finally:
        store.close()
    return out


def run(quick: bool) -> list[Figure]:
    n_ask, n_send = (10, 40) if quick else (40, 200)
    with tempfile.TemporaryDirectory(prefix="bench-ask-") as name:
        tmp = Path(name)
        h = Harness(tmp, "ask", [f"agent-{i}" for i in range(5)])
        floor = Floor(tmp, h.db)
        try:
            woken, _, _ = _woken(h, floor, n_send)
            asked = _ask_rounds(h, tmp, n_ask)
        finally:
            floor.close()
            h.stop()
    p50, w50 = 1000 * _pct(asked, 0.5), 1000 * _pct(woken, 0.5)
    notes = [
        f"{n_ask} asks, each a real `agentmaild ask` process held on the daemon's await_reply; "
        f"reply COMMIT → ask's stdout line: median {1000 * statistics.median(asked):.2f} ms, "
        f"p99 {1000 * _pct(asked, 0.99):.2f} ms, max {1000 * max(asked):.2f} ms; baseline: "
        f"{n_send} woken send→ack in the same harness (bench_daemon's method), "
        f"p50 {w50:.2f} ms",
    ]
    return [
        Figure(
            name="ask: reply→answer p50 (ms)",
            ours=p50,
            unit="ms",
            baseline=w50,
            baseline_label="woken send→ack p50, same run",
            target=("<=", 50.0),
            target_on="ours",
            notes=notes,
        ),
    ]


if __name__ == "__main__":
    for f in run("--quick" in sys.argv):
        print(f)
