"""Cold everyday commands (issue 32 item 1): each ≤ 3.0x ``python -c "import sqlite3, json"``.

Every command runs through the installed console script as a person or an agent types it, one
fresh process each, against a SQLite store with two agents and some mail and a running daemon
(``ctl ping`` needs one; ``send`` pokes it). The store is named by ``AGENTMAIL_DB`` except in
the ``--db`` rows, which name it with the global option instead (``agentmaild --db PATH …``).
Each of N rounds runs every command and the baseline once, in a shuffled order; a row's figure
is the command's median wall time, its ratio the median of the per-round ratios to the baseline
run in the same round (load from elsewhere hits both); its note adds the same ratio of CPU
time (user + system), which a machine busy with other work does not inflate. One untimed run
of each first writes the ``.pyc`` files (and the dataclass cache, ``hot/classcache.py``). One
row times ``inbox`` on a PostgreSQL store (``AGENTMAIL_TEST_PG`` or a private cluster), beside
the same baseline, without a target: the issue sets the 3.0x on SQLite, and importing psycopg
alone costs about twice the baseline.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchlib import Figure, agentmaild_script, clean_env, timed_run

TARGET = ("<=", 3.0)
BASE = "import sqlite3, json"


def _interpreter(script: Path) -> str:
    first = script.read_text(encoding="utf-8").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def _ok(argv: list[str], env: dict[str, str], cwd: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[1:])} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout.strip()


def _commands(am: str, msg: str, db: str) -> dict[str, list[str]]:
    """Row name → argv (every one must exit 0)."""
    return {
        "send": [am, "send", "--from", "alice", "--to", "bob", "-s", "hi", "-b", "x"],
        "send --db": [am, "--db", db, "send", "--from", "alice", "--to", "bob", "-s", "hi"],
        "reply": [am, "reply", msg, "--from", "bob", "-b", "ok"],
        "inbox": [am, "inbox", "--agent", "bob"],
        "inbox --db": [am, "--db", db, "inbox", "--agent", "bob"],
        "read": [am, "read", msg],
        "ack": [am, "ack", msg],
        "ack --db": [am, "--db", db, "ack", msg],
        "check": [am, "check", "--agent", "alice"],
        "thread": [am, "thread", msg],
        "list": [am, "list", "--limit", "20"],
        "status": [am, "status"],
        "status --db": [am, "--db", db, "status"],
        "agents list": [am, "agents", "list"],
        "ctl ping": [am, "ctl", "ping"],
    }


@contextlib.contextmanager
def _daemon(am: str, env: dict[str, str], cwd: str) -> Iterator[None]:
    proc = subprocess.Popen([am, "serve"], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([am, "ctl", "ping"], env=env, cwd=cwd,
                             capture_output=True).returncode != 0:  # fmt: skip
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the bench daemon did not answer ctl ping")
            time.sleep(0.2)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _seed(am: str, env: dict[str, str], cwd: str) -> str:
    _ok([am, "agents", "add", "alice", "-c", "lead"], env, cwd)
    _ok([am, "agents", "add", "bob", "-c", "builder"], env, cwd)
    for i in range(20):
        _ok([am, "send", "--from", "alice", "--to", "bob", "-s", f"step {i}", "-b", "y"], env, cwd)
    return _ok([am, "send", "--from", "alice", "--to", "bob", "-s", "q", "-b", "z"], env, cwd)


def _env_for(kind: str, env: dict[str, str]) -> dict[str, str]:
    """A ``--db`` row names the store on its command line only."""
    return {k: v for k, v in env.items() if k != "AGENTMAIL_DB"} if kind.endswith("--db") else env


def _cpu_run(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, str]:
    """Wall and CPU (user + system) seconds of one child, and its stderr when it failed. CPU
    time is what a busy machine does not inflate: waiting for a core counts in wall time only."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t, proc = timed_run(argv, env=env, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return t, cpu, proc.stderr if proc.returncode != 0 else ""


Rounds = tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]


def _rounds(rows: dict[str, list[str]], py: str, n: int, env: dict[str, str], cwd: str
            ) -> Rounds:
    """Per row: wall times (ms), per-round wall ratios and per-round CPU ratios to the round's
    baseline."""
    kinds = ["base", *rows]
    for kind, argv in rows.items():  # untimed: writes the .pyc files
        subprocess.run(argv, env=_env_for(kind, env), cwd=cwd, capture_output=True)
    times: dict[str, list[float]] = {k: [] for k in kinds}
    cpus: dict[str, list[float]] = {k: [] for k in kinds}
    rng = random.Random(32)
    for _ in range(n):
        rng.shuffle(kinds)
        for kind in kinds:
            argv = [py, "-c", BASE] if kind == "base" else rows[kind]
            t, cpu, failed = _cpu_run(argv, _env_for(kind, env), cwd)
            if failed:
                raise RuntimeError(f"{kind} failed: {failed}")
            times[kind].append(1000 * t)
            cpus[kind].append(cpu)
    ratios = {k: [a / b for a, b in zip(times[k], times["base"], strict=True)] for k in rows}
    cpu_ratios = {k: [a / b for a, b in zip(cpus[k], cpus["base"], strict=True) if b > 0]
                  for k in rows}  # fmt: skip
    return times, ratios, cpu_ratios


def _figures(got: Rounds, where: str, target: tuple[str, float] | None = TARGET) -> list[Figure]:
    """The rows; issue 32 sets its target on SQLite (PostgreSQL's row is informative: importing
    psycopg alone costs about twice the baseline)."""
    times, ratios, cpu_ratios = got
    base = statistics.median(times["base"])
    return [
        Figure(name=f"cold `{kind}` ({where})", ours=statistics.median(times[kind]), unit="ms",
               baseline=base, baseline_label=BASE, ratio=statistics.median(ratios[kind]),
               target=target, notes=[
                   f"median of {len(times[kind])} interleaved rounds; the round's baseline run "
                   f"beside it, median {base:.1f} ms; CPU time (user + system) ratio "
                   f"{statistics.median(cpu_ratios[kind]):.2f}x (not inflated by a busy machine); "
                   f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at its end"])
        for kind in ratios
    ]  # fmt: skip


def _postgres(am: str, py: str, n: int, tmp: str) -> list[Figure]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench_postgres import _server

    with _server() as databases:
        env = {**clean_env(tmp), "AGENTMAIL_DB": databases.create()}
        _seed(am, env, tmp)
        got = _rounds({"inbox": [am, "inbox", "--agent", "bob"]}, py, n, env, tmp)
    return _figures(got, "PostgreSQL", target=None)


def run(quick: bool) -> list[Figure]:
    script = agentmaild_script()
    am, py = str(script), _interpreter(script)
    n = 5 if quick else 15
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        db = os.path.join(tmp, "mail.db")
        env = {**clean_env(tmp), "AGENTMAIL_DB": db}
        msg = _seed(am, env, tmp)
        with _daemon(am, env, tmp):
            got = _rounds(_commands(am, msg, db), py, n, env, tmp)
        figures = _figures(got, "SQLite")
        figures += _postgres(am, py, n, tmp)
    return figures
