"""The load of the daemon benchmarks: sender processes, raw sqlite3 writers, the -wal sampler.

Run as a script with ``sender DB RATE DURATION AGENT...`` it is a sender process
(``Mailer.send`` + poke per message, as the CLI does; RATE 0: as fast as it can); with
``raw DB DURATION`` the baseline writer (stdlib sqlite3, one INSERT per transaction).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchlib import page_size_pragma
from daemon_parts import BODY, INSERT, PRAGMAS, SENDER, Harness, pct, socket_of


def _sender_main(db: str, rate: float, duration: float, agents: list[str]) -> None:
    """Sends (Mailer.send + poke, as the CLI does) paced to ``rate`` a second, or as fast as it
    can when ``rate`` is 0, for ``duration`` seconds; one JSON summary line at the end."""
    from agentmaild.control.client import poke
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(db)
    mailer = Mailer(store)
    sock = socket_of(Path(db))
    errors: list[str] = []
    waits: list[float] = []
    locked = [0.0]  # seconds spent getting SQLite's write lock (BEGIN IMMEDIATE)
    begin = store._begin

    def timed_begin(conn: Any) -> None:
        t = time.monotonic()
        try:
            begin(conn)
        finally:
            locked[0] += time.monotonic() - t

    store._begin = timed_begin  # type: ignore[method-assign]
    print("ready", flush=True)
    sys.stdin.readline()
    start, cpu = time.monotonic(), time.process_time()
    i = 0
    while (due := start + (i / rate if rate > 0 else time.monotonic() - start)) < start + duration:
        if (ahead := due - time.monotonic()) > 0:
            time.sleep(ahead)
        agent = agents[i % len(agents)]
        t0 = time.monotonic()
        try:
            mailer.send(sender=SENDER, to=agent, subject=f"t0={t0!r}", body=BODY)
            poke(sock, [agent])
        except Exception as exc:  # every escaped error is part of the figure
            errors.append(f"{type(exc).__name__}: {exc}")
        waits.append(time.monotonic() - t0)
        i += 1
    elapsed = time.monotonic() - start
    store.close()
    print(json.dumps({"sent": i, "elapsed": elapsed, "errors": len(errors),
                      "first_error": errors[0] if errors else "", "p50": pct(waits, 0.5),
                      "p99": pct(waits, 0.99), "lock_wait": locked[0],
                      "cpu": time.process_time() - cpu}), flush=True)


class WalSampler(threading.Thread):
    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.wal = f"{db}-wal"
        self.samples: list[tuple[float, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.05):
            try:
                size = os.path.getsize(self.wal)
            except OSError:
                size = 0
            self.samples.append((time.monotonic(), size))


def wal_resets(samples: list[tuple[float, int]], start: float, end: float
                ) -> tuple[int, int, float]:
    """(times the -wal file shrank, i.e. was truncated; bytes it grew by; longest gap between)."""
    resets, grown, last, gap, prev = 0, 0, start, 0.0, 0
    for t, size in samples:
        if not start <= t <= end:
            continue
        if size < prev:  # only a TRUNCATE checkpoint (or the last close) shrinks the file
            resets += 1
            gap, last = max(gap, t - last), t
            grown += size
        else:
            grown += size - prev
        prev = size
    return resets, grown, max(gap, end - last)


def run_senders(h: Harness, rate: float, duration: float, senders: int) -> dict[str, Any]:
    """``senders`` processes, each paced to ``rate / senders`` (0: unpaced), released together."""
    argv = [sys.executable, __file__, "sender", str(h.db), str(rate / senders), str(duration)]
    return _released([[*argv, *(h.agents[k::senders] or h.agents)] for k in range(senders)],
                     duration)


def _released(argvs: list[list[str]], duration: float) -> dict[str, Any]:
    """Start every process, wait for its "ready", release them together; their summed rows."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for argv in argvs]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{p.args!r} did not start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        rows = [json.loads(p.communicate(timeout=duration + 120)[0].strip().splitlines()[-1])
                for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return {"sent": sum(r["sent"] for r in rows), "elapsed": max(r["elapsed"] for r in rows),
            "errors": sum(r["errors"] for r in rows),
            "first_error": next((r["first_error"] for r in rows if r["first_error"]), ""),
            "p50": max(r["p50"] for r in rows), "p99": max(r["p99"] for r in rows),
            "lock_wait": sum(r.get("lock_wait", 0.0) for r in rows),
            "cpu": sum(r.get("cpu", 0.0) for r in rows)}


def _raw_main(db: str, duration: float) -> None:
    """The baseline writer: single-row INSERT + COMMIT as fast as it can, for ``duration``."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=5.0)
    for stmt in PRAGMAS:
        conn.execute(stmt)
    print("ready", flush=True)
    sys.stdin.readline()
    start, i, tag = time.monotonic(), 0, os.getpid()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    while time.monotonic() - start < duration:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, (f"msg-raw{tag}-{i:012d}", SENDER, f"agent-{i % 50}", "raw", BODY,
                              stamp))
        conn.execute("COMMIT")
        i += 1
    elapsed = time.monotonic() - start
    conn.close()
    print(json.dumps({"sent": i, "elapsed": elapsed, "errors": 0, "first_error": "",
                      "p50": 0.0, "p99": 0.0}), flush=True)


def raw_baseline(ddl_db: Path, tmp: Path, duration: float, writers: int) -> dict[str, Any]:
    """``writers`` raw writer processes on a fresh file with the messages DDL of ``ddl_db``."""
    db = tmp / "raw.db"
    src = sqlite3.connect(ddl_db)
    ddl = [r[0] for r in src.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'messages' AND sql IS NOT NULL "
        "ORDER BY type DESC, name")]
    src.close()
    conn = sqlite3.connect(db, isolation_level=None)
    for stmt in (page_size_pragma(ddl_db), *PRAGMAS, *ddl):
        conn.execute(stmt)
    conn.close()
    argv = [sys.executable, __file__, "raw", str(db), str(duration)]
    return _released([argv] * writers, duration)


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "sender":
        _sender_main(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:])
    elif len(sys.argv) == 4 and sys.argv[1] == "raw":
        _raw_main(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit("usage: daemon_load.py sender DB RATE S AGENT... | raw DB S")
