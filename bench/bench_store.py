"""Store benchmarks (issue 2 item 9, issue 6 item 4): agentmaild's send path beside raw sqlite3.

(a) single sends: ``Mailer(SqliteMailStore).send`` to one of 100 agents, round-robin, vs stdlib
    ``sqlite3`` inserting the same row into an identical ``messages`` table (its DDL is copied from
    a store agentmaild created), same PRAGMAs, one ``BEGIN IMMEDIATE; INSERT; COMMIT`` per message.
(b) one broadcast to 1,000 registered agents (``to="@all"``) vs stdlib inserting 1,000 such rows
    in one transaction (``executemany``).
(c) 8 writer processes x 250 sends released at the same moment: errors that escaped to a sender,
    worst single-send wait, rows stored, throughput and the largest WAL seen; the baseline is the
    same load through plain sqlite3 (busy_timeout only, no retry loop).

Run as a script with ``writer ...`` arguments it is one of the (c) writer processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchlib import Figure, fmt, median, page_size_pragma

BODY = ("Build step 3 finished; 14 files changed, tests green. Next: review the store module "
        "and the CLI error paths, then report back with the diff summary and open questions. ")
BODY = (BODY * 2)[:200]
SENDER = "bench-sender"
PRAGMAS = ("PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL")
INSERT = (
    "INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority, thread_id,"
    " payload, read, created_at, broadcast_id) VALUES (?, ?, ?, ?, ?, 'status', 'normal', NULL,"
    " NULL, 0, ?, ?)"
)
WRITERS = 8
PER_WRITER = 250


# -- set-up helpers ---------------------------------------------------------------------------
def _our_store(path: Path, agents: int, prefix: str = "agent") -> tuple[Any, list[str]]:
    """A fresh agentmaild store with ``agents`` registered agents; returns (store, names)."""
    from agentmaild.models import Agent
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(path)
    names = [f"{prefix}-{i:04d}" for i in range(agents)]
    for name in names:
        store.add_agent(Agent(name=name, capability="builder"))
    return store, names


def _messages_ddl(our_db: Path) -> list[str]:
    """Our file's page size, then the ``messages`` table and its indexes exactly as agentmaild
    created them (``_baseline_conn`` runs the first before the PRAGMAs, the rest after)."""
    conn = sqlite3.connect(our_db)
    try:
        rows = conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'messages' AND sql IS NOT NULL "
            "ORDER BY type DESC, name"  # the table before its indexes
        ).fetchall()
    finally:
        conn.close()
    return [page_size_pragma(our_db), *(r[0] for r in rows)]


def _baseline_conn(path: Path, ddl: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.execute(ddl[0])  # the page size: on the empty file, before WAL mode
    for p in PRAGMAS:
        conn.execute(p)
    for stmt in ddl[1:]:
        conn.execute(stmt)
    return conn


def _stamp() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def _subject(i: int) -> str:
    return f"build step {i} finished"


# -- (a) single sends ------------------------------------------------------------------------
class _OursSingle:
    """Sends through ``Mailer(SqliteMailStore)`` on a fresh file with 100 agents."""

    def __init__(self, tmp: Path, run: int) -> None:
        from agentmaild.mail.mailer import Mailer

        self.store, self.names = _our_store(tmp / f"single-ours-{run}.db", 100)
        self.mailer = Mailer(self.store)

    def chunk(self, ids: range) -> float:
        send, names = self.mailer.send, self.names
        start = time.perf_counter()
        for i in ids:
            send(sender=SENDER, to=names[i % 100], subject=_subject(i), body=BODY)
        return time.perf_counter() - start

    def close(self) -> None:
        self.store.close()


class _BaseSingle:
    """The same rows through stdlib sqlite3, one ``BEGIN IMMEDIATE; INSERT; COMMIT`` each."""

    def __init__(self, tmp: Path, run: int, ddl: list[str]) -> None:
        self.conn = _baseline_conn(tmp / f"single-base-{run}.db", ddl)
        self.names = [f"agent-{i:04d}" for i in range(100)]

    def chunk(self, ids: range) -> float:
        conn, names = self.conn, self.names
        start = time.perf_counter()
        for i in ids:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(INSERT, (f"msg-{i:018d}", SENDER, names[i % 100], _subject(i), BODY,
                                  _stamp(), None))
            conn.execute("COMMIT")
        return time.perf_counter() - start

    def close(self) -> None:
        self.conn.close()


def bench_single(tmp: Path, quick: bool, ddl: list[str]) -> Figure:
    """Best of ``runs`` runs of ``n`` sends per side, interleaved in chunks of ``step``.

    Each run starts on fresh files; within a run ours and the baseline alternate every ``step``
    sends, so a burst of load from elsewhere on the machine (or a slow checkpoint fsync) lands on
    both sides rather than on one whole run.
    """
    n, runs, step = (300, 2, 100) if quick else (3000, 3, 250)
    ours: list[float] = []
    base: list[float] = []
    for run in range(runs):
        o, b = _OursSingle(tmp, run), _BaseSingle(tmp, run, ddl)
        t_o = t_b = 0.0
        for lo in range(0, n, step):
            ids = range(lo, min(lo + step, n))
            t_o += o.chunk(ids)
            t_b += b.chunk(ids)
        o.close()
        b.close()
        ours.append(t_o)
        base.append(t_b)
    rate_o, rate_b = n / min(ours), n / min(base)
    return Figure(
        name="single sends (messages/s)", ours=rate_o, baseline=rate_b, unit="msg/s",
        baseline_label="sqlite3, 1 txn/row", target=(">=", 0.5),
        notes=[f"{n} sends to 100 agents round-robin, best of {runs} runs (interleaved every "
               f"{step} sends); per send: ours {1e6 * min(ours) / n:.0f} µs, baseline "
               f"{1e6 * min(base) / n:.0f} µs; every run: ours {[round(n / t) for t in ours]}, "
               f"baseline {[round(n / t) for t in base]} msg/s"],
    )


# -- (b) one broadcast to 1,000 agents --------------------------------------------------------
def bench_broadcast(tmp: Path, quick: bool, ddl: list[str]) -> Figure:
    from agentmaild.mail.mailer import Mailer

    agents, runs = (200, 2) if quick else (1000, 3)
    store, names = _our_store(tmp / "bcast-ours.db", agents)
    mailer = Mailer(store)
    conn = _baseline_conn(tmp / "bcast-base.db", ddl)
    ours: list[float] = []
    base: list[float] = []
    try:
        for run in range(runs):
            start = time.perf_counter()
            sent = mailer.send(sender=SENDER, to="@all", subject=_subject(run), body=BODY)
            ours.append(time.perf_counter() - start)
            if len(sent.messages) != agents:
                raise AssertionError(f"broadcast reached {len(sent.messages)} of {agents}")
            start = time.perf_counter()
            stamp, bc = _stamp(), f"bc-{run:018d}"
            rows = [(f"msg-{run:06d}{i:012d}", SENDER, name, _subject(run), BODY, stamp, bc)
                    for i, name in enumerate(names)]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(INSERT, rows)
            conn.execute("COMMIT")
            base.append(time.perf_counter() - start)
    finally:
        store.close()
        conn.close()
    o, b = agents / min(ours), agents / min(base)
    return Figure(
        name=f"broadcast to {agents:,} agents (messages/s)", ours=o, baseline=b, unit="msg/s",
        baseline_label=f"sqlite3, {agents:,} rows in 1 txn",
        notes=[f"best of {runs}; one broadcast: ours {1000 * min(ours):.1f} ms, baseline "
               f"{1000 * min(base):.1f} ms (baseline builds its rows and runs executemany). "
               "No target in issue 2; shown for information."],
    )


# -- (c) 8 concurrent writer processes --------------------------------------------------------
def _writer_main(mode: str, db: str, index: int, n: int, agents: int) -> None:
    """One writer process: open, say "ready", wait for "go", send ``n`` messages, print JSON."""
    if mode == "ours":
        from agentmaild.mail.mailer import Mailer
        from agentmaild.store.sqlite import SqliteMailStore

        store = SqliteMailStore(db)
        mailer = Mailer(store)

        def send(i: int) -> None:
            mailer.send(sender=f"writer-{index}", to=f"agent-{i % agents:04d}",
                        subject=_subject(i), body=BODY)

        def close() -> None:
            store.close()
    else:
        conn = sqlite3.connect(db, isolation_level=None, timeout=5.0)
        for p in PRAGMAS:
            conn.execute(p)

        def send(i: int) -> None:
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(INSERT, (f"msg-w{index}{i:016d}", f"writer-{index}",
                                      f"agent-{i % agents:04d}", _subject(i), BODY, _stamp(), None))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        close = conn.close
    print("ready", flush=True)
    sys.stdin.readline()
    waits: list[float] = []
    errors: list[str] = []
    start = time.time()
    for i in range(n):
        t = time.perf_counter()
        try:
            send(i)
        except Exception as exc:  # every escaped error is the figure, not a crash
            errors.append(f"{type(exc).__name__}: {exc}")
        waits.append(time.perf_counter() - t)
    end = time.time()
    close()
    print(json.dumps({"waits": waits, "errors": errors, "start": start, "end": end}), flush=True)


class _WalWatcher(threading.Thread):
    """Samples the size of the ``-wal`` file every 2 ms; ``peak`` is the largest seen (bytes)."""

    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.wal = f"{db}-wal"
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.002):
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, os.path.getsize(self.wal))


def _start_writers(mode: str, db: Path, writers: int, per: int, agents: int
                   ) -> list[subprocess.Popen[str]]:
    argv = [sys.executable, __file__, "writer", mode, str(db)]
    return [subprocess.Popen([*argv, str(k), str(per), str(agents)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True) for k in range(writers)]


def _result(p: subprocess.Popen[str], per: int) -> dict[str, Any]:
    """A writer's JSON report; a writer that crashed counts all its sends as escaped errors."""
    out, _ = p.communicate(timeout=300)
    try:
        return dict(json.loads(out.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        crash = f"writer process crashed (exit {p.returncode})"
        return {"waits": [], "errors": [crash] * per, "start": time.time(), "end": time.time()}


def _run_writers(mode: str, db: Path, writers: int, per: int, agents: int) -> dict[str, Any]:
    procs = _start_writers(mode, db, writers, per, agents)
    watcher = _WalWatcher(db)
    try:
        for p in procs:  # every writer has imported and opened the store before anyone starts
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"writer {p.args!r} did not start")
        watcher.start()
        go = time.time()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [_result(p, per) for p in procs]
    finally:
        watcher.stop.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    waits = sorted(w for r in results for w in r["waits"])
    errors = [e for r in results for e in r["errors"]]
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    conn.close()
    return {
        "errors": len(errors), "first_error": errors[0] if errors else "",
        "worst_ms": 1000 * waits[-1], "p50_ms": 1000 * median(waits),
        "p99_ms": 1000 * waits[int(0.99 * (len(waits) - 1))],
        "rows": rows, "elapsed": max(float(r["end"]) for r in results) - go,
        "wal_peak_kib": watcher.peak / 1024,
    }


def bench_concurrent(tmp: Path, quick: bool, ddl: list[str]) -> list[Figure]:
    per = 50 if quick else PER_WRITER
    agents = 20
    our_db = tmp / "conc-ours.db"
    store, _ = _our_store(our_db, agents)
    store.close()
    base_db = tmp / "conc-base.db"
    _baseline_conn(base_db, ddl).close()
    ours = _run_writers("ours", our_db, WRITERS, per, agents)
    base = _run_writers("base", base_db, WRITERS, per, agents)
    total = WRITERS * per
    label = "sqlite3, busy_timeout only"
    detail = (f"{WRITERS} processes x {per} sends released together; ours p50/p99/worst "
              f"{ours['p50_ms']:.2f}/{ours['p99_ms']:.1f}/{ours['worst_ms']:.1f} ms, baseline "
              f"{base['p50_ms']:.2f}/{base['p99_ms']:.1f}/{base['worst_ms']:.1f} ms")
    errors_note = [f"first error ours: {ours['first_error']}"] if ours["errors"] else []
    if base["errors"]:
        errors_note.append(f"first error baseline: {base['first_error']}")
    return [
        Figure(name=f"{WRITERS} writers: errors escaped to a sender", ours=ours["errors"],
               baseline=base["errors"], baseline_label=label, ratio=None, unit="",
               target=("==", 0), target_on="ours", notes=[detail, *errors_note]),
        Figure(name=f"{WRITERS} writers: worst single-send wait", ours=ours["worst_ms"], unit="ms",
               baseline=base["worst_ms"], baseline_label=label, target=("<=", 5000),
               target_on="ours",
               notes=["target: no send waits anywhere near busy_timeout (5,000 ms)"]),
        Figure(name=f"{WRITERS} writers: rows stored", ours=ours["rows"], baseline=base["rows"],
               baseline_label=label, target=("==", total), target_on="ours"),
        Figure(name=f"{WRITERS} writers: throughput", ours=total / ours["elapsed"], unit="msg/s",
               baseline=total / base["elapsed"], baseline_label=label,
               notes=[f"wall time go→last writer done: ours {ours['elapsed']:.2f} s, baseline "
                      f"{base['elapsed']:.2f} s (on {os.cpu_count()} CPUs)"]),
        Figure(name=f"{WRITERS} writers: peak WAL size", ours=ours["wal_peak_kib"], unit="KiB",
               baseline=base["wal_peak_kib"], baseline_label=label,
               notes=["sampled every 2 ms. The WAL is reset only when a checkpoint completes "
                      "while no connection reads from it; writers back to back starve that, so "
                      "it grows past the 1,000-page (~4 MiB) autocheckpoint until the load stops "
                      "(the last connection to close deletes it)"]),
    ]


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="agentmaild-bench-") as d:
        tmp = Path(d)
        store, _ = _our_store(tmp / "ddl.db", 0)
        store.close()
        ddl = _messages_ddl(tmp / "ddl.db")
        figures = [bench_single(tmp, quick, ddl), bench_broadcast(tmp, quick, ddl)]
        figures += bench_concurrent(tmp, quick, ddl)
    figures[0].notes.append(f"identical messages DDL copied from agentmaild's store: "
                            f"{len(ddl) - 1} statements (table + {len(ddl) - 2} indexes), in a "
                            f"file of the same page size ({ddl[0].split('= ')[1]} bytes)")
    return figures


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "writer":
        _, _, mode, db, index, n, agents = sys.argv
        _writer_main(mode, db, int(index), int(n), int(agents))
    else:
        for f in run(quick="--quick" in sys.argv):
            print(f.name, fmt(f.ours), fmt(f.baseline), f.verdict())
